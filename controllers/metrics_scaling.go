package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Shard sizes (docs/autoscaling.md), from the status the manager wrote: per shard, what is asked,
// what schemagate applies and what is available, who sets the size, and an autoscaler's maximum.
var (
	// shardReplicas: schemagate_shard_replicas{namespace, name, shard, kind}, kind one of desired
	// (what the shard's scaler asks for; spec.shards[].replicas for a shard without autoscaling),
	// applied (status.shards[].replicas: desired, or more while a promotion holds a scale-down)
	// and available. Three series per shard.
	shardReplicas = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_shard_replicas",
		Help: "Pods per shard: desired (what its scaler or spec.shards[].replicas asks), applied (what schemagate gives it) and available.",
	}, "shard", "kind")

	// shardScaledBy: schemagate_shard_scaled_by{namespace, name, shard, source} = 1, source "spec"
	// for a shard without autoscaling, else the field manager that set its size last
	// (status.shards[].scaling.scaledBy; at most maxLabelChars characters). One series per shard.
	shardScaledBy = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_shard_scaled_by",
		Help: "1, with who sets each shard's size as the source label: spec, or the field manager of its RoutingShard's spec.replicas.",
	}, "shard", "source")

	// shardMaxReplicas: schemagate_shard_autoscaler_max_replicas{namespace, name, shard}: the
	// maxReplicas of the HorizontalPodAutoscaler schemagate owns for a shard. One series per shard
	// with autoscaling.scaler HorizontalPodAutoscaler.
	shardMaxReplicas = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_shard_autoscaler_max_replicas",
		Help: "The maxReplicas of the HorizontalPodAutoscaler schemagate owns for each autoscaled shard.",
	}, "shard")
)

func init() {
	metrics.Registry.MustRegister(shardReplicas.vec, shardScaledBy.vec, shardMaxReplicas.vec)
}

// recordScalingMetrics sets the metrics above from a plan whose status was written.
func recordScalingMetrics(rsvc *routingv1alpha1.RoutingService, plan rollout.Plan) {
	ns, name := rsvc.Namespace, rsvc.Name
	spec := map[string]routingv1alpha1.ShardSpec{}
	for _, s := range rsvc.Spec.Shards {
		spec[s.Name] = s
	}
	var sizes, by, maxes []series
	for _, ss := range plan.Status.Shards {
		shard := labelValue(ss.Name, maxLabelChars)
		desired, source := spec[ss.Name].Replicas, "spec"
		if sc := ss.Scaling; sc != nil {
			if sc.DesiredReplicas != nil {
				desired = *sc.DesiredReplicas
			}
			source = labelValue(sc.ScaledBy, maxLabelChars)
		}
		sizes = append(sizes,
			series{labels: []string{shard, "desired"}, value: float64(desired)},
			series{labels: []string{shard, "applied"}, value: float64(ss.Replicas)},
			series{labels: []string{shard, "available"}, value: float64(ss.Available)})
		by = append(by, series{labels: []string{shard, source}, value: 1})
		if a := spec[ss.Name].Autoscaling; a != nil && a.Scaler != routingv1alpha1.ShardScalerExternal && a.MaxReplicas != nil {
			maxes = append(maxes, series{labels: []string{shard}, value: float64(*a.MaxReplicas)})
		}
	}
	shardReplicas.set(ns, name, sizes)
	shardScaledBy.set(ns, name, by)
	shardMaxReplicas.set(ns, name, maxes)
}
