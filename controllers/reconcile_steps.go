package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// The steps of reconcile (routingservice_controller.go), in its order: load, observeAll, the one
// Compute, applyPlan, the status write, then what follows it.

// load reads the RoutingService and does what comes before deciding: a deleted one is forgotten,
// one being deleted is finalized (finalizeSpokes), the finalizer is added, and a cache behind this manager's last status write is read past or waited for.
// It returns nil, with the result to return, when this reconcile decides nothing.
func (r *RoutingServiceReconciler) load(ctx context.Context, req ctrl.Request) (*routingv1alpha1.RoutingService, ctrl.Result, error) {
	rsvc := &routingv1alpha1.RoutingService{}
	if err := r.Get(ctx, req.NamespacedName, rsvc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req)
		}
		return nil, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rsvc.DeletionTimestamp.IsZero() {
		res, err := r.finalizeSpokes(ctx, rsvc)
		return nil, res, err
	}
	if err := r.ensureFinalizer(ctx, rsvc); err != nil {
		return nil, ctrl.Result{}, err
	}
	if r.written.stale(req.NamespacedName, rsvc.ResourceVersion, r.Clock.Now()) {
		// The cache has not yet seen this manager's last status write. While schema evidence
		// waits, decide on the object as the API server has it; otherwise skip, and the write's
		// watch event starts the next reconcile (the requeue is only a fallback, unless the
		// event came already).
		fresh := r.readPastStaleCache(ctx, req.NamespacedName)
		if fresh == nil {
			staleSkips.Inc()
			return nil, ctrl.Result{RequeueAfter: r.written.recheckAfter(req.NamespacedName)}, nil
		}
		if rsvc = fresh; !rsvc.DeletionTimestamp.IsZero() {
			res, err := r.finalizeSpokes(ctx, rsvc)
			return nil, res, err
		}
	}
	return rsvc, ctrl.Result{}, nil
}

// forget drops what the reconciler remembers of a RoutingService that is gone.
func (r *RoutingServiceReconciler) forget(req ctrl.Request) {
	forgetMetrics(req.Namespace, req.Name)
	r.pending.forget(req.NamespacedName)
	r.written.forget(req.NamespacedName)
	r.gate.forget(req.NamespacedName)
	r.budgetConflicts.forget(req.NamespacedName)
	r.scaleConflicts.forget(req.NamespacedName)
	r.retirementsWaiting.forget(req.NamespacedName)
	r.decisions.forget(req.NamespacedName)
	r.regions.forget(req.NamespacedName)
	if r.Spokes != nil {
		r.Spokes.Release(req.NamespacedName, nil)
	}
}

// observation is what one reconcile observed: the planner's input, and what applying the plan
// needs (the spokes reached, the end of the earliest region backoff).
type observation struct {
	observed rollout.Observed
	spokes   map[string]*spokeShard
	// backoffEnds is when the earliest region backoff ends (zero: none).
	backoffEnds time.Time
}

// observeAll gathers everything the planner reads: the hub's objects (observe), each spoke's
// (observeSpokes), a shard's earlier places (observeRetiredPlaces), the schema Jobs where they
// run (observeSchemaJobs), the measurements taken since the last plan asked for them, and the
// regions backing off from a failed write (frozen, and written nothing, until it ends).
func (r *RoutingServiceReconciler) observeAll(ctx context.Context, rsvc *routingv1alpha1.RoutingService) (observation, error) {
	observed, err := r.observe(ctx, rsvc)
	if err != nil {
		return observation{}, err
	}
	in := observation{observed: observed}
	if err := r.observeShardScales(ctx, rsvc, &in.observed); err != nil {
		return observation{}, err
	}
	in.spokes = r.observeSpokes(ctx, rsvc, &in.observed)
	r.observeRetiredPlaces(ctx, rsvc, &in.observed, in.spokes)
	if err := r.observeSchemaJobs(ctx, rsvc, &in.observed, in.spokes); err != nil {
		return observation{}, err
	}
	if r.Spokes != nil {
		r.Spokes.Release(client.ObjectKeyFromObject(rsvc), rsvc)
	}
	in.observed.Measurements = r.pending.finished(rsvc, in.observed.Now)
	backingOff, ends := r.regions.active(client.ObjectKeyFromObject(rsvc), r.Clock.Now())
	in.backoffEnds = ends
	if len(backingOff) > 0 {
		frozenByWrite(rsvc, &in.observed, backingOff)
		for shard := range backingOff {
			delete(in.spokes, shard)
		}
	}
	return in, nil
}

