package rollout

import (
	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Place is a cluster a shard of the spec runs in: the plan's first intent, written before any
// other write. The reconciler records it in schemagate.io/clusters-used (so that a later spec
// that no longer names it still knows where to clean up), then makes the RoutingService's anchor
// there exist and record Revisions, and only then writes anything else to that cluster. A place
// whose anchor is missing is observed as empty (nothing there is this RoutingService's yet).
type Place struct {
	Shard string
	// Cluster is the shard's spec.shards[].cluster, its namespace resolved.
	Cluster routingv1alpha1.ShardCluster
	// Revisions are what the anchor records as the place's last known revisions (the stable
	// revision as stored, and the update revision): what may serve there while its cluster
	// does not answer (serving.go reads them back from the anchor, never from status).
	Revisions []string
}

// places are the plan's Places: one per shard of the spec with a cluster, in spec order. stable
// is the stable revision as stored (sanitized), update the spec's revision.
func places(rsvc *routingv1alpha1.RoutingService, stable, update string) []Place {
	var out []Place
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster == nil {
			continue
		}
		c := *s.Cluster.DeepCopy()
		c.Namespace = c.NamespaceOr(rsvc.Namespace)
		out = append(out, Place{Shard: s.Name, Cluster: c, Revisions: []string{stable, update}})
	}
	return out
}
