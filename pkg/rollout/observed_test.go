package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// AddPod sorts pods one way for every caller: routing pods counted by controller (terminating ones
// too), Job pods kept for their reports, any other pod left out.
func TestAddPod(t *testing.T) {
	pod := func(component string, owner types.UID, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelComponent: component}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{UID: owner, Controller: ptr.To(true)}}
		}
		if terminating {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return p
	}
	var o Observed
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		kept bool
	}{
		{"a routing pod", pod(ComponentRouting, "rs1", false), true},
		{"a terminating routing pod", pod(ComponentRouting, "rs1", true), true},
		{"a routing pod without a controller", pod(ComponentRouting, "", true), true},
		{"a migration pod", pod(ComponentMigration, "job1", false), true},
		{"a check pod", pod(ComponentCheck, "job2", false), true},
		{"a shard-check pod", pod(ComponentShardCheck, "job3", false), true},
		{"a contract pod", pod(ComponentContract, "job4", false), true},
		{"another pod", pod("debug", "x", false), false},
		{"no component", pod("", "x", false), false},
	} {
		if got := o.AddPod(c.pod); got != c.kept {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.kept)
		}
	}
	if len(o.Pods) != 7 || o.RoutingPods["rs1"] != 2 || o.RoutingPods[""] != 1 || o.TerminatingPods["rs1"] != 1 || len(o.TerminatingPods) != 1 {
		t.Fatalf("pods %d, routing %v, terminating %v", len(o.Pods), o.RoutingPods, o.TerminatingPods)
	}
}

// The plan carries the budgets the shards should have, as intents the reconciler applies.
func TestPlanCarriesTheBudgets(t *testing.T) {
	w := steady(t)
	plan := w.reconcile()
	if len(plan.DisruptionBudgets) != len(w.rsvc.Spec.Shards) || plan.DisruptionBudgets[0].Name != DisruptionBudgetName(w.rsvc.Name, w.rsvc.Spec.Shards[0].Name) {
		t.Fatalf("plan's budgets %d, want one per shard", len(plan.DisruptionBudgets))
	}
	w.rsvc.Spec.DisruptionBudget.Enabled = ptr.To(false)
	if plan := w.reconcile(); len(plan.DisruptionBudgets) != 0 {
		t.Fatalf("disabled: plan's budgets %d, want none", len(plan.DisruptionBudgets))
	}
}
