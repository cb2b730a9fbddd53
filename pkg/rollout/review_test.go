package rollout

import (
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Cases a review of the issue 40 changes (places not seen, the database's next version, verdicts
// kept in the cluster, one region's write error) found, each demonstrated failing before its fix.

// Found by a review of the S-43..S-45 changes: a retry clears status.failure, but the failure record on a ReplicaSet in a cluster that
// does not answer cannot be cleared; when the cluster returns, recoverFailure reads it back (status
// has no failure) and the retried rollout is failed again with the old abort.
func TestFoundInReviewRetryResurrectedByUnseenFailureRecord(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(200, func() bool { return w.stepOf("us-east").Step == routingv1alpha1.ShardStepBaking })
	w.annotate(routingv1alpha1.AnnotationAbort, "a1")
	w.untilStep(300, func() bool {
		return w.stalledWith(routingv1alpha1.ReasonAborted) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
	old := w.rsvc.Status.Failure.DeepCopy()
	v2 := w.rsOf("us-east", "app:v2")
	t.Logf("record on %s: %s", v2.Name, v2.Annotations[annotationFailure])

	w.cut("us-east", routingv1alpha1.ClusterUnreachable)
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	for i := 0; i < 5; i++ {
		w.attackStep(time.Second)
	}
	if f := w.rsvc.Status.Failure; f != nil {
		t.Fatalf("retry did not clear the failure: %+v", f)
	}
	t.Logf("after retry (us-east cut): failure=%v, us-east v2 record still %q", w.rsvc.Status.Failure, w.rss[v2.Name].Annotations[annotationFailure])

	w.restore("us-east")
	w.attackStep(time.Second)
	if f := w.rsvc.Status.Failure; f != nil {
		t.Fatalf("the retried rollout failed again as soon as us-east answered, with the old failure: %+v (old %+v)\nlog:\n%s",
			f, old, tail(w.log, 10))
	}
}

// Found by a review (and older than these changes): with shards in clusters, a reconcile that
// changes nothing still changes the status: ClustersReachable's lastTransitionTime moves each time.
func TestFoundInReviewClustersReachableFlaps(t *testing.T) {
	w := clustered(t)
	w.now = w.now.Add(time.Minute)
	w.reconcile()
	before := w.rsvc.Status.DeepCopy()
	w.now = w.now.Add(time.Minute)
	plan := w.reconcile()
	if len(plan.Actions) == 0 && !equalStatus(before, &w.rsvc.Status) {
		b, a := before.Conditions, w.rsvc.Status.Conditions
		for i := range a {
			for j := range b {
				if a[i].Type == b[j].Type && !a[i].LastTransitionTime.Equal(&b[j].LastTransitionTime) {
					t.Errorf("BUG (I4): %s lastTransitionTime %v -> %v with nothing changed", a[i].Type, b[j].LastTransitionTime, a[i].LastTransitionTime)
				}
			}
		}
	}
}

// Found by a review of the S-43..S-45 changes: the binary-first revert of TestRevertWhileTheMigrationRunsRollsNothingOntoIt, with the
// migration to 2 held by a queue (Kueue: spec.suspend, Suspended=True before its deadline)
// instead of running. pendingSchemas counts only live() Jobs, and a suspended Job is not live:
// v1 ([1, 1]) is rolled back, then the queue admits the Job and the database goes to 2 under v1.
func TestFoundInReviewQueuedMigrationIsNotPending(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:hang")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(400, func() bool { return w.migrationJobsFor("2") == 1 })
	var mig *batchv1.Job
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2" {
			mig = j
		}
	}
	// The queue holds it (as Kueue does for a Job created while its queue is full).
	mig.Spec.Suspend = ptr.To(true)
	mig.Status.Active = 0
	mig.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", LastTransitionTime: metav1.Time{Time: w.now}}}
	w.reconcile()
	t.Logf("queued: SchemaReady %+v", w.condition(routingv1alpha1.ConditionSchemaReady).Reason)

	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	for i := 0; i < 60; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("v1 was rolled back while the migration to 2, which v1 cannot run on, is queued: %s", got)
	}
	// The queue admits it.
	mig.Spec.Suspend = ptr.To(false)
	mig.Status.Conditions = nil
	mig.Spec.Template.Spec.Containers[0].Image = "migrate:ok"
	w.tick() // checkInvariants: I1
}

// Found by a review of the S-43..S-45 changes: a contract Job that "succeeds" with an unreadable report is ContractFailed
// (InvalidSchemaReport) by contractDecide, yet contractDone records it as contracted=3 on every
// ReplicaSet. Once the Job is deleted (a TTL, or a person giving it up), the record turns it into
// ContractComplete: the contract never runs, and a revert to v1 ([1, 2]) is refused, while the
// database is still at 2.
func TestFoundInReviewUnconfirmedContractRecordedAsDone(t *testing.T) {
	w := steadyOn(t, compat("", "2"))
	w.rsvc.Spec.Schema.Contract = contractSpec("3", "contract:garbage", 0)
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.run(400, func() bool {
		return len(w.contractJobs()) == 1 && w.contractReason() == routingv1alpha1.ReasonContractFailed
	})
	for i := 0; i < 3; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	for _, rs := range w.rss {
		t.Logf("%s contracted=%q", rs.Name, rs.Annotations[annotationContracted])
	}
	t.Logf("ContractReady %s: %s (db %s)", w.contractReason(), w.condition(routingv1alpha1.ConditionContractReady).Message, w.confirmed)
	for name, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentContract {
			w.deleteJob(name)
		}
	}
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	c := w.condition(routingv1alpha1.ConditionContractReady)
	t.Logf("after the Job is deleted: ContractReady %s %s: %s; contract Jobs %v; db %s", c.Status, c.Reason, c.Message, w.contractJobs(), w.confirmed)
	if c.Reason == routingv1alpha1.ReasonContractComplete && w.confirmed != "3" {
		t.Errorf("ContractComplete from the record alone, database at %s", w.confirmed)
	}
	w.rsvc.Spec.Schema.Contract = nil
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "2")
	for i := 0; i < 60; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	t.Logf("revert to v1 ([1, 2]) with the database at %s: %s; Stalled %v", w.confirmed, w.shardImages(), w.condition(routingv1alpha1.ConditionStalled).Reason)
}

