package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// AnnotationAutoscalerSpec records, on a HorizontalPodAutoscaler schemagate owns, a hash of the
// spec schemagate asked for. The API server fills in defaults (metrics, behavior), so the stored
// spec never equals the one asked for; the reconciler compares this hash instead, and writes the
// autoscaler only when spec.shards[].autoscaling changed.
const AnnotationAutoscalerSpec = "schemagate.io/autoscaler-spec"

// DesiredAutoscalers returns the HorizontalPodAutoscalers schemagate owns for rsvc, one per shard
// with autoscaling.scaler HorizontalPodAutoscaler, in spec order: named like the shard's
// RoutingShard, scaling it between minReplicas (default 1) and maxReplicas on metrics and behavior
// as given (the API server defaults what is left out). Each carries schemagate's labels, a
// controller reference to rsvc and AnnotationAutoscalerSpec.
func DesiredAutoscalers(rsvc *routingv1alpha1.RoutingService) []*autoscalingv2.HorizontalPodAutoscaler {
	var out []*autoscalingv2.HorizontalPodAutoscaler
	for _, shard := range rsvc.Spec.Shards {
		a := shard.Autoscaling
		if a == nil || a.Scaler == routingv1alpha1.ShardScalerExternal || shard.Cluster != nil {
			continue
		}
		name := RoutingShardName(rsvc.Name, shard.Name)
		spec := autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: routingv1alpha1.GroupVersion.String(),
				Kind:       "RoutingShard",
				Name:       name,
			},
			MinReplicas: ptr.To(ptr.Deref(a.MinReplicas, 1)),
			MaxReplicas: ptr.Deref(a.MaxReplicas, ptr.Deref(a.MinReplicas, 1)),
			Metrics:     a.Metrics,
			Behavior:    a.Behavior,
		}
		labels := DisruptionBudgetSelector(rsvc.Name, shard.Name)
		labels[LabelManagedBy] = ManagedByValue
		out = append(out, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       rsvc.Namespace,
				Labels:          labels,
				Annotations:     map[string]string{AnnotationAutoscalerSpec: autoscalerSpecHash(&spec)},
				OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
			},
			Spec: spec,
		})
	}
	return out
}

// autoscalerSpecHash is a short hash of spec's JSON.
func autoscalerSpecHash(spec *autoscalingv2.HorizontalPodAutoscalerSpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		// Marshalling API types cannot fail; a panic here is a programming error.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
