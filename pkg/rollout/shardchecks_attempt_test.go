package rollout

import (
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
)

// Shard checks run afresh on every attempt of a shard, and a check Job's name held by another
// object stalls the rollout like any other name schemagate needs.

// checkAttemptsIn lists the shard-check Jobs of shard, with their attempt labels: "1,2".
func (w *world) checkAttemptsIn(shard string) string {
	var out []string
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentShardCheck && j.Labels[LabelShard] == shard {
			out = append(out, j.Labels[LabelCheckAttempt])
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// countEvents counts the Events of reason the planner asked for so far.
func (w *world) countEvents(reason string) int {
	n := 0
	for _, e := range w.events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// A job check fails in eu-west (the dependency it probes is down); eu-west and us-east, which
// v2 reached, roll back. The dependency is fixed (here: the check's image) and a retry is
// annotated: each shard v2 rolls through again runs its check as a new attempt with a Job of its
// own, and the rollout completes. Before, the old Failed Job (one name per shard, check and
// revision) was read again and eu-west failed at once, and us-east reused its earlier pass.
func TestShardCheckRetryRunsEveryCheckAfresh(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "smoke", "verify:fail-in-eu-west", false)
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	if got := w.checkAttemptsIn("us-east") + " " + w.checkAttemptsIn("eu-west"); got != "1 1" {
		t.Fatalf("check attempts us-east, eu-west = %s, want 1 1", got)
	}

	w.rsvc.Spec.Strategy.Checks[0].Job.Template.Spec.Containers[0].Image = "verify:ok"
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.checkAttemptsIn("us-east") + " " + w.checkAttemptsIn("eu-west") + " " + w.checkAttemptsIn("ap-south"); got != "1,2 1,2 1" {
		t.Fatalf("check attempts us-east, eu-west, ap-south = %s, want 1,2 1,2 1", got)
	}
	for _, ss := range w.rsvc.Status.Shards {
		if len(ss.Checks) != 1 || ss.Checks[0].Phase != routingv1alpha1.CheckPhasePassed {
			t.Fatalf("shard %s checks %+v", ss.Name, ss.Checks)
		}
		j := w.jobs[ss.Checks[0].Job]
		if j == nil || j.Status.Succeeded != 1 {
			t.Fatalf("shard %s: status names Job %q, which did not succeed", ss.Name, ss.Checks[0].Job)
		}
	}
	if name := w.rsvc.Status.Shards[1].Checks[0].Job; !strings.HasSuffix(name, "-2") {
		t.Fatalf("eu-west's check Job is %s, want attempt 2", name)
	}
}

// The same revision applied again later (v2 failed its check, v3, then v2 again from Git) runs
// its checks afresh: a new attempt, never the earlier attempt's result.
func TestShardCheckRevisionAppliedAgainRunsAfresh(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "smoke", "verify:fail-in-us-east", false)
	// Every finished Job is kept, so the failed attempt is there to be read.
	w.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(50))
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })

	w.rsvc.Spec.Strategy.Checks[0].Job.Template.Spec.Containers[0].Image = "verify:ok"
	w.update("app:v3", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	// us-east: v2 attempt 1 (failed), v3 attempt 1, v2 attempt 2.
	if got := w.checkAttemptsIn("us-east"); got != "1,1,2" {
		t.Fatalf("us-east check attempts %s, want 1,1,2", got)
	}
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("failure %+v", w.rsvc.Status.Failure)
	}
}

