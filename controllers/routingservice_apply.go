package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// apply carries out the planner's actions in order and stops at the first error. Scales and
// deletes carry the observed resourceVersion (optimistic concurrency), so a decision made on a
// stale cache fails with a Conflict instead of acting on old numbers; creates use deterministic
// names, so a repeated create fails with AlreadyExists instead of making a second object (S-10).
//
// The ReplicaSet and check-Job actions of a shard in another cluster go to that cluster (spokes,
// by shard name), and so do the schema Jobs' with spec.schema.runWithShard (jobPlace), with the
// object turned back into the spoke's (spokeShard.toSpoke, jobToSpoke).
//
// One region's error is that region's (S-45): an error from a spoke's API server that is neither
// a refusal (isRefusal: the planner reports those) nor a stale read (Conflict, AlreadyExists,
// NotFound) — a 5xx, a timeout, a failing admission webhook — stops the actions of that shard
// only; the hub's and every other spoke's go on. down returns those errors by shard, for the
// reconciler to freeze those shards for this reconcile (frozenByWrite). Any other error stops
// the apply and is returned, as before.
func (r *RoutingServiceReconciler) apply(ctx context.Context, rsvc *routingv1alpha1.RoutingService, actions []rollout.Action, spokes map[string]*spokeShard) (down map[string]error, _ error) {
	log := logf.FromContext(ctx)
	for _, a := range actions {
		var err error
		c := client.Client(r.Client)
		ownerRef := rollout.ControllerRef(rsvc)
		// Where a create's name conflict is looked up (conflictOf): past the hub's cache, or in
		// the spoke it was written to, with the controller it must have there.
		var reader client.Reader
		owner := rsvc.UID
		place := "" // the shard whose spoke this action goes to; "" for the hub
		if a.ReplicaSet != nil {
			if sp := spokes[a.ReplicaSet.Labels[rollout.LabelShard]]; sp != nil {
				place = a.ReplicaSet.Labels[rollout.LabelShard]
				a, c, ownerRef = sp.toSpoke(a), sp.conn.client, spoke.AnchorRef(sp.anchor)
				reader, owner = sp.conn.client, sp.anchor.UID
			} else if isClusterShard(rsvc, a.ReplicaSet.Labels[rollout.LabelShard]) {
				// The planner freezes such a shard unless it was reached; never write the hub's.
				continue
			}
		}
		if a.Job != nil {
			// A shard's check Jobs run where the shard runs, the schema Jobs where
			// spec.schema.runWithShard says (jobPlace).
			sp, skip := jobPlace(rsvc, a, spokes)
			if skip {
				continue
			}
			if sp != nil {
				place = spokeShardName(spokes, sp)
				a, c = sp.jobToSpoke(a), sp.conn.client
				reader, owner = sp.conn.client, sp.anchor.UID
			}
		}
		if a.Pod != nil {
			if sp := spokes[a.Pod.Labels[rollout.LabelShard]]; sp != nil && isClusterShard(rsvc, a.Pod.Labels[rollout.LabelShard]) {
				place = a.Pod.Labels[rollout.LabelShard]
			}
		}
		if _, isDown := down[place]; isDown && place != "" {
			continue // its region failed a write in this reconcile: nothing more goes there
		}
		log.Info("apply", "action", a.Kind, "detail", a.String())
		if a.Kind == rollout.SetPodCheck {
			// A pod is written where it runs; it may be gone or replaced since it was read, which
			// stops nothing else: it is measured again if it is still there.
			if err := setPodCheck(ctx, podClient(r.Client, rsvc, a.Pod, spokes), a.Pod, a.PodCondition); err != nil &&
				!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				if place != "" && regionError(err) {
					down = markDown(down, place, &actionError{action: a, err: err})
					continue
				}
				return down, &actionError{action: a, err: err}
			}
			continue
		}
		switch a.Kind {
		case rollout.CreateReplicaSet:
			err = c.Create(ctx, a.ReplicaSet)
		case rollout.ScaleReplicaSet:
			err = scale(ctx, c, a.ReplicaSet, a.Replicas)
			if err == nil && a.Replicas == 0 && a.RemovePods {
				removeScaledToZero(ctx, c, a.ReplicaSet)
			}
		case rollout.DeleteReplicaSet:
			err = c.Delete(ctx, a.ReplicaSet, client.Preconditions{UID: &a.ReplicaSet.UID, ResourceVersion: &a.ReplicaSet.ResourceVersion})
		case rollout.CreateJob:
			err = c.Create(ctx, a.Job)
		case rollout.DeleteJob:
			// Background: the Job goes now and the garbage collector removes its pods. Already
			// gone is what was asked.
			err = client.IgnoreNotFound(c.Delete(ctx, a.Job, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &a.Job.UID, ResourceVersion: &a.Job.ResourceVersion}))
		case rollout.SuspendJob:
			patch := client.MergeFromWithOptions(a.Job.DeepCopy(), client.MergeFromWithOptimisticLock{})
			suspended := a.Job.DeepCopy()
			suspended.Spec.Suspend = ptr.To(true)
			err = c.Patch(ctx, suspended, patch)
		case rollout.StopJob:
			patch := client.MergeFromWithOptions(a.Job.DeepCopy(), client.MergeFromWithOptimisticLock{})
			stopped := a.Job.DeepCopy()
			stopped.Spec.Parallelism = ptr.To(int32(0))
			err = c.Patch(ctx, stopped, patch)
		case rollout.AnnotateJob:
			patch := client.MergeFromWithOptions(a.Job.DeepCopy(), client.MergeFromWithOptimisticLock{})
			annotated := a.Job.DeepCopy()
			if annotated.Annotations == nil {
				annotated.Annotations = map[string]string{}
			}
			maps.Copy(annotated.Annotations, a.Annotations)
			err = c.Patch(ctx, annotated, patch)
		case rollout.AdoptReplicaSet:
			patch := client.MergeFromWithOptions(a.ReplicaSet.DeepCopy(), client.MergeFromWithOptimisticLock{})
			adopted := a.ReplicaSet.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, ownerRef)
			rollout.MarkAdopted(adopted)
			err = c.Patch(ctx, adopted, patch)
		case rollout.CreateRecord:
			// A record is history, not a step: a name held by an object the cache cannot see (not
			// labelled) must not stop the actions after it. The planner writes it again when the
			// name is free.
			if err = r.Create(ctx, a.Record); apierrors.IsAlreadyExists(err) {
				log.Info("the revision record's name is taken", "name", a.Record.Name)
				err = nil
			}
		case rollout.AdoptRecord:
			patch := client.MergeFromWithOptions(a.Record.DeepCopy(), client.MergeFromWithOptimisticLock{})
			adopted := a.Record.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, rollout.ControllerRef(rsvc))
			err = r.Patch(ctx, adopted, patch)
		case rollout.DeleteRecord:
			err = client.IgnoreNotFound(r.Delete(ctx, a.Record, client.Preconditions{UID: &a.Record.UID, ResourceVersion: &a.Record.ResourceVersion}))
		case rollout.AdoptJob:
			patch := client.MergeFromWithOptions(a.Job.DeepCopy(), client.MergeFromWithOptimisticLock{})
			adopted := a.Job.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, rollout.HistoryRef(rsvc))
			err = r.Patch(ctx, adopted, patch)
		case rollout.MarkServed:
			patch := client.MergeFromWithOptions(a.ReplicaSet.DeepCopy(), client.MergeFromWithOptimisticLock{})
			marked := a.ReplicaSet.DeepCopy()
			rollout.SetServedOrder(marked, a.Order)
			err = c.Patch(ctx, marked, patch)
		case rollout.RecordControls:
			// Only these annotations, with no resourceVersion: nothing else is changed, so there
			// is nothing to conflict with.
			patch := client.MergeFrom(a.ReplicaSet.DeepCopy())
			recorded := a.ReplicaSet.DeepCopy()
			rollout.SetAnnotations(recorded, a.Annotations)
			err = c.Patch(ctx, recorded, patch)
		default:
			err = fmt.Errorf("unknown action %q", a.Kind)
		}
		if err != nil && place != "" && regionError(err) {
			log.Info("a region's API server failed a write; its shard is frozen for this reconcile, the others go on", "shard", place, "error", err.Error())
			down = markDown(down, place, &actionError{action: a, err: err})
			continue
		}
		if err != nil {
			return down, &actionError{action: a, err: err, reader: reader, owner: owner}
		}
	}
	return down, nil
}

