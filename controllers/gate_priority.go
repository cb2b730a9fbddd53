package controllers

import (
	"context"
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
