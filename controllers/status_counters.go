package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// CounterWritePeriod is the least time between two status writes of one RoutingService when the
// later one would change nothing but shards' pod counters (updatedReplicas, readyReplicas,
// availableReplicas). Such a write waits, and goes out with the next change of anything else or
// when the period has passed since the last write, whichever comes first; every other change is
// written at once.
//
// Why: in `make bench-e2e` at N=200 (2026-12-05), 78 % of status writes changed only those
// counters, one write for each pod created or becoming ready; they are observations recomputed
// from the ReplicaSets on every reconcile, and nothing the planner decides reads them back from
// the stored status. The EndpointSlice controller batches its writes for the same reason
// (--endpointslice-updates-batch-period).
const CounterWritePeriod = 5 * time.Second

// counterWrites remembers, per RoutingService, when its status was last written, to hold back
// counter-only writes (CounterWritePeriod). It decides no action: a restarted manager writes at
// once, and the written status is the same.
type counterWrites struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// wrote records a successful status write of key at now.
func (c *counterWrites) wrote(key types.NamespacedName, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.NamespacedName]time.Time{}
	}
	c.last[key] = now
}

// holdFor returns how long the write of computed over stored should wait (0: write now): the
// rest of CounterWritePeriod since key's last write, if computed differs from stored only in
// shards' pod counters. A clock that went backwards holds nothing.
func (c *counterWrites) holdFor(key types.NamespacedName, stored, computed *routingv1alpha1.RoutingServiceStatus, now time.Time) time.Duration {
	c.mu.Lock()
	last, ok := c.last[key]
	c.mu.Unlock()
	if !ok || now.Before(last) {
		return 0
	}
	rest := CounterWritePeriod - now.Sub(last)
	if rest <= 0 || !countersOnly(stored, computed) {
		return 0
	}
	return rest
}

// forget drops key (its RoutingService is gone).
func (c *counterWrites) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
}

// countersOnly reports whether computed differs from stored in nothing but the pod counters of
// shards that keep their names and order.
func countersOnly(stored, computed *routingv1alpha1.RoutingServiceStatus) bool {
	if len(stored.Shards) != len(computed.Shards) {
		return false
	}
	c := computed.DeepCopy()
	for i := range c.Shards {
		s := &stored.Shards[i]
		if c.Shards[i].Name != s.Name {
			return false
		}
		c.Shards[i].Updated, c.Shards[i].Ready, c.Shards[i].Available = s.Updated, s.Ready, s.Available
	}
	return equality.Semantic.DeepEqual(*stored, *c)
}