// A prometheus check that failed in us-east keeps nothing of its counts for the retry: the
// retry measures again from zero, count times, and passes.
func TestMeasuredCheckRetryStartsFromZero(t *testing.T) {
	w := steady(t)
	down := true
	withMeasuredCheck(w, "404-ratio", 2, func(req MeasurementRequest, _ int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if down && req.Shard == "us-east" {
			return routingv1alpha1.MeasurementFailed, "0.5", false
		}
		return routingv1alpha1.MeasurementSuccessful, "0", false
	})
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	before := w.measuredIn("us-east")

	down = false
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := w.measuredIn("us-east") - before; n != 2 {
		t.Fatalf("the retry measured us-east %d times, want 2 (count)", n)
	}
	if c := w.rsvc.Status.Shards[0].Checks[0]; c.Count != 2 || c.Successful != 2 || c.Failed != 0 || c.Phase != routingv1alpha1.CheckPhasePassed {
		t.Fatalf("us-east check after the retry %+v", c)
	}
}

// A Job of another owner holds the name of us-east's check Job: Stalled with NameConflict naming
// it, nothing fails or rolls back (us-east stays on v2), no Job is created for the check, and the
// rollout goes on once the name is free.
func TestShardCheckJobNameTaken(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "smoke", "verify:ok", false)
	w.update("app:v2", "1", "migrate:ok")
	name := ShardCheckJobName(w.rsvc.Name, "us-east", "smoke", Revision(&w.rsvc.Spec), routingv1alpha1.CheckWhenBake, 1)
	w.jobs[name] = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "uid-foreign",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "uid-cron", Controller: ptr.To(true)}}},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonNameConflict) })
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "default/"+name) || !strings.Contains(c.Message, "CronJob nightly") || !strings.Contains(c.Message, "check smoke of shard us-east") {
		t.Fatalf("Stalled = %+v", c)
	}
	if !w.sawEvent(EventNameConflict) || w.sawEvent(routingv1alpha1.ReasonShardCheckFailed) {
		t.Fatal("want a NameConflict Event and no ShardCheckFailed")
	}
	for i := 0; i < 20; i++ {
		w.step(5 * time.Second)
	}
	if !w.stalledWith(routingv1alpha1.ReasonNameConflict) || w.rsvc.Status.Failure != nil {
		t.Fatalf("after 100 s: Stalled %+v, failure %+v", w.condition(routingv1alpha1.ConditionStalled), w.rsvc.Status.Failure)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("shards %s: nothing may roll back", got)
	}
	if n := len(w.shardCheckJobs()); n != 0 {
		t.Fatalf("%d check Jobs of ours created while the name is held", n)
	}
	delete(w.jobs, name)
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.shardCheckJobs()); n != 3 {
		t.Fatalf("%d check Jobs, want one per shard", n)
	}
}

// An inconclusive check holds its shard, but not for ever (I3): Reconciling while it waits for a
// person, then, progressDeadlineSeconds (60 s) after it became inconclusive, Stalled with reason
// ShardCheckInconclusive and a message that says a person must decide; nothing fails or rolls
// back, and a promote still goes on.
func TestInconclusiveHoldEndsStalled(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementInconclusive, "NaN"))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		return w.reason(routingv1alpha1.ConditionReconciling) == routingv1alpha1.ReasonShardCheckInconclusive
	})
	held := w.now
	w.run(200, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckInconclusive) })
	if d := w.now.Sub(held); d < 59*time.Second || d > 61*time.Second {
		t.Fatalf("Stalled %s after the hold began, want 60 s (progressDeadlineSeconds)", d)
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "a person must decide") || !strings.Contains(c.Message, "progressDeadlineSeconds (60s)") {
		t.Fatalf("Stalled = %+v", c)
	}
	if r := w.condition(routingv1alpha1.ConditionReconciling); r.Status != metav1.ConditionFalse {
		t.Fatalf("Reconciling = %+v", r)
	}
	events := w.countEvents(routingv1alpha1.ReasonShardCheckInconclusive)
	for i := 0; i < 10; i++ {
		w.step(10 * time.Second)
	}
	if n := w.countEvents(routingv1alpha1.ReasonShardCheckInconclusive) - events; n != 0 {
		t.Fatalf("%d more ShardCheckInconclusive Events while stalled, want none", n)
	}
	if w.rsvc.Status.Failure != nil || w.shardImages() != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("failure %+v, shards %s", w.rsvc.Status.Failure, w.shardImages())
	}
	w.annotate(routingv1alpha1.AnnotationPromote, "looked-at-it")
	w.run(100, func() bool { return w.rsvc.Status.Shards[0].Step == routingv1alpha1.ShardStepPromoted })
	if w.stalledWith(routingv1alpha1.ReasonShardCheckInconclusive) {
		t.Fatal("still Stalled after the promote")
	}
}

