package controllers

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// One region's error is that region's (S-45). apply stops the actions of a shard whose spoke's
// API server fails a write, and goes on with the hub's and the other spokes'; the reconciler then
// decides the status again with that shard frozen for this reconcile (its cluster Unreachable,
// with the error), so the status write still happens and says which region failed and why. The
// next reconcile reads the spoke again: if it answers, the shard is Reachable and its step goes on
// (the time away is not charged to its progress deadline, as for any cluster that was away).

// regionError reports whether a spoke's answer to a write is the region's own trouble (a 5xx, a
// timeout, a webhook that fails, a connection refused) rather than what the planner handles or
// the next reconcile corrects: a refusal (isRefusal), a Conflict, AlreadyExists or NotFound.
func regionError(err error) bool {
	return !isRefusal(err) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err)
}

func markDown(down map[string]error, place string, err error) map[string]error {
	if down == nil {
		down = map[string]error{}
	}
	down[place] = err
	return down
}

// spokeShardName is the shard name sp is reached for (its key in spokes).
func spokeShardName(spokes map[string]*spokeShard, sp *spokeShard) string {
	for name, s := range spokes {
		if s == sp {
			return name
		}
	}
	return ""
}

// frozenByWrite marks, in o, each shard of down as Unreachable for this reconcile, with the write
// that failed and the API server's answer.
func frozenByWrite(rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, down map[string]error) {
	if o.Clusters == nil {
		o.Clusters = map[string]rollout.ClusterView{}
	}
	for shard, err := range down {
		view := o.Clusters[shard]
		if view.Name == "" {
			view.Name = clusterOf(rsvc, shard)
		}
		view.State = routingv1alpha1.ClusterUnreachable
		view.Message = fmt.Sprintf("its API server failed a write: %v", err)
		if len(view.Message) > 1024 {
			view.Message = view.Message[:1024]
		}
		o.Clusters[shard] = view
	}
}
