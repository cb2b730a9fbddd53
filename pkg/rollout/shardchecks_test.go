package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Issue 11 (the job provider): shard checks during the bake, in the simulated cluster.

func withShardCheck(w *world, name, image string, dryRun bool) {
	w.rsvc.Spec.Strategy.Checks = append(w.rsvc.Spec.Strategy.Checks, routingv1alpha1.ShardCheck{Name: name, DryRun: dryRun,
		Job: &routingv1alpha1.JobCheck{ActiveDeadlineSeconds: ptr.To(int64(30)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "verify", Image: image}}}}}})
}

func (w *world) shardCheckJobs() []string {
	return w.jobsOf(ComponentShardCheck)
}

// A passing check: one Job per shard, each shard promoted only after its check passed; every
// shard's status lists the check as Passed.
func TestShardCheckPasses(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "smoke", "verify:ok", false)
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.shardCheckJobs()); n != 3 {
		t.Fatalf("%d check Jobs, want one per shard", n)
	}
	for _, ss := range w.rsvc.Status.Shards {
		if len(ss.Checks) != 1 || ss.Checks[0].Phase != routingv1alpha1.CheckPhasePassed {
			t.Fatalf("shard %s checks %+v", ss.Name, ss.Checks)
		}
	}
	// Restarted manager, same state: nothing more is created.
	if plan := Compute(w.observed()); len(plan.Actions) != 0 {
		t.Fatalf("a second reconcile acts: %v", plan.Actions)
	}
}

// A check that fails in us-east fails the shard at once (well before the 60 s progress deadline
// or the end of the bake), rolls us-east back, names the check, and never reaches eu-west.
func TestShardCheckFailureRollsBackAtOnce(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "404-ratio", "verify:fail-in-us-east", false)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	start := w.now
	w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	if d := w.now.Sub(start); d > 20*time.Second {
		t.Fatalf("the failed check took %s to fail the shard", d)
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "check 404-ratio failed in shard us-east") {
		t.Fatalf("Stalled = %+v", c)
	}
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	if n := len(w.shardCheckJobs()); n != 1 {
		t.Fatalf("%d check Jobs: eu-west and ap-south must never be checked", n)
	}
}

// A dryRun check that fails is reported (Warning Event, status) and never fails the shard.
func TestShardCheckDryRunNeverFails(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "new-metric", "verify:fail", true)
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if !w.sawEvent(routingv1alpha1.ReasonShardCheckFailed) {
		t.Fatal("no ShardCheckFailed Event for the dry-run failure")
	}
	if ss := w.rsvc.Status.Shards[0]; len(ss.Checks) != 1 || ss.Checks[0].Phase != routingv1alpha1.CheckPhaseFailed || !ss.Checks[0].DryRun {
		t.Fatalf("us-east checks %+v", ss.Checks)
	}
}

// A check that hangs fails at its deadline (30 s + 10 s): bounded (I3); a check still running
// when the bake is over holds the shard; a new revision mid-check gets checks of its own.
func TestShardCheckThatHangsFailsAtItsDeadline(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "slow", "verify:hang", false)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(5))
	w.update("app:v2", "1", "migrate:ok")
	w.run(30, func() bool { return len(w.shardCheckJobs()) == 1 })
	for i := 0; i < 15; i++ {
		w.step(time.Second)
	}
	if c := w.condition(routingv1alpha1.ConditionReconciling); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "checks still run") {
		t.Fatalf("Reconciling = %+v", c)
	}
	w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "did not finish within activeDeadlineSeconds (30s)") {
		t.Fatalf("Stalled = %+v", c)
	}
	// v3 with a check that passes: its own Job per shard.
	w.rsvc.Spec.Strategy.Checks[0].Job.Template.Spec.Containers[0].Image = "verify:ok"
	w.update("app:v3", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.shardCheckJobs()); n != 1+3 {
		t.Fatalf("%d check Jobs, want 1 (v2) + 3 (v3)", n)
	}
}

// A pre-check (when: BeforeStart) runs before each shard starts: the shard's ReplicaSet is
// created only after it passed; one failing before eu-west fails the rollout before eu-west is
// touched (us-east, which v2 reached, rolls back).
func TestShardPreCheck(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "capacity", "verify:ok", false)
	w.rsvc.Spec.Strategy.Checks[0].When = []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart}
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.creationOrder(); got != "verify,us,verify,eu,verify,ap" {
		t.Fatalf("order %s", got)
	}
	for _, ss := range w.rsvc.Status.Shards {
		if len(ss.Checks) != 1 || ss.Checks[0].When != routingv1alpha1.CheckWhenBeforeStart || ss.Checks[0].Phase != routingv1alpha1.CheckPhasePassed {
			t.Fatalf("shard %s checks %+v", ss.Name, ss.Checks)
		}
	}

	w.rsvc.Spec.Strategy.Checks[0].Job.Template.Spec.Containers[0].Image = "verify:fail-in-eu-west"
	w.update("app:v3", "1", "migrate:ok")
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "check capacity failed in shard eu-west before it starts") {
		t.Fatalf("Stalled = %+v", c)
	}
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" })
}