// A successCondition that does not compile (the API server cannot tell) is refused before any
// shard moves: Stalled, reason InvalidCheck naming the field and CEL's complaint; no ReplicaSet
// of the new revision, no measurement; v1 keeps serving. Fixed in the spec, the rollout goes on.
// Before, us-east rolled to v2 and then failed its check at the first measurement.
func TestInvalidCheckConditionRefusedBeforeAnyShardMoves(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 1, always(routingv1alpha1.MeasurementSuccessful, "0"))
	measure := w.measure
	w.measure = func(req MeasurementRequest) TakenMeasurement {
		// As the providers do: a condition that does not compile is fatal at once.
		if _, err := checkspec.CompileCondition(req.Check.Prometheus.SuccessCondition); err != nil {
			return TakenMeasurement{MeasurementKey: req.MeasurementKey, Fatal: true, Result: routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementError, Message: err.Error()}}
		}
		return measure(req)
	}
	w.rsvc.Spec.Strategy.Checks[0].Prometheus.SuccessCondition = "result < 0.01 &&"
	w.update("app:v2", "1", "migrate:ok")
	for i := 0; i < 60; i++ {
		w.step(time.Second)
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !w.stalledWith(routingv1alpha1.ReasonInvalidCheck) || !strings.Contains(c.Message, "spec.strategy.checks[0].prometheus.successCondition") || !strings.Contains(c.Message, "does not compile") {
		t.Fatalf("Stalled = %+v", c)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("shards %s", got)
	}
	for _, rs := range w.rss {
		if rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
			t.Fatalf("ReplicaSet %s of the refused revision was created", rs.Name)
		}
	}
	if len(w.measured) != 0 || w.countEvents(routingv1alpha1.ReasonInvalidCheck) != 1 {
		t.Fatalf("%d measurements, %d InvalidCheck Events; want 0 and 1", len(w.measured), w.countEvents(routingv1alpha1.ReasonInvalidCheck))
	}
	w.rsvc.Spec.Strategy.Checks[0].Prometheus.SuccessCondition = "result < 0.01"
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

// A spec that cannot roll out never touches the database: with a check that does not compile and
// a new schema version, no migration Job is created (SchemaReady says why, Stalled InvalidCheck);
// fixed, the migration runs and the rollout goes on.
func TestInvalidCheckStartsNoMigration(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 1, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.rsvc.Spec.Strategy.Checks[0].Prometheus.SuccessCondition = "result < 0.01 &&"
	before := len(w.jobsOf(ComponentMigration))
	w.update("app:v2", "2", "migrate:v2")
	for i := 0; i < 60; i++ {
		w.step(time.Second)
	}
	if got := len(w.jobsOf(ComponentMigration)); got != before {
		t.Fatalf("%d migration Jobs created for a spec that cannot roll out", got-before)
	}
	if !w.stalledWith(routingv1alpha1.ReasonInvalidCheck) {
		t.Fatalf("Stalled = %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c == nil || c.Reason != routingv1alpha1.ReasonInvalidCheck || !strings.Contains(c.Message, "does not start") {
		t.Fatalf("SchemaReady = %+v", c)
	}
	w.rsvc.Spec.Strategy.Checks[0].Prometheus.SuccessCondition = "result < 0.01"
	w.rsvc.Generation++
	w.run(300, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if got := len(w.jobsOf(ComponentMigration)); got != before+1 {
		t.Fatalf("%d migration Jobs after the fix, want one more", got-before)
	}
}
