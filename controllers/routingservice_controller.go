// Package controllers holds the RoutingService reconciler. The decisions live in the pure planner
// (pkg/rollout); this package gathers what the planner reads, applies what it decides, and writes
// the status it computes.
package controllers

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// RoutingServiceReconciler reconciles RoutingService objects.
type RoutingServiceReconciler struct {
	client.Client
	// Recorder records an Event for every transition the planner reports.
	Recorder recorder.EventRecorder
	// Clock is the planner's clock; tests inject a fake one.
	Clock clock.PassiveClock
	// APIReader reads past the cache (the manager's GetAPIReader): to find who holds a name after
	// a create failed with AlreadyExists, and to get the Secrets checks name. Nil means Client.
	APIReader client.Reader
	// Measurer takes the measurements of http and prometheus checks the planner asks for
	// (nil: a zero measure.Taker).
	Measurer *measure.Taker

	// Spokes reaches the clusters shards name (spec.shards[].cluster); nil: such shards stay
	// Connecting and nothing is written for them.
	Spokes *Spokes
	// SpokeCleanupTimeout bounds how long a deletion waits for unreachable spokes (0:
	// DefaultSpokeCleanupTimeout).
	SpokeCleanupTimeout time.Duration
	// Probe are the images migration probes run with (--probe-image, --probe-database-image);
	// nil: no probe runs.
	Probe *rollout.ProbeImages

	measurerOnce sync.Once
	pending      pendingMeasurements
	written      writtenVersions
	gate         gateMarks
	// budgetConflicts remembers the budget names held by others, for one Event per holder;
	// retirementsWaiting, the retired places a cluster that does not answer keeps from cleanup.
	budgetConflicts, retirementsWaiting eventMemo
	// scaleConflicts remembers the RoutingShard and autoscaler names held by others (scaling.go).
	scaleConflicts eventMemo
	// cleanupsPending remembers, per RoutingService being deleted, the clusters its deletion
	// waits for (one SpokeCleanupPending Event per set, not one per 5 s retry).
	cleanupsPending eventMemo
	// decisions remembers the decision logged last (logDecision), for one "decision" line per
	// change.
	decisions eventMemo
	// regions remembers the regions whose API server failed a write, and backs off from them
	// (spoke_writes.go).
	regions regionBackoff
}

// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingservices/status,verbs=update
// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingservices/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is the skeleton every reconcile follows: get the RoutingService (gone → nothing to do;
// owner references let the garbage collector remove its ReplicaSets and Jobs), gather what it owns,
// ask the planner, apply the plan, write the status if it changed, record Events.
//
// Errors returned are retryable API errors (controller-runtime requeues with backoff); a user's
// mistakes never come back as errors, they are in the status conditions.
//
// Every result sets the priority of the requeue it may ask for (priorityAfter): PriorityGate only
// while schema evidence waits to be acted on.
func (r *RoutingServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	res.Priority = r.priorityAfter(req.NamespacedName)
	return res, err
}

func (r *RoutingServiceReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	started := time.Now()
	rsvc, res, err := r.load(ctx, req)
	if rsvc == nil {
		return res, err
	}
	r.gate.deciding(req.NamespacedName, time.Now())
	stored := rsvc.Status.DeepCopy() // the status as it was before this reconcile
	in, err := r.observeAll(ctx, rsvc)
	if err != nil {
		// Reading the cluster failed: do nothing, and try again with backoff.
		return ctrl.Result{}, err
	}
	plan := rollout.Compute(in.observed)
	// The planner is pure: it asks for the http and prometheus measurements that are due. They
	// are taken in the background (each bounded by its check's timeoutSeconds) and wake this
	// RoutingService when they finish; the next reconcile observes them (observeAll). No
	// reconcile waits on an endpoint.
	r.pending.start(r.measurer(), r.checkSecrets(rsvc.Namespace), rsvc, plan.Measurements)
	plan, applyErr, err := r.applyPlan(ctx, rsvc, &in, plan)
	if apierrors.IsConflict(err) {
		// clusters-used was written meanwhile (applyPlaces): nothing was applied; decide again.
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if applyErr == nil {
		r.gate.acted(req.NamespacedName, started, time.Now())
	}
	if apierrors.IsAlreadyExists(applyErr) {
		// The plan was decided on a cache that lacked an object an earlier reconcile created (a
		// migration Job, say): its status, Events and metrics would report that again. None is
		// written; the next reconcile, on fresh objects, decides and says what happened.
		log.V(1).Info("requeue after a create that met an existing object", "error", applyErr.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err := r.writeStatus(ctx, req.NamespacedName, rsvc, plan.Status); err != nil {
		if apierrors.IsConflict(err) {
			// Someone (often our own previous write, not yet in the cache) changed the object:
			// decide again on the fresh object rather than write a status computed for an old one.
			log.V(1).Info("status write conflicted; reconciling again", "error", err.Error())
			return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		return ctrl.Result{}, err
	}
	r.recordEvents(rsvc, plan.Events)
	recordMetrics(rsvc, plan, recordedBy(stored, &plan.Status, in.observed.Measurements))
	r.logDecision(log, req.NamespacedName, plan)
	if applyErr != nil {
		// A stale cache or a concurrent writer: look again shortly, with fresh objects.
		log.V(1).Info("requeue after a conflicting write", "error", applyErr.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(rsvc, plan, in)}, nil
}

// apiReader reads past the cache: APIReader, or Client when none is set (unit tests).
func (r *RoutingServiceReconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *RoutingServiceReconciler) measurer() *measure.Taker {
	r.measurerOnce.Do(func() {
		if r.Measurer == nil {
			r.Measurer = &measure.Taker{}
		}
	})
	return r.Measurer
}

// migrationPodOwner maps a migration or check pod to its RoutingService by the schemagate.io/name
// label (the manager's cache holds only pods schemagate labelled).
func migrationPodOwner(_ context.Context, o client.Object) []reconcile.Request {
	if c := o.GetLabels()[rollout.LabelComponent]; (c != rollout.ComponentMigration && c != rollout.ComponentCheck && c != rollout.ComponentShardCheck && c != rollout.ComponentContract && c != rollout.ComponentProbe) || o.GetLabels()[rollout.LabelName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[rollout.LabelName]}}}
}

// routingPodOwner maps a routing pod to its RoutingService by the schemagate.io/name label.
func routingPodOwner(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[rollout.LabelComponent] != rollout.ComponentRouting || o.GetLabels()[rollout.LabelName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[rollout.LabelName]}}}
}

// restartsChanged passes only the pod updates the planner acts on: its containers' restart counts
// changed (the pod-health gate), or, for a pod with the readiness gate of a check at PodReady,
// ContainersReady or that gate changed (the pod is due for its check, or counts now). Its
// ReplicaSet's status does not change when such a pod's containers become ready, so nothing else
// would wake the RoutingService before its progress deadline.
var restartsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		return ok1 && ok2 && (restartCount(o) != restartCount(n) || podCheckStateChanged(o, n))
	},
}

