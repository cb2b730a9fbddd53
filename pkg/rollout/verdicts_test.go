package rollout

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// S-44: a verdict that decided an action is not forgotten. Each test here failed on main at
// ad93a96.

// A failed measurement in us-east fails the shard and starts its rollback; the status write of
// that reconcile is lost (a conflict, then a restart). The next measurements pass, but the
// rollback the failure started goes on: v2 is never promoted on the strength of the passes.
func TestFailedMeasurementsRollbackSurvivesALostStatusWrite(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	withMeasuredCheck(w, "404-ratio", 5, func(req MeasurementRequest, n int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if req.Shard == "us-east" && n == 2 {
			return routingv1alpha1.MeasurementFailed, "0.3", false
		}
		return routingv1alpha1.MeasurementSuccessful, "0", false
	})
	lost := false
	w.loseStatus = func(p Plan) bool {
		if !lost && p.Status.Failure != nil {
			lost = true
			return true
		}
		return false
	}
	w.update("app:v2", "1", "migrate:ok")
	w.run(600, func() bool {
		return lost && w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
	if f := w.rsvc.Status.Failure; f == nil || f.Reason != routingv1alpha1.ReasonShardCheckFailed || f.Shard != "us-east" || !strings.Contains(f.Message, "0.3") {
		t.Fatalf("status.failure %+v, want us-east's failed check", f)
	}
	for _, l := range w.log {
		if strings.Contains(l, "eu-west") && strings.Contains(l, "CreateReplicaSet") {
			t.Fatalf("eu-west was started after us-east failed: %s", l)
		}
	}
}

// An abort whose status write is lost: the abort is recorded as handled on the ReplicaSets, so it
// does not act again, and the rollback it started goes on rather than the rollout resuming.
func TestAbortSurvivesALostStatusWrite(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return w.stepOf("us-east").Step == routingv1alpha1.ShardStepBaking })
	lost := false
	w.loseStatus = func(p Plan) bool {
		if !lost && p.Status.Failure != nil {
			lost = true
			return true
		}
		return false
	}
	w.annotate(routingv1alpha1.AnnotationAbort, "stop")
	w.run(600, func() bool {
		return lost && w.stalledWith(routingv1alpha1.ReasonAborted) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
}

// A new leader whose clock is 3 s behind the last writer's takes over mid-bake, right after a
// measurement: the bake's start, the check's start and its counts are what they were, and the
// shard is promoted no earlier than before (S-44).
func TestAClockThreeSecondsBehindChangesNoBakeCheckOrCount(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(60))
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		ss := w.stepOf("us-east")
		return ss.Step == routingv1alpha1.ShardStepBaking && len(ss.Checks) == 1 && ss.Checks[0].Count == 2
	})
	// The reconcile right after the second measurement, as the new leader sees the time.
	before := w.stepOf("us-east").DeepCopy()
	w.now = w.now.Add(-3 * time.Second)
	w.reconcile()
	w.now = w.now.Add(3 * time.Second)
	after := w.stepOf("us-east")
	if after.Step != before.Step || !after.StepStartTime.Equal(before.StepStartTime) {
		t.Fatalf("the bake changed: step %s since %v, was %s since %v", after.Step, after.StepStartTime, before.Step, before.StepStartTime)
	}
	if len(after.Checks) != 1 || after.Checks[0].Count != before.Checks[0].Count || after.Checks[0].Successful != before.Checks[0].Successful ||
		!after.Checks[0].StartTime.Equal(before.Checks[0].StartTime) {
		t.Fatalf("the check changed: %+v, was %+v", after.Checks, before.Checks)
	}
}
