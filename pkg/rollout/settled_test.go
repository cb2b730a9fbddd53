package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// usEast returns the v1 and v2 ReplicaSets of us-east in w.
func (w *world) usEast(t *testing.T) (v1, v2 *appsv1.ReplicaSet) {
	t.Helper()
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] != "us-east" {
			continue
		}
		switch rs.Spec.Template.Spec.Containers[0].Image {
		case "app:v1":
			v1 = rs
		case "app:v2":
			v2 = rs
		}
	}
	if v1 == nil || v2 == nil {
		t.Fatalf("us-east has no v1 and v2 ReplicaSets: %s", w.shardImages())
	}
	return v1, v2
}

func scales(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Kind == ScaleReplicaSet {
			out = append(out, a.String())
		}
	}
	return out
}

// TestPromotionWaitsForTheReplicaSetController: a rolling step that would scale a ReplicaSet the
// ReplicaSet controller has not caught up with (its last scale-down's pod still counted, or a
// terminating pod that is gone still counted) waits for the controller's status write; once it is
// written the step is the one it would have been. A rollback does not wait.
func TestPromotionWaitsForTheReplicaSetController(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	// Up to v1 2, v2 2 in us-east (v1 3→2, then v2 1→2).
	for i := 0; i < 50; i++ {
		w.reconcile()
		if strings.Contains(w.shardImages(), "us-east=app:v1:2 us-east=app:v2:2") {
			break
		}
		w.tick()
	}
	v1, v2 := w.usEast(t)
	if *v1.Spec.Replicas != 2 || *v2.Spec.Replicas != 2 {
		t.Fatalf("want us-east at v1 2, v2 2: %s", w.shardImages())
	}
	v1.UID, v2.UID = types.UID("uid-v1"), types.UID("uid-v2")
	// The ReplicaSet controller has observed both scales, v2's two pods are available, but v1's
	// status still counts the pod it is deleting.
	v1.Status.ObservedGeneration, v2.Status.ObservedGeneration = v1.Generation, v2.Generation
	v1.Status.Replicas, v1.Status.AvailableReplicas = 3, 3
	v2.Status.Replicas, v2.Status.AvailableReplicas, v2.Status.ReadyReplicas = 2, 2, 2
	plan := Compute(w.observed())
	if s := scales(plan); len(s) != 0 {
		t.Fatalf("scaled while v1's status counts a removed pod: %v", s)
	}
	if plan.RequeueAfter <= 0 || plan.RequeueAfter > settleRecheck {
		t.Fatalf("RequeueAfter %v, want a recheck within %v", plan.RequeueAfter, settleRecheck)
	}

	// Written, but with the pod as terminating; the cache still has it: settled.
	v1.Status.Replicas, v1.Status.AvailableReplicas, v1.Status.TerminatingReplicas = 2, 2, ptr.To[int32](1)
	o := w.observed()
	o.TerminatingPods = map[types.UID]int32{"uid-v1": 1}
	if s := scales(Compute(o)); len(s) != 1 {
		t.Fatalf("a terminating pod the cluster still has must not hold the step: %v", s)
	}
	// The pod is gone but status still counts it: the controller has a write to make.
	o.TerminatingPods = nil
	if s := scales(Compute(o)); len(s) != 0 {
		t.Fatalf("scaled while status counts a terminating pod that is gone: %v", s)
	}
	// Generation not yet observed: wait too.
	v1.Status.TerminatingReplicas = ptr.To[int32](0)
	v1.Status.ObservedGeneration = v1.Generation - 1
	if s := scales(Compute(w.observed())); len(s) != 0 {
		t.Fatalf("scaled a ReplicaSet whose generation is not observed: %v", s)
	}
	v1.Status.ObservedGeneration = v1.Generation
	plan = w.reconcile()
	if *v1.Spec.Replicas != 1 || *v2.Spec.Replicas != 2 {
		t.Fatalf("settled step: want v1 1 and v2 2, got %s (%v)", w.shardImages(), scales(plan))
	}

	// A rollback is not held: abort now, with v2's status behind (its last scale not observed).
	w.annotate(routingv1alpha1.AnnotationAbort, "now")
	v2.Status.ObservedGeneration = v2.Generation - 1
	v1.Status.ObservedGeneration = v1.Generation - 1
	plan = w.reconcile()
	if len(scales(plan)) == 0 {
		t.Fatalf("a rollback waited for the ReplicaSet controller: %v", plan.Actions)
	}
}

// drive reconciles w as run does, until done, and returns every action applied.
func (w *world) drive(limit int, done func() bool) []Action {
	var all []Action
	for i := 0; i < limit; i++ {
		plan := w.reconcile()
		all = append(all, plan.Actions...)
		if done() {
			return all
		}
		w.tick()
		step := time.Second
		if len(plan.Actions) == 0 && plan.RequeueAfter > step {
			step = plan.RequeueAfter
		}
		w.now = w.now.Add(step)
	}
	w.t.Fatalf("not done after %d rounds", limit)
	return nil
}

// TestOnlyAPromotionRemovesPodsItself: the step that scales an old ReplicaSet of a shard to 0
// during a promotion asks the reconciler to delete its pods (drain.go), once per shard; a
// rollback's scale to 0 never does.
func TestOnlyAPromotionRemovesPodsItself(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	var removing []string
	for _, a := range w.drive(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) }) {
		if a.Kind == ScaleReplicaSet && a.RemovePods {
			removing = append(removing, a.ReplicaSet.Labels[LabelShard])
			if a.Replicas != 0 || a.ReplicaSet.Spec.Template.Spec.Containers[0].Image != "app:v1" {
				t.Fatalf("RemovePods on something else than v1 scaled to 0: %s", a.String())
			}
		}
	}
	if got := strings.Join(removing, " "); got != "us-east eu-west ap-south" {
		t.Fatalf("want one v1 scale to 0 with RemovePods per shard, in order; got %q", got)
	}

	w = steady(t)
	w.update("app:broken", "1", "migrate:ok")
	rolledBack := false
	for _, a := range w.drive(300, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	}) {
		if a.Kind == ScaleReplicaSet && a.Replicas == 0 {
			rolledBack = true
			if a.RemovePods {
				t.Fatalf("a rollback asked to remove pods itself: %s", a.String())
			}
		}
	}
	if !rolledBack {
		t.Fatal("the broken revision was never scaled to 0")
	}
}