// podCheckStateChanged reports whether a pod with the readiness gate of a check at PodReady
// changed its ContainersReady or gate condition status.
func podCheckStateChanged(o, n *corev1.Pod) bool {
	gated := false
	for _, g := range n.Spec.ReadinessGates {
		gated = gated || g.ConditionType == routingv1alpha1.PodCheckGate
	}
	if !gated {
		return false
	}
	status := func(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	return status(o, corev1.ContainersReady) != status(n, corev1.ContainersReady) ||
		status(o, routingv1alpha1.PodCheckGate) != status(n, routingv1alpha1.PodCheckGate)
}

// restartCount sums the restart counts of a pod's containers, init containers included.
func restartCount(p *corev1.Pod) int64 {
	var n int64
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			n += int64(cs.RestartCount)
		}
	}
	return n
}

// SetupWithManager registers the controller. It wakes on spec, label and annotation changes of a
// RoutingService (not on its own status writes) and on any change of the ReplicaSets and Jobs it
// controls, so deadlines are the only reason to requeue.
func (r *RoutingServiceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Every List of a RoutingService's objects reads one index bucket (indexes.go).
	if err := IndexFields(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := IndexFields(context.Background(), mgr.GetFieldIndexer(), &routingv1alpha1.RoutingShard{}, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&routingv1alpha1.RoutingService{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.ReplicaSet{}).
		Owns(&batchv1.Job{}).
		Owns(&appsv1.ControllerRevision{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// An autoscaler's size change (a new generation of the RoutingShard), and an owned
		// autoscaler changed or deleted by someone else; not their status writes.
		Owns(&routingv1alpha1.RoutingShard{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Migration and check pods carry the schema reports, and say why a migration is stuck
		// (image pull, scheduling) before the Job does.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(migrationPodOwner)).
		// Routing pods wake it only when a container's restart count changes: the pod-health
		// gate (pkg/rollout/podhealth.go); readiness arrives through the ReplicaSets' status.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(routingPodOwner), builder.WithPredicates(restartsChanged)).
		// Schema evidence (a migration or check container terminated, its Job finished) goes to
		// the front of the queue: the gate opens at once however busy the fleet (gate_priority.go).
		Watches(&corev1.Pod{}, r.gateEvents()).
		Watches(&batchv1.Job{}, r.gateEvents()).
		// A reconcile skipped on a stale cache runs as soon as the cache has the manager's own
		// status write (cachesync.go).
		Watches(&routingv1alpha1.RoutingService{}, r.cacheCaughtUp()).
		Named("routingservice")
	// Finished http and prometheus measurements arrive on a channel (measurements.go).
	b = b.WatchesRawSource(source.Channel(r.pending.Events(), &handler.EnqueueRequestForObject{}))
	if r.Spokes != nil {
		// Changes in the spokes (their objects, their reachability) arrive on a channel.
		b = b.WatchesRawSource(source.Channel(r.Spokes.Events(), &handler.EnqueueRequestForObject{}))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	// A shard's earlier places are cleaned up by a small controller of their own.
	return r.setupRetirement(mgr)
}
