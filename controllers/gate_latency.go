package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// gateMarks remembers, per RoutingService, when the manager received schema evidence that no
// reconcile has acted on yet, and serves schemagate_gate_latency_seconds from it: hop "queued"
// ends when a reconcile on a fresh cache starts deciding with the evidence, hop "acted" when that
// reconcile's writes are applied (for a migration's evidence: the first ReplicaSet of the new
// revision is created). Times are the manager's monotonic clock; a mark is dropped with its
// RoutingService.
type gateMarks struct {
	mu sync.Mutex
	at map[types.NamespacedName]gateMark
}

type gateMark struct {
	received time.Time
	queued   bool // the queued hop was observed
}

// mark records that evidence for key was received at now; an earlier mark not yet acted on is kept.
func (g *gateMarks) mark(key types.NamespacedName, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.at[key]; ok {
		return
	}
	if g.at == nil {
		g.at = map[types.NamespacedName]gateMark{}
	}
	g.at[key] = gateMark{received: now}
}

// pending returns when the evidence for key not yet acted on was received.
func (g *gateMarks) pending(key types.NamespacedName) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.at[key]
	return m.received, ok
}

// deciding observes the queued hop of key's mark (once per mark) at now: a reconcile on a fresh
// cache is about to decide with the evidence.
func (g *gateMarks) deciding(key types.NamespacedName, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.at[key]
	if !ok || m.queued {
		return
	}
	m.queued = true
	g.at[key] = m
	gateLatency.WithLabelValues(gateHopQueued).Observe(now.Sub(m.received).Seconds())
}

// acted observes the acted hop of key's mark at now and drops it, if it was received before
// started (the start of the reconcile that applied its plan); evidence received later waits for
// the next reconcile.
func (g *gateMarks) acted(key types.NamespacedName, started, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.at[key]
	if !ok || m.received.After(started) {
		return
	}
	delete(g.at, key)
	gateLatency.WithLabelValues(gateHopActed).Observe(now.Sub(m.received).Seconds())
}

// forget drops key's mark (its RoutingService is gone).
func (g *gateMarks) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.at, key)
}
