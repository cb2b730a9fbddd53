package controllers

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// PriorityGate is the work-queue priority of a RoutingService whose schema evidence just arrived:
// a migration, check or contract pod whose first container terminated, or such a Job that
// finished. controller-runtime's priority queue (on by default) hands it to the next free worker
// ahead of RoutingServices queued by ordinary events (priority 0) and resyncs (LowPriority), so the
// gate opens without waiting behind a burst of a large fleet's ReplicaSet updates. The ordinary
// handlers still enqueue the same event; the queue keeps one item, at the higher priority.
const PriorityGate = 10

// gateEvents enqueues, at PriorityGate, the RoutingService a schema pod or Job belongs to when the
// evidence it carries changes (evidenceArrived), and marks the time the manager received it
// (gateMarks). Other events are left to the ordinary handlers.
func (r *RoutingServiceReconciler) gateEvents() handler.Funcs {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !evidenceArrived(e.ObjectOld, e.ObjectNew) {
				return
			}
			reqs := migrationPodOwner(ctx, e.ObjectNew)
			now := time.Now()
			for _, req := range reqs {
				r.gate.mark(req.NamespacedName, now)
			}
			addAt(q, PriorityGate, reqs...)
		},
	}
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

// addAt adds reqs to q at priority when q is a priority queue, and plainly otherwise.
func addAt(q workqueue.TypedRateLimitingInterface[reconcile.Request], priority int, reqs ...reconcile.Request) {
	if len(reqs) == 0 {
		return
	}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(priority)}, reqs...)
		return
	}
	for _, r := range reqs {
		q.Add(r)
	}
}

// priorityAfter is the priority a reconcile of key asks its requeue to keep: PriorityGate while
// schema evidence waits to be acted on (the reconcile was skipped on a stale cache, or failed
// before applying its plan), and 0 otherwise. controller-runtime requeues an item at the priority
// it was handed out with unless the result says otherwise, so without this a RoutingService that
// once opened its gate would keep PriorityGate for every timer of its rollout, and at N=200 the
// gate of the next one would wait behind all of them.
func (r *RoutingServiceReconciler) priorityAfter(key types.NamespacedName) *int {
	if _, ok := r.gate.pending(key); ok {
		return new(PriorityGate)
	}
	return new(0)
}

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

// evidenceArrived reports whether an update of a schema pod or Job (migration, check, shard check
// or contract, by its component label) shows schema evidence the old object did not: a Job newly
// Complete or Failed, or a pod whose first container (the migration or check container) newly
// terminated.
func evidenceArrived(oldObj, newObj client.Object) bool {
	if !rollout.IsSchemaComponent(newObj.GetLabels()[rollout.LabelComponent]) && newObj.GetLabels()[rollout.LabelComponent] != rollout.ComponentShardCheck {
		return false
	}
	switch n := newObj.(type) {
	case *batchv1.Job:
		o, ok := oldObj.(*batchv1.Job)
		return ok && !rollout.JobFinished(o) && rollout.JobFinished(n)
	case *corev1.Pod:
		o, ok := oldObj.(*corev1.Pod)
		return ok && !firstTerminated(o) && firstTerminated(n)
	}
	return false
}

// firstTerminated reports whether pod's first container (schemagate's migration or check
// container) has terminated.
func firstTerminated(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == pod.Spec.Containers[0].Name {
			return cs.State.Terminated != nil
		}
	}
	return false
}
