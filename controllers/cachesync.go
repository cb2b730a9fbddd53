package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// writtenVersions remembers, per RoutingService, the resourceVersion its last successful status
// write replaced. While the cache still serves that version, the manager's own write has not
// reached it, and a reconcile would decide on the status from before the write: its status
// update would fail with 409 Conflict, or, had it not changed, repeat work. Such a reconcile is
// skipped; the watch event of the write starts the next one (cacheCaughtUp: the controller's own
// RoutingService handler ignores status-only updates, so without it the skip would wait for the
// fallback requeue, staleCacheRecheck, a whole second).
//
// Measured in issue 13's benchmark (N=50, v1 → v2): 355 of 1,317 status writes were 409s from
// exactly this, before the skip.
//
// Only equality is used: resourceVersions are opaque (a Kubernetes API convention), and a cache
// that shows anything but the replaced version has moved past it.
//
// The skip can never last: a write the API server answered with the resourceVersion it replaced
// stored nothing new (the status differed in Go but encoded to the same bytes, say invalid UTF-8
// that the server's JSON encoding turned into U+FFFD), so no watch event will ever move the cache
// past it, and it is not recorded; and a record older than maxCacheLag is dropped, whatever the
// cache serves, so a watch event that never comes delays a reconcile by at most that long.
type writtenVersions struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]writtenVersion
}

type writtenVersion struct {
	rv string
	at time.Time
	// skipped: a reconcile was skipped waiting for the cache to move past rv.
	skipped bool
	// passed: the cache moved past rv before any reconcile was skipped for it. A reconcile that
	// read rv just before that event, and is skipped after it, waits for nothing: no other event
	// will come (see recheckAfter).
	passed bool
}

// maxCacheLag bounds how long reconciles are skipped after one status write: 10 s, about a
// thousand times the cache's lag measured in issue 13's benchmark (the write's watch event came
// within milliseconds at N=200).
const maxCacheLag = 10 * time.Second

// wrote records that the status write over resourceVersion replaced of key succeeded at now, and
// that the server answered with resourceVersion stored. A write whose answer is not a new version
// (stored equals replaced, or is empty) is not recorded, and clears any earlier record.
func (w *writtenVersions) wrote(key types.NamespacedName, replaced, stored string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if stored == "" || stored == replaced {
		delete(w.replaced, key)
		return
	}
	if w.replaced == nil {
		w.replaced = map[types.NamespacedName]writtenVersion{}
	}
	w.replaced[key] = writtenVersion{rv: replaced, at: now}
}

// stale reports whether rv, the cache's resourceVersion of key at now, is one the manager's own
// write replaced less than maxCacheLag ago. A version that is not stale clears the record.
func (w *writtenVersions) stale(key types.NamespacedName, rv string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.replaced[key]
	if ok && old.rv == rv && now.Sub(old.at) < maxCacheLag && !now.Before(old.at) {
		old.skipped = true
		w.replaced[key] = old
		return true
	}
	delete(w.replaced, key)
	return false
}

// caughtUp reports whether the cache, now serving rv for key, has moved past a write a skipped
// reconcile waits for: that reconcile can run now. It reports each skip once.
func (w *writtenVersions) caughtUp(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.replaced[key]
	if !ok || old.rv == rv {
		return false
	}
	if !old.skipped {
		old.passed = true
		w.replaced[key] = old
		return false
	}
	old.skipped = false
	w.replaced[key] = old
	return true
}

// recheckAfter is how long a reconcile of key just skipped by stale waits for the next:
// staleCacheRecheck, the fallback, while the watch event of the write is still to come
// (cacheCaughtUp will enqueue it sooner); cacheMovedRecheck when the event already came between
// the reconcile's cache read and its stale check, so the cache serves a newer version now.
func (w *writtenVersions) recheckAfter(key types.NamespacedName) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.replaced[key]; ok && old.passed {
		return cacheMovedRecheck
	}
	return staleCacheRecheck
}

// cacheMovedRecheck is the requeue of a reconcile that read the cache an instant before it moved
// past the manager's write (writtenVersions.recheckAfter): at once, but through the queue, since
// the reconcile holds the object it read.
const cacheMovedRecheck = time.Millisecond

// forget drops key (its RoutingService is gone).
func (w *writtenVersions) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, key)
}

// cacheCaughtUp enqueues a RoutingService whose reconcile was skipped on a stale cache as soon as
// the watch event of the manager's own status write reaches the cache (writtenVersions.caughtUp),
// at PriorityGate if evidence waits. The controller's For handler ignores status-only updates,
// which is what these are.
func (r *RoutingServiceReconciler) cacheCaughtUp() handler.Funcs {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			key := types.NamespacedName{Namespace: e.ObjectNew.GetNamespace(), Name: e.ObjectNew.GetName()}
			if !r.written.caughtUp(key, e.ObjectNew.GetResourceVersion()) {
				return
			}
			addAt(q, *r.priorityAfter(key), reconcile.Request{NamespacedName: key})
		},
	}
}

// readPastStaleCache returns key's RoutingService read from the API server instead of the cache,
// when the cache lacks the manager's own last status write (writtenVersions.stale) while schema
// evidence waits to be acted on (gateMarks); nil otherwise, or if the read fails, and the
// reconcile is skipped as before.
//
// Why: a skip makes the evidence wait for the watch event of the manager's previous status
// write; one GET, a few milliseconds, decides on the status as it is stored instead. In `make
// bench-e2e` at N=200 (2026-12-05) this happened 6–48 times per schema phase: it removes that
// wait, but the gate's p99 tail (0.7–1.1 s) is elsewhere, in gates queued behind one another
// (docs/bench.md). The skip's record stays, so the reconcile that the watch event wakes
// (cacheCaughtUp) runs once more, on the cache, and finds nothing left to do.
func (r *RoutingServiceReconciler) readPastStaleCache(ctx context.Context, key types.NamespacedName) *routingv1alpha1.RoutingService {
	if _, waiting := r.gate.pending(key); !waiting {
		return nil
	}
	fresh := &routingv1alpha1.RoutingService{}
	if err := r.apiReader().Get(ctx, key, fresh); err != nil {
		return nil
	}
	gateFreshReads.Inc()
	return fresh
}