// Found by a review of the S-43..S-45 changes: hub only, no cluster. The reconcile that acts on a retry hits a 409 on its first scale
// (optimistic lock, stale cache): the controller stops applying (the RecordControls that clear
// the failure record come after it) and, for a Conflict, still writes the plan's status, with the
// failure cleared and the retry handled. The next reconcile reads the old record back.
func TestFoundInReviewRetryLostWhenTheApplyStopsAtAConflict(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return w.stepOf("us-east").Step == routingv1alpha1.ShardStepBaking })
	w.annotate(routingv1alpha1.AnnotationAbort, "a1")
	w.run(200, func() bool {
		return w.stalledWith(routingv1alpha1.ReasonAborted) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
	for i := 0; i < 3; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	plan := Compute(w.observed())
	for _, a := range plan.Actions {
		t.Logf("retry plan: %s", a.String())
	}
	for _, a := range plan.Actions {
		if a.Kind == ScaleReplicaSet {
			t.Logf("409 on %s: nothing after it is applied; the status is written", a.String())
			break
		}
		w.apply(a)
	}
	w.rsvc.Status = plan.Status
	t.Logf("status written: failure=%v lastHandledRetry=%q", plan.Status.Failure, plan.Status.LastHandledRetry)
	w.tick()
	w.now = w.now.Add(time.Second)
	w.reconcile()
	if f := w.rsvc.Status.Failure; f != nil {
		t.Errorf("the failure the retry cleared is back: %+v; lastHandledRetry %q (the retry does not act again)", f, w.rsvc.Status.LastHandledRetry)
	}
}

// Found by a review of the S-43..S-45 changes: a failure record is untrusted input; its reason becomes the reason of Stalled, Ready
// and Reconciling, which the CRD constrains to ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$.
func TestFoundInReviewForgedFailureReasonBreaksTheStatusWrite(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return w.stepOf("us-east").Step == routingv1alpha1.ShardStepBaking })
	rev := Revision(&w.rsvc.Spec)
	rs := w.rsOf("us-east", "app:v2")
	SetAnnotations(rs, map[string]string{annotationFailure: `{"revision":"` + rev + `","reason":"not a reason!","time":"2026-11-30T12:00:00Z"}`})
	plan := w.reconcile()
	re := regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)
	for _, c := range plan.Status.Conditions {
		if !re.MatchString(c.Reason) {
			t.Errorf("condition %s has reason %q, which the API server refuses: every status write fails", c.Type, c.Reason)
		}
	}
	t.Logf("actions: %v", plan.Actions)
}

