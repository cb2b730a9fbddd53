package rollout

// The size of an autoscaled shard (spec.shards[].autoscaling): one place decides how many pods such
// a shard runs, and every other part of the planner reads that number as the shard's replicas.

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// ShardScale is what the reconciler read of an autoscaled shard's RoutingShard (one this
// RoutingService controls): the size its scaler asks for, and who set it.
type ShardScale struct {
	// Replicas is the RoutingShard's spec.replicas; nil when unset.
	Replicas *int32
	// ScaledBy is the field manager that set spec.replicas last, as managedFields say ("" when
	// not known).
	ScaledBy string
}

// AnnotationPromotionReplicas records, on the ReplicaSet of an autoscaled shard's update revision,
// the shard's size when that ReplicaSet was created, which is when the shard's promotion started:
// a scale-down is held at it until the shard has baked (heldSize). It is read from the cluster, so
// a lost status write does not shrink a shard mid-promotion.
const AnnotationPromotionReplicas = "schemagate.io/promotion-replicas"

// maxShardReplicas bounds a size read from a RoutingShard, as spec.shards[].replicas is bounded.
const maxShardReplicas = 10000

// RoutingShardName is <routingservice>-<shard>: the name of a shard's RoutingShard, at most
// 40+1+20 characters.
func RoutingShardName(rsvcName, shard string) string { return rsvcName + "-" + shard }

// ScaledBySchemagate is status.shards[].scaling.scaledBy while the RoutingShard still holds the
// size schemagate created it with.
const ScaledBySchemagate = "schemagate"

// shardSizes decides the size of each autoscaled shard, and returns rsvc with spec.shards[].replicas
// replaced by it (a copy; rsvc itself is left alone) and what status.shards[].scaling says. The
// size is the RoutingShard's spec.replicas (bounded to 0..10000); spec.shards[].replicas while the
// RoutingShard does not exist yet or has no size. While the shard promotes the update revision
// (step Progressing or Baking), a smaller size is held at the size the promotion started with
// (AnnotationPromotionReplicas), so the bake proves the revision at the size it started at; a larger
// one applies at once. A shard without autoscaling keeps spec.shards[].replicas.
func shardSizes(o Observed, update string) (*routingv1alpha1.RoutingService, map[string]*routingv1alpha1.ShardScalingStatus) {
	rsvc := o.RoutingService
	scaling := map[string]*routingv1alpha1.ShardScalingStatus{}
	var sized *routingv1alpha1.RoutingService
	for i, shard := range rsvc.Spec.Shards {
		if shard.Autoscaling == nil {
			continue
		}
		st := &routingv1alpha1.ShardScalingStatus{RoutingShard: RoutingShardName(rsvc.Name, shard.Name)}
		scaling[shard.Name] = st
		size := shard.Replicas
		if sc, ok := o.ShardScales[shard.Name]; ok && sc.Replicas != nil {
			size = min(max(*sc.Replicas, 0), maxShardReplicas)
			st.DesiredReplicas = &size
			st.ScaledBy = sc.ScaledBy
		}
		if held, ok := heldSize(o, shard.Name, update); ok && held > size {
			st.Held = fmt.Sprintf("the scaler asks for %d pods; the shard keeps the %d its promotion of revision %s started with until it has baked", size, held, update)
			size = held
		}
		if size != shard.Replicas {
			if sized == nil {
				sized = rsvc.DeepCopy()
			}
			sized.Spec.Shards[i].Replicas = size
		}
	}
	if sized == nil {
		sized = rsvc
	}
	return sized, scaling
}