// setPodCheck sets cond, one readiness-gate condition, in pod's status: a strategic merge patch of
// that condition alone (conditions merge by type, so the kubelet's own stay as they are), with
// pod's UID as a precondition, so a new pod of the same name is never marked.
func setPodCheck(ctx context.Context, c client.Client, pod *corev1.Pod, cond corev1.PodCondition) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return err
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	return c.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch))
}

// podClient is the client of the cluster pod runs in: its shard's spoke, or the hub's.
func podClient(hub client.Client, rsvc *routingv1alpha1.RoutingService, pod *corev1.Pod, spokes map[string]*spokeShard) client.Client {
	if sp := spokes[pod.Labels[rollout.LabelShard]]; sp != nil && isClusterShard(rsvc, pod.Labels[rollout.LabelShard]) {
		return sp.conn.client
	}
	return hub
}

func scale(ctx context.Context, c client.Client, rs *appsv1.ReplicaSet, replicas int32) error {
	patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = ptr.To(replicas)
	return c.Patch(ctx, scaled, patch)
}

// isClusterShard reports whether shard names a cluster in rsvc's spec.
func isClusterShard(rsvc *routingv1alpha1.RoutingService, shard string) bool {
	for _, s := range rsvc.Spec.Shards {
		if s.Name == shard {
			return s.Cluster != nil
		}
	}
	return false
}