// applyPlan applies the plan, and returns the plan whose status is written: its Places first
// (applyPlaces: clusters-used, then each reached cluster's anchor), its disruption budgets, then
// its actions. The plan is decided again only when the cluster refused part of it, so that this
// reconcile's status says so (nothing is left only in a log line):
//
//   - a cluster's anchor could not be written: that shard is frozen, as below, before anything
//     else is applied;
//   - a PodDisruptionBudget refused (spoke_budgets.go, pdb.go): decided again with that refusal
//     before anything else is applied (it holds that shard's rolling steps); a region whose API
//     server failed its budget's write is frozen in that decision, as below;
//   - a region's API server failed a write (a 5xx, a timeout, a failing webhook; S-45): the other
//     regions' actions are applied, and the status is decided again from this plan's status with
//     that shard frozen, keeping this plan's Events;
//   - a write refused (invalid, forbidden, over quota; S-31) or a name held by another object
//     (S-21): decided again knowing it, with no actions.
//
// applyErr is a conflicting write (a stale cache or another writer: look again shortly); err is
// any other error, which fails the reconcile before its status write.
func (r *RoutingServiceReconciler) applyPlan(ctx context.Context, rsvc *routingv1alpha1.RoutingService, in *observation, plan rollout.Plan) (_ rollout.Plan, applyErr, err error) {
	log := logf.FromContext(ctx)
	placeDown, err := r.applyPlaces(ctx, rsvc, plan.Places, in.spokes)
	if err != nil {
		return plan, nil, err
	}
	for shard := range placeDown {
		delete(in.spokes, shard)
	}
	refusals, writeDown, err := r.syncDisruptionBudgets(ctx, rsvc, in.spokes, plan.DisruptionBudgets)
	if err != nil {
		return plan, nil, err
	}
	scaleRefusals, err := r.syncScaling(ctx, rsvc, plan)
	if err != nil {
		return plan, nil, err
	}
	refusals = append(refusals, scaleRefusals...)
	for shard, err := range placeDown {
		writeDown = markDown(writeDown, shard, err)
	}
	if len(writeDown) > 0 {
		// A region that failed its budget's write is frozen before any action is applied there.
		frozenByWrite(rsvc, &in.observed, writeDown)
		for shard := range writeDown {
			delete(in.spokes, shard)
		}
	}
	if len(refusals) > 0 || len(writeDown) > 0 {
		in.observed.Refusals = refusals
		plan = rollout.Compute(in.observed)
	}
	down, applyErr := r.apply(ctx, rsvc, plan.Actions, in.spokes)
	name := client.ObjectKeyFromObject(rsvc)
	for shard, err := range writeDown {
		down = markDown(down, shard, err)
	}
	if applyErr == nil {
		r.regions.succeeded(name, down, r.Clock.Now())
	}
	if len(down) > 0 {
		r.regions.failed(name, down, r.Clock.Now())
		if _, next := r.regions.active(name, r.Clock.Now()); !next.IsZero() && (in.backoffEnds.IsZero() || next.Before(in.backoffEnds)) {
			in.backoffEnds = next
		}
		frozenByWrite(rsvc, &in.observed, down)
		if applyErr == nil {
			// Decided again from this plan's status, not the stored one: what it decided (a
			// failure, a check's count, a handled control) stands, though the writes that record
			// it in the failed region did not land.
			events := plan.Events
			in.observed.RoutingService = rsvc.DeepCopy()
			in.observed.RoutingService.Status = *plan.Status.DeepCopy()
			plan = rollout.Compute(in.observed)
			plan.Actions, plan.Events = nil, append(events, plan.Events...)
		}
	}
	if refusal, ok := refusalOf(applyErr); ok {
		// The actions after it are not applied (each depends on the ones before), and the status
		// says why, with the deadlines this plan started.
		log.Info("the API server refused a write", "verb", refusal.Verb, "kind", refusal.Kind, "name", refusal.Name, "error", applyErr.Error())
		in.observed.Refusals = append(in.observed.Refusals, refusal)
		plan = rollout.Compute(in.observed)
		plan.Actions, applyErr = nil, nil
	}
	if conflict, ok := r.conflictOf(ctx, rsvc, applyErr); ok {
		// That plan's status says so (NameConflict) and its actions wait for the requeue it asks
		// for, so nothing is created in a loop.
		log.Info("a name schemagate needs is taken", "kind", conflict.Kind, "name", conflict.Name, "holder", conflict.Holder)
		in.observed.Conflicts = append(in.observed.Conflicts, conflict)
		plan = rollout.Compute(in.observed)
		plan.Actions, applyErr = nil, nil
	}
	if applyErr != nil && !apierrors.IsConflict(applyErr) && !apierrors.IsAlreadyExists(applyErr) {
		return plan, nil, applyErr
	}
	return plan, applyErr, nil
}

// requeueAfter is when to look again if no watch event comes first: when the plan asks, when a
// region's backoff ends (its writes are tried again), and, with spokes, within spokeRecheck
// (Secrets are not watched: a rotated one is read again then).
func (r *RoutingServiceReconciler) requeueAfter(rsvc *routingv1alpha1.RoutingService, plan rollout.Plan, in observation) time.Duration {
	requeue := plan.RequeueAfter
	if !in.backoffEnds.IsZero() {
		requeue = minRequeue(requeue, max(time.Second, in.backoffEnds.Sub(r.Clock.Now())))
	}
	if in.spokes != nil || in.observed.Clusters != nil || len(retiredClusters(rsvc)) > 0 {
		requeue = minRequeue(requeue, spokeRecheck)
	}
	return requeue
}
