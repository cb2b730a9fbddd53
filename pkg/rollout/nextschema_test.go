package rollout

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Issue 40 item 3: a migration that has started and not ended is a version the database may
// reach. Each test here failed on main at ad93a96.

// A binary-first rollout: v2 (runs on [1, 2]) is on every shard and its migration to 2 runs. The
// spec is reverted to v1 (runs on [1, 1]) meanwhile. Rolling v1 back while the migration runs
// would leave it serving on schema 2 the moment the migration ends (the 404 incident): nothing of
// v1 is scaled up while it runs, and once it has confirmed 2 the revert is refused.
func TestRevertWhileTheMigrationRunsRollsNothingOntoIt(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:hang")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(400, func() bool { return w.migrationJobsFor("2") == 1 })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("binary-first: the migration started before every shard ran v2: %s", got)
	}
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	for i := 0; i < 60; i++ {
		w.step(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("v1 was scaled up while the migration to 2, which v1 cannot run on, still runs: %s; log:\n%s", got, strings.Join(w.log, "\n"))
	}
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c == nil || c.Status != "False" || c.Reason != routingv1alpha1.ReasonWaitingForMigration || !strings.Contains(c.Message, "[1, 1]") || !strings.Contains(c.Message, "schema 2") {
		t.Fatalf("SchemaReady = %+v, want False WaitingForMigration naming schema 2 and v1's range", c)
	}
	// The migration ends and confirms 2: the revert is refused, v2 keeps serving.
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2" {
			j.Spec.Template.Spec.Containers[0].Image = "migrate:ok"
		}
	}
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonRollbackRefused) })
	if w.confirmed != "2" {
		t.Fatalf("the database is at %q, want 2", w.confirmed)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the migration confirmed 2, the refused revert must leave v2 serving: %s", got)
	}
}

// The same revert, with the migration failing instead: it ends without confirming 2 (its report
// says the database is still at 1), so v1 may roll back, and does.
func TestRevertAfterTheMigrationFailedRollsBack(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:hang")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(400, func() bool { return w.migrationJobsFor("2") == 1 })
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	for i := 0; i < 10; i++ {
		w.step(time.Second)
	}
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2" {
			j.Spec.Template.Spec.Containers[0].Image = "migrate:noop"
		}
	}
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the migration to 2 ended without effect, the revert to v1 rolls: %s", got)
	}
}

// The history that protects a rollback outlives the Job that made it: once the contract to 3 has
// run, deleting its Job (by hand, or a cleanup) neither runs the contract again nor lets a spec
// reverted to v1 (runs on [1, 2]) roll v1 onto the contracted schema.
func TestDeletedContractJobRunsNothingAgainAndHoldsARevert(t *testing.T) {
	w := steadyOn(t, compat("", "2"))
	w.rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 0)
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.run(400, func() bool {
		return w.confirmed == "3" && w.rsvc.Status.Schema.Phase == routingv1alpha1.SchemaPhaseComplete
	})
	for name, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentContract {
			delete(w.jobs, name)
			for pn, pod := range w.pods {
				if pod.Labels[LabelComponent] == ComponentContract {
					delete(w.pods, pn)
				}
			}
		}
	}
	for i := 0; i < 30; i++ {
		w.step(time.Second)
	}
	if jobs := w.contractJobs(); len(jobs) != 0 {
		t.Fatalf("the contract ran again after its Job was deleted: %v", jobs)
	}
	w.rsvc.Spec.Schema.Contract = nil
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "2")
	for i := 0; i < 60; i++ {
		w.step(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("a revert to v1 (runs on [1, 2]) rolled onto the contracted schema 3 once the contract Job was gone: %s; log:\n%s", got, strings.Join(w.log, "\n"))
	}
	if !w.stalledWith(routingv1alpha1.ReasonRollbackRefused) {
		t.Fatalf("Stalled = %+v, want RollbackRefused", w.condition(routingv1alpha1.ConditionStalled))
	}
}

// The wait for a migration that may still run is not for ever: the revert above, with the
// migration Job failed (past its deadline) but one pod stuck terminating (its node gone). Nothing
// of v1 is scaled up while the pod may run; after progressDeadlineSeconds Stalled says so and what a
// person can do. Once the pod is gone the wait ends.
func TestAWaitForAStuckMigrationPodStalls(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:hang")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(400, func() bool { return w.migrationJobsFor("2") == 1 })
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	stuck := w.now
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2" {
			j.Status.Active, j.Status.Terminating = 0, ptr.To(int32(1))
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", LastTransitionTime: metav1.NewTime(stuck)}}
		}
	}
	limit := w.rsvc.Spec.Strategy.ProgressDeadline()
	for w.now.Before(stuck.Add(limit - 2*time.Second)) {
		w.step(time.Second)
		if w.isTrue(routingv1alpha1.ConditionStalled) {
			t.Fatalf("Stalled %s after %s, before progressDeadlineSeconds", w.reason(routingv1alpha1.ConditionStalled), w.now.Sub(stuck))
		}
	}
	w.run(10, func() bool { return w.stalledWith(routingv1alpha1.ReasonWaitingForMigration) })
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "only terminating ones") || !strings.Contains(c.Message, "kubectl delete pod --force") {
		t.Fatalf("Stalled message %q must say the pods only terminate, and what a person can do", c.Message)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("v1 was scaled up while a pod of the migration to 2 may still run: %s", got)
	}
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2" {
			j.Status.Terminating = ptr.To(int32(0))
		}
	}
	w.run(400, func() bool { return !w.stalledWith(routingv1alpha1.ReasonWaitingForMigration) })
}