// actionError is an action that failed, with the API error (errors.Is/As see through it).
type actionError struct {
	action rollout.Action
	err    error
	// reader is where the action's object lives, read past any cache (nil: the hub's API
	// reader), and owner the UID that controls it there when it is schemagate's (the
	// RoutingService in the hub, the anchor in a spoke).
	reader client.Reader
	owner  types.UID
}

func (e *actionError) Error() string { return fmt.Sprintf("%s: %v", e.action.String(), e.err) }
func (e *actionError) Unwrap() error { return e.err }

// conflictOf reads, past the cache, the object that made a create fail with AlreadyExists, where
// the create went (the hub, or a shard's spoke). When schemagate does not control it there (the
// RoutingService in the hub, its anchor in a spoke: another owner, none, or it is being deleted),
// it is a rollout.Conflict for the planner (S-21); when it does, the cache is only behind (S-10)
// and ok is false.
func (r *RoutingServiceReconciler) conflictOf(ctx context.Context, rsvc *routingv1alpha1.RoutingService, err error) (rollout.Conflict, bool) {
	var ae *actionError
	if !errors.As(err, &ae) || !apierrors.IsAlreadyExists(err) {
		return rollout.Conflict{}, false
	}
	var obj client.Object
	kind := ""
	switch ae.action.Kind {
	case rollout.CreateJob:
		obj, kind = &batchv1.Job{}, "Job"
		obj.SetName(ae.action.Job.Name)
	case rollout.CreateReplicaSet:
		obj, kind = &appsv1.ReplicaSet{}, "ReplicaSet"
		obj.SetName(ae.action.ReplicaSet.Name)
	default:
		return rollout.Conflict{}, false
	}
	// Where the create went: the hub, or the spoke (its namespace there, its anchor as owner).
	reader, ns, owner := ae.reader, rsvc.Namespace, ae.owner
	if reader == nil {
		reader, owner = r.apiReader(), rsvc.UID
	}
	if ae.action.Job != nil {
		ns = ae.action.Job.Namespace
	} else if ae.action.ReplicaSet != nil {
		ns = ae.action.ReplicaSet.Namespace
	}
	if ns == "" {
		ns = rsvc.Namespace
	}
	if getErr := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); getErr != nil {
		return rollout.Conflict{}, false
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID == owner && obj.GetDeletionTimestamp() == nil {
		return rollout.Conflict{}, false
	}
	return rollout.Conflict{Kind: kind, Name: obj.GetName(), Holder: rollout.Holder(obj)}, true
}