// Found by a review of the S-43..S-45 changes: S-44 through S-45. us-east's cluster answers reads; its second measurement fails and
// the plan starts the rollback there. The first write of that plan to us-east's API server gets a
// 503: as routingservice_controller.go does, the other places' actions are applied and the status
// is decided again with us-east frozen, and written. The failure the measurement decided is in
// neither the status (us-east was not evaluated) nor a record (the record goes on the update
// revision's ReplicaSets, all in us-east, whose writes stopped at the 503).
func TestFoundInReviewSpokeWriteErrorForgetsTheFailedVerdict(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	withMeasuredCheck(w, "404-ratio", 5, func(req MeasurementRequest, n int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if req.Shard == "us-east" && n == 2 {
			return routingv1alpha1.MeasurementFailed, "0.3", false
		}
		return routingv1alpha1.MeasurementSuccessful, "0", false
	})
	w.update("app:v2", "1", "migrate:ok")
	hit := false
	for i := 0; i < 800; i++ {
		o := w.observed()
		plan := Compute(o)
		if len(plan.Measurements) > 0 {
			for _, req := range plan.Measurements {
				o.Measurements = append(o.Measurements, w.measure(req))
			}
			plan = Compute(o)
		}
		if !hit && plan.Status.Failure != nil {
			hit = true
			for _, a := range plan.Actions {
				shard := ""
				if a.ReplicaSet != nil {
					shard = a.ReplicaSet.Labels[LabelShard]
				}
				if a.Job != nil {
					shard = a.Job.Labels[LabelShard]
				}
				if a.Pod != nil {
					shard = a.Pod.Labels[LabelShard]
				}
				if shard == "us-east" {
					w.log = append(w.log, "503 (skipped): "+a.String())
					continue
				}
				w.apply(a)
			}
			o.Clusters = map[string]ClusterView{}
			for k, v := range w.clusters {
				o.Clusters[k] = v
			}
			v := o.Clusters["us-east"]
			v.State, v.Message = routingv1alpha1.ClusterUnreachable, "its API server failed a write: 503"
			o.Clusters["us-east"] = v
			// As the reconciler does (controllers/routingservice_controller.go): decided again
			// from the first plan's status, with us-east frozen.
			o.RoutingService = w.rsvc.DeepCopy()
			o.RoutingService.Status = *plan.Status.DeepCopy()
			plan = Compute(o)
			plan.Actions = nil
			if plan.Status.Failure == nil {
				t.Fatalf("the status written after the 503 forgot the failure the first plan decided")
			}
		}
		for _, a := range plan.Actions {
			w.log = append(w.log, w.now.Format("15:04:05")+" "+a.String())
			w.apply(a)
		}
		w.rsvc.Status = plan.Status
		if hit && (w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) || strings.Contains(w.shardImages(), "eu-west=app:v2")) {
			break
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	t.Logf("end: %s; failure %v", w.shardImages(), w.rsvc.Status.Failure)
	if strings.Contains(w.shardImages(), "eu-west=app:v2") {
		t.Errorf("us-east's failed measurement was forgotten and v2 went on to eu-west")
	}
}
