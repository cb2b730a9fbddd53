package rollout

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// DisruptionBudgetName is <routingservice>-<shard>, at most 40+1+20 = 61 characters: the name of
// the PodDisruptionBudget of a shard.
func DisruptionBudgetName(rsvcName, shard string) string {
	return rsvcName + "-" + shard
}

// DisruptionBudgetSelector is the label selector of a shard's PodDisruptionBudget: the routing pods
// of shard, of every revision (ReplicaSetLabels without the revision and managed-by).
func DisruptionBudgetSelector(rsvcName, shard string) map[string]string {
	return map[string]string{
		LabelName:      rsvcName,
		LabelShard:     shard,
		LabelComponent: ComponentRouting,
	}
}

// DisruptionBudgetMaxUnavailable is the maxUnavailable of shard's PodDisruptionBudget:
// spec.disruptionBudget.maxUnavailable as it is when set; otherwise the shard's rollout budget
// (spec.strategy.maxUnavailable resolved against its replicas by ResolveBudget, rounded down) but
// at least routingv1alpha1.MinDisruptionBudgetMaxUnavailable (1), since a budget of 0 blocks every
// node drain. Worked numbers: replicas 3 and the default strategy (maxUnavailable 0) → 1;
// replicas 10, maxUnavailable 25% → 2 (2.5 rounded down); replicas 0 → 1.
func DisruptionBudgetMaxUnavailable(rsvc *routingv1alpha1.RoutingService, shard routingv1alpha1.ShardSpec) intstr.IntOrString {
	if v := rsvc.Spec.DisruptionBudget.MaxUnavailable; v != nil {
		return *v
	}
	b := ResolveBudget(shard.Replicas, rsvc.Spec.Strategy.MaxSurge, rsvc.Spec.Strategy.MaxUnavailable)
	return intstr.FromInt32(max(b.Unavailable, routingv1alpha1.MinDisruptionBudgetMaxUnavailable))
}

// DesiredDisruptionBudgets returns the PodDisruptionBudgets rsvc should have, one per shard in
// spec order, or none when spec.disruptionBudget.enabled is false. Each carries schemagate's labels
// (managed-by, so the manager's label-filtered cache holds it; the component, name and shard) and a
// controller reference to rsvc. unhealthyPodEvictionPolicy is AlwaysAllow: a pod that is not ready
// serves nothing, so evicting it costs no availability, and a revision whose pods never become
// ready must not block node drains. It is pure: the same RoutingService gives the same list.
func DesiredDisruptionBudgets(rsvc *routingv1alpha1.RoutingService) []*policyv1.PodDisruptionBudget {
	if !rsvc.Spec.DisruptionBudget.EnabledOrDefault() {
		return nil
	}
	out := make([]*policyv1.PodDisruptionBudget, 0, len(rsvc.Spec.Shards))
	for _, shard := range rsvc.Spec.Shards {
		labels := DisruptionBudgetSelector(rsvc.Name, shard.Name)
		labels[LabelManagedBy] = ManagedByValue
		out = append(out, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{
				Name:            DisruptionBudgetName(rsvc.Name, shard.Name),
				Namespace:       rsvc.Namespace,
				Labels:          labels,
				OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
			},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable:             ptr.To(DisruptionBudgetMaxUnavailable(rsvc, shard)),
				Selector:                   &metav1.LabelSelector{MatchLabels: DisruptionBudgetSelector(rsvc.Name, shard.Name)},
				UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
			},
		})
	}
	return out
}
