package rollout

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AddPod puts one of the RoutingService's pods into o the way the planner reads pods, for every
// caller that builds an Observed (the reconciler, for the hub and each spoke, and plan's preview),
// so that they cannot sort them differently: a routing pod is counted by the UID of its controller
// (RoutingPods, and TerminatingPods while it has a deletionTimestamp; "" without one) and kept for
// the pod-health gate; a migration, check, shard-check or contract Job's pod is kept for its
// schema report and for why its Job is stuck. Any other pod is left out. It reports whether pod
// was kept.
func (o *Observed) AddPod(pod *corev1.Pod) bool {
	switch pod.Labels[LabelComponent] {
	case ComponentRouting:
		if o.RoutingPods == nil {
			o.RoutingPods = map[types.UID]int32{}
		}
		if o.TerminatingPods == nil {
			o.TerminatingPods = map[types.UID]int32{}
		}
		owner := types.UID("")
		if ref := metav1.GetControllerOf(pod); ref != nil {
			owner = ref.UID
			if pod.DeletionTimestamp != nil {
				o.TerminatingPods[owner]++
			}
		}
		o.RoutingPods[owner]++
	case ComponentMigration, ComponentCheck, ComponentShardCheck, ComponentContract, ComponentProbe:
	default:
		return false
	}
	o.Pods = append(o.Pods, pod)
	return true
}