// heldSize is the size an autoscaled shard's promotion of update started with, while that
// promotion is under way (the stored step says Progressing or Baking for update) and the update
// revision's ReplicaSet records it. A value that does not parse, or is out of bounds, holds nothing.
func heldSize(o Observed, shard, update string) (int32, bool) {
	promoting := false
	for _, ss := range o.RoutingService.Status.Shards {
		if ss.Name == shard && ss.StepRevision == update &&
			(ss.Step == routingv1alpha1.ShardStepProgressing || ss.Step == routingv1alpha1.ShardStepBaking) {
			promoting = true
		}
	}
	if !promoting {
		return 0, false
	}
	for _, rs := range o.ReplicaSets {
		if rs == nil || rs.DeletionTimestamp != nil || !metav1.IsControlledBy(rs, o.RoutingService) ||
			rs.Labels[LabelShard] != shard || rs.Labels[LabelRevision] != update {
			continue
		}
		n, err := strconv.ParseInt(rs.Annotations[AnnotationPromotionReplicas], 10, 32)
		if err != nil || n < 0 || n > maxShardReplicas {
			return 0, false
		}
		return int32(n), true
	}
	return 0, false
}

// availabilityFloor is the number of available pods below which shard counts as short (the
// Available condition): replicas - maxUnavailable. For an autoscaled shard it is resolved against
// the smaller of its size and spec.shards[].replicas, the size the team declared: pods an
// autoscaler adds above it are capacity on its way, and their start does not make the
// RoutingService unavailable or not Ready (a scale change never reads as a rollout).
func (p *planner) availabilityFloor(shard routingv1alpha1.ShardSpec) int32 {
	if shard.Autoscaling == nil {
		return p.budget(shard).MinAvailable()
	}
	declared := shard.Replicas
	for _, s := range p.observed.RoutingService.Spec.Shards {
		if s.Name == shard.Name {
			declared = min(declared, s.Replicas)
		}
	}
	return ResolveBudget(declared, p.rsvc.Spec.Strategy.MaxSurge, p.rsvc.Spec.Strategy.MaxUnavailable).MinAvailable()
}

// DesiredRoutingShards returns the RoutingShards rsvc's autoscaled shards need, in spec order,
// from the plan's status: spec.replicas is the size one starts with (spec.shards[].replicas; the
// reconciler writes it only when it creates the object), and the status says which pods serve
// the shard: the ReplicaSet of status.shards[].revision, whose pods the selector matches.
func DesiredRoutingShards(rsvc *routingv1alpha1.RoutingService, status *routingv1alpha1.RoutingServiceStatus, replicaSets []*appsv1.ReplicaSet) []*routingv1alpha1.RoutingShard {
	var out []*routingv1alpha1.RoutingShard
	for _, shard := range rsvc.Spec.Shards {
		if shard.Autoscaling == nil || shard.Cluster != nil {
			continue
		}
		labels := DisruptionBudgetSelector(rsvc.Name, shard.Name)
		labels[LabelManagedBy] = ManagedByValue
		start := shard.Replicas
		rshard := &routingv1alpha1.RoutingShard{
			ObjectMeta: metav1.ObjectMeta{
				Name:            RoutingShardName(rsvc.Name, shard.Name),
				Namespace:       rsvc.Namespace,
				Labels:          labels,
				OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
			},
			Spec: routingv1alpha1.RoutingShardSpec{Replicas: &start},
		}
		for _, ss := range status.Shards {
			if ss.Name != shard.Name {
				continue
			}
			rshard.Status.AppliedReplicas = ss.Replicas
			if ss.Revision == "" {
				break
			}
			rshard.Status.Revision = ss.Revision
			rshard.Status.Selector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: servingSelector(rsvc.Name, shard.Name, ss.Revision)})
			for _, rs := range replicaSets {
				if rs != nil && metav1.IsControlledBy(rs, rsvc) && rs.Labels[LabelShard] == shard.Name && rs.Labels[LabelRevision] == ss.Revision {
					rshard.Status.Replicas = rs.Status.Replicas
				}
			}
		}
		out = append(out, rshard)
	}
	return out
}

// servingSelector selects the routing pods of one revision in one shard.
func servingSelector(rsvcName, shard, revision string) map[string]string {
	l := DisruptionBudgetSelector(rsvcName, shard)
	l[LabelRevision] = revision
	return l
}
