package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// apply carries out the planner's actions in order and stops at the first error. Scales and
// deletes carry the observed resourceVersion (optimistic concurrency), so a decision made on a
// stale cache fails with a Conflict instead of acting on old numbers; creates use deterministic
// names, so a repeated create fails with AlreadyExists instead of making a second object (S-10).
func (r *RoutingServiceReconciler) apply(ctx context.Context, rsvc *routingv1alpha1.RoutingService, actions []rollout.Action) error {
	log := logf.FromContext(ctx)
	for _, a := range actions {
		log.Info("apply", "action", a.Kind, "detail", a.String())
		var err error
		switch a.Kind {
		case rollout.CreateReplicaSet:
			err = r.Create(ctx, a.ReplicaSet)
		case rollout.ScaleReplicaSet:
			err = r.scale(ctx, a.ReplicaSet, a.Replicas)
		case rollout.DeleteReplicaSet:
			err = r.Delete(ctx, a.ReplicaSet, client.Preconditions{UID: &a.ReplicaSet.UID, ResourceVersion: &a.ReplicaSet.ResourceVersion})
		case rollout.CreateJob:
			err = r.Create(ctx, a.Job)
		case rollout.SuspendJob:
			patch := client.MergeFromWithOptions(a.Job.DeepCopy(), client.MergeFromWithOptimisticLock{})
			suspended := a.Job.DeepCopy()
			suspended.Spec.Suspend = ptr.To(true)
			err = r.Patch(ctx, suspended, patch)
		case rollout.AdoptReplicaSet:
			patch := client.MergeFromWithOptions(a.ReplicaSet.DeepCopy(), client.MergeFromWithOptimisticLock{})
			adopted := a.ReplicaSet.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, rollout.ControllerRef(rsvc))
			err = r.Patch(ctx, adopted, patch)
		case rollout.MarkServed:
			patch := client.MergeFromWithOptions(a.ReplicaSet.DeepCopy(), client.MergeFromWithOptimisticLock{})
			marked := a.ReplicaSet.DeepCopy()
			rollout.SetServedAt(marked, a.Time)
			err = r.Patch(ctx, marked, patch)
		default:
			err = fmt.Errorf("unknown action %q", a.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.String(), err)
		}
	}
	return nil
}

func (r *RoutingServiceReconciler) scale(ctx context.Context, rs *appsv1.ReplicaSet, replicas int32) error {
	patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = ptr.To(replicas)
	return r.Patch(ctx, scaled, patch)
}
