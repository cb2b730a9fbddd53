package controllers

import (
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

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

// frozenByWrite marks, in o, each shard of down as Unreachable (CredentialsRefused for a 401 or
// 403) for this reconcile, with the write that failed and the API server's answer.
func frozenByWrite(rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, down map[string]error) {
	if o.Clusters == nil {
		o.Clusters = map[string]rollout.ClusterView{}
	}
	for shard, err := range down {
		view := o.Clusters[shard]
		if view.Name == "" {
			view.Name = clusterOf(rsvc, shard)
		}
		view.State, view.Message = routingv1alpha1.ClusterUnreachable, fmt.Sprintf("its API server failed a write: %v", err)
		if refusedOr(err) == routingv1alpha1.ClusterCredentialsRefused {
			// Its anchor's write was refused (401, 403: applyPlaces), as its reads would be.
			view.State, view.Message = routingv1alpha1.ClusterCredentialsRefused, fmt.Sprintf("its API server refused a write: %v", err)
		}
		if len(view.Message) > 1024 {
			view.Message = view.Message[:1024]
		}
		o.Clusters[shard] = view
	}
}

// regionBackoff remembers, per RoutingService and shard, a region whose API server failed a
// write, until when it is left alone, and why. Without it, every reconcile would try the writes
// again, fail, write a status that flips ClustersReachable and be woken by its own write: a storm
// of reconciles that starves every other RoutingService of the manager's workers. While the
// backoff runs the shard is observed as Unreachable with the error (frozenByWrite), so the plan
// writes nothing there and the status holds still; once it ends the writes are tried again. The
// backoff starts at regionBackoffMin and doubles with each failure in a row, up to
// regionBackoffMax; a reconcile whose writes there succeed forgets it. It lives as long as the
// manager: a restarted manager tries at once.
type regionBackoff struct {
	mu   sync.Mutex
	down map[types.NamespacedName]map[string]regionDown
}

type regionDown struct {
	err      error
	until    time.Time
	failures int
}

const (
	regionBackoffMin = 5 * time.Second
	regionBackoffMax = 2 * time.Minute
)

// failed records the failed writes of down at now.
func (b *regionBackoff) failed(key types.NamespacedName, down map[string]error, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down == nil {
		b.down = map[types.NamespacedName]map[string]regionDown{}
	}
	if b.down[key] == nil {
		b.down[key] = map[string]regionDown{}
	}
	for shard, err := range down {
		d := b.down[key][shard]
		d.failures++
		wait := regionBackoffMin << min(d.failures-1, 5)
		d.err, d.until = err, now.Add(min(wait, regionBackoffMax))
		b.down[key][shard] = d
	}
}

// active returns the shards still backing off at now, with their errors, and the earliest end of
// a backoff (zero when none).
func (b *regionBackoff) active(key types.NamespacedName, now time.Time) (map[string]error, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out map[string]error
	var next time.Time
	for shard, d := range b.down[key] {
		if !now.Before(d.until) {
			continue
		}
		out = markDown(out, shard, d.err)
		if next.IsZero() || d.until.Before(next) {
			next = d.until
		}
	}
	return out, next
}

// succeeded forgets the shards of key not in down whose backoff has ended: their writes were
// tried again and none failed.
func (b *regionBackoff) succeeded(key types.NamespacedName, down map[string]error, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for shard, d := range b.down[key] {
		if _, still := down[shard]; !still && !now.Before(d.until) {
			delete(b.down[key], shard)
		}
	}
	if len(b.down[key]) == 0 {
		delete(b.down, key)
	}
}

// forget drops what is remembered of key (the RoutingService is gone).
func (b *regionBackoff) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.down, key)
}
