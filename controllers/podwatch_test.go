package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// A routing pod wakes its RoutingService only when a restart count changes (the pod-health
// gate); a readiness flip or a create does not, and a pod of no RoutingService maps to nothing.
func TestRoutingPodsWakeOnRestarts(t *testing.T) {
	pod := func(restarts int32, ready bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "edge", Labels: map[string]string{rollout.LabelComponent: rollout.ComponentRouting, rollout.LabelName: "rs-a"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "router", RestartCount: restarts, Ready: ready}}}}
	}
	if !restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(0, true), ObjectNew: pod(1, true)}) {
		t.Error("a restart did not wake the RoutingService")
	}
	if restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(1, true), ObjectNew: pod(1, false)}) {
		t.Error("a readiness flip woke the RoutingService")
	}
	if restartsChanged.Create(event.CreateEvent{Object: pod(0, true)}) {
		t.Error("a create woke the RoutingService")
	}
	if reqs := routingPodOwner(context.Background(), pod(1, true)); len(reqs) != 1 || reqs[0].Name != "rs-a" || reqs[0].Namespace != "edge" {
		t.Errorf("requests %v", reqs)
	}
	other := pod(1, true)
	other.Labels[rollout.LabelComponent] = rollout.ComponentMigration
	if reqs := routingPodOwner(context.Background(), other); len(reqs) != 0 {
		t.Errorf("a migration pod mapped through the routing pods' watch: %v", reqs)
	}
}

// A pod with the readiness gate of a check at PodReady also wakes its RoutingService when its
// containers become ready (it is due for its check) and when the gate changes; one without the
// gate does not.
func TestGatedPodsWakeOnContainersReady(t *testing.T) {
	pod := func(gated bool, containersReady, gate corev1.ConditionStatus) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "edge", Labels: map[string]string{rollout.LabelComponent: rollout.ComponentRouting, rollout.LabelName: "rs-a"}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: containersReady}}}}
		if gated {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: routingv1alpha1.PodCheckGate}}
		}
		if gate != "" {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: routingv1alpha1.PodCheckGate, Status: gate})
		}
		return p
	}
	f, tr := corev1.ConditionFalse, corev1.ConditionTrue
	if !restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(true, f, ""), ObjectNew: pod(true, tr, "")}) {
		t.Error("a gated pod's containers became ready and nothing woke")
	}
	if !restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(true, tr, f), ObjectNew: pod(true, tr, tr)}) {
		t.Error("a gated pod's gate turned True and nothing woke")
	}
	if restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(false, f, ""), ObjectNew: pod(false, tr, "")}) {
		t.Error("a pod without the gate woke its RoutingService on ContainersReady")
	}
	if restartsChanged.Update(event.UpdateEvent{ObjectOld: pod(true, tr, tr), ObjectNew: pod(true, tr, tr)}) {
		t.Error("an unchanged gated pod woke its RoutingService")
	}
}
