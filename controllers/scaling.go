package controllers

// The scale targets of autoscaled shards (RoutingShards) and the HorizontalPodAutoscalers
// schemagate owns for them: read for the planner, and made to match the plan.

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingshards,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingshards/status,verbs=update
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete

// scalingFieldManager is the field manager schemagate creates RoutingShards with, so that
// status.shards[].scaling.scaledBy tells the size it started with from an autoscaler's.
const scalingFieldManager = rollout.ScaledBySchemagate

// EventRoutingShardConflict is the Warning Event of a RoutingShard or HorizontalPodAutoscaler
// name held by an object this RoutingService does not control: schemagate leaves it alone, and
// the shard keeps spec.shards[].replicas.
const EventRoutingShardConflict = "ScaleTargetConflict"

// observeShardScales reads the RoutingShards this RoutingService controls into o.ShardScales: the
// size each asks for and the field manager that set it.
func (r *RoutingServiceReconciler) observeShardScales(ctx context.Context, rsvc *routingv1alpha1.RoutingService, o *rollout.Observed) error {
	if !autoscaled(rsvc) {
		return nil
	}
	var list routingv1alpha1.RoutingShardList
	if err := r.List(ctx, &list, ownedBy(rsvc.Namespace, rsvc.Name, nil)...); err != nil {
		return fmt.Errorf("listing RoutingShards: %w", err)
	}
	for i := range list.Items {
		rshard := &list.Items[i]
		shard := rshard.Labels[rollout.LabelShard]
		if shard == "" || rshard.DeletionTimestamp != nil || !metav1.IsControlledBy(rshard, rsvc) ||
			rshard.Name != rollout.RoutingShardName(rsvc.Name, shard) {
			continue
		}
		if o.ShardScales == nil {
			o.ShardScales = map[string]rollout.ShardScale{}
		}
		o.ShardScales[shard] = rollout.ShardScale{Replicas: rshard.Spec.Replicas, ScaledBy: replicasWriter(rshard.ManagedFields)}
	}
	return nil
}

// autoscaled reports whether a shard of rsvc has spec.shards[].autoscaling.
func autoscaled(rsvc *routingv1alpha1.RoutingService) bool {
	for _, s := range rsvc.Spec.Shards {
		if s.Autoscaling != nil {
			return true
		}
	}
	return false
}

// replicasWriter is the field manager of the newest managedFields entry that owns spec.replicas
// (rollout.ReplicasWriter), "" when none does.
func replicasWriter(entries []metav1.ManagedFieldsEntry) string {
	return rollout.ReplicasWriter(entries).Manager
}

// keepReplicasWriter is the cache transform of RoutingShards and ReplicaSets: it keeps only the
// managedFields entries that own spec.replicas (replicasWriter and the planner's foreign-writer
// check read them), so the cache holds no more than it needs.
func keepReplicasWriter(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	var keep []metav1.ManagedFieldsEntry
	for _, e := range o.GetManagedFields() {
		if replicasWriter([]metav1.ManagedFieldsEntry{e}) != "" {
			keep = append(keep, e)
		}
	}
	o.SetManagedFields(keep)
	return obj, nil
}

// syncScaling makes the RoutingService's RoutingShards and HorizontalPodAutoscalers the plan's.
// A RoutingShard is created with the size it starts with and never has its spec written again
// (an autoscaler owns it); its status is updated when it differs. An autoscaler is created, or
// patched when AnnotationAutoscalerSpec differs (the API server's defaults are not compared).
// Those this RoutingService controls and the plan no longer has are deleted. A name held by an
// object it does not control is left alone, with a Warning Event once per holder; that shard
// keeps spec.shards[].replicas. A write the API server refuses comes back as a Refusal (the
// status says so); any other error is returned. A steady RoutingService writes nothing (I4).
func (r *RoutingServiceReconciler) syncScaling(ctx context.Context, rsvc *routingv1alpha1.RoutingService, plan rollout.Plan) ([]rollout.Refusal, error) {
	if !autoscaled(rsvc) && !mayHaveScaling(rsvc) {
		return nil, nil
	}
	s := &scalingSync{r: r, rsvc: rsvc, foreign: map[string]string{}}
	if err := s.routingShards(ctx, plan.RoutingShards); err != nil {
		return nil, err
	}
	if err := s.autoscalers(ctx, plan.Autoscalers); err != nil {
		return nil, err
	}
	for _, key := range r.scaleConflicts.fresh(client.ObjectKeyFromObject(rsvc), s.foreign) {
		r.recordFact(rsvc, corev1.EventTypeWarning, EventRoutingShardConflict,
			"%s in namespace %s: %s; schemagate leaves it alone, and the shard keeps spec.shards[].replicas", key, rsvc.Namespace, s.foreign[key])
	}
	return s.refusals, nil
}

// mayHaveScaling reports whether the stored status says a shard was autoscaled: its RoutingShard
// and autoscaler may still be there to delete.
func mayHaveScaling(rsvc *routingv1alpha1.RoutingService) bool {
	for _, ss := range rsvc.Status.Shards {
		if ss.Scaling != nil {
			return true
		}
	}
	return false
}

// scalingSync is one syncScaling: what it found refused or held by others.
type scalingSync struct {
	r        *RoutingServiceReconciler
	rsvc     *routingv1alpha1.RoutingService
	refusals []rollout.Refusal
	// foreign maps "<Kind> <name>" to who holds that name.
	foreign map[string]string
}

// done sorts the outcome of a write: nil, a refusal (recorded), or an error to return.
func (s *scalingSync) done(verb, kind, name string, err error) error {
	switch {
	case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone, or changed since the cache saw it: the watch brings it back for the next
		// reconcile, which writes it from a fresh copy.
		return nil
	case isRefusal(err):
		s.refusals = append(s.refusals, rollout.Refusal{Verb: verb, Kind: kind, Name: name, Message: apiMessage(err)})
		return nil
	}
	return fmt.Errorf("%s %s %s: %w", verb, kind, name, err)
}

// held records who holds name, reading past the cache (an object without schemagate's labels is
// not in it) when obj was not found there.
func (s *scalingSync) held(ctx context.Context, kind string, obj client.Object, name string) {
	if obj.GetUID() == "" {
		if err := s.r.apiReader().Get(ctx, client.ObjectKey{Namespace: s.rsvc.Namespace, Name: name}, obj); err != nil || metav1.IsControlledBy(obj, s.rsvc) {
			return // gone, or ours after all (the cache is behind): the next reconcile sees it
		}
	}
	s.foreign[kind+" "+name] = rollout.Holder(obj)
}

func (s *scalingSync) routingShards(ctx context.Context, want []*routingv1alpha1.RoutingShard) error {
	log := logf.FromContext(ctx)
	var list routingv1alpha1.RoutingShardList
	if err := s.r.List(ctx, &list, ownedBy(s.rsvc.Namespace, s.rsvc.Name, nil)...); err != nil {
		return fmt.Errorf("listing RoutingShards: %w", err)
	}
	have := byName(list.Items)
	desired := map[string]bool{}
	for _, w := range want {
		desired[w.Name] = true
		h := have[w.Name]
		if h == nil {
			log.Info("create RoutingShard", "name", w.Name, "replicas", *w.Spec.Replicas)
			created := w.DeepCopy()
			created.Status = routingv1alpha1.RoutingShardStatus{}
			err := s.r.Create(ctx, created, client.FieldOwner(scalingFieldManager))
			if apierrors.IsAlreadyExists(err) {
				s.held(ctx, "RoutingShard", &routingv1alpha1.RoutingShard{}, w.Name)
				continue
			}
			if err != nil {
				if err := s.done("create", "RoutingShard", w.Name, err); err != nil {
					return err
				}
				continue
			}
			h = created
		}
		if !metav1.IsControlledBy(h, s.rsvc) {
			s.held(ctx, "RoutingShard", h, w.Name)
			continue
		}
		st := w.Status
		st.ObservedGeneration = h.Generation
		if equality.Semantic.DeepEqual(st, h.Status) {
			continue
		}
		updated := h.DeepCopy()
		updated.Status = st
		if err := s.done("update", "RoutingShard", w.Name, s.r.Status().Update(ctx, updated)); err != nil {
			return err
		}
	}
	return deleteUnwanted(ctx, s, "RoutingShard", have, desired)
}

func (s *scalingSync) autoscalers(ctx context.Context, want []*autoscalingv2.HorizontalPodAutoscaler) error {
	log := logf.FromContext(ctx)
	var list autoscalingv2.HorizontalPodAutoscalerList
	if err := s.r.List(ctx, &list, ownedBy(s.rsvc.Namespace, s.rsvc.Name, nil)...); err != nil {
		return fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	have := byName(list.Items)
	desired := map[string]bool{}
	for _, w := range want {
		desired[w.Name] = true
		h := have[w.Name]
		if h == nil {
			log.Info("create HorizontalPodAutoscaler", "name", w.Name)
			err := s.r.Create(ctx, w.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				s.held(ctx, "HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscaler{}, w.Name)
				continue
			}
			if err := s.done("create", "HorizontalPodAutoscaler", w.Name, err); err != nil {
				return err
			}
			continue
		}
		if !metav1.IsControlledBy(h, s.rsvc) {
			s.held(ctx, "HorizontalPodAutoscaler", h, w.Name)
			continue
		}
		if h.Annotations[rollout.AnnotationAutoscalerSpec] == w.Annotations[rollout.AnnotationAutoscalerSpec] {
			continue
		}
		patch := client.MergeFromWithOptions(h.DeepCopy(), client.MergeFromWithOptimisticLock{})
		updated := h.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[rollout.AnnotationAutoscalerSpec] = w.Annotations[rollout.AnnotationAutoscalerSpec]
		updated.Spec = w.Spec
		log.Info("update HorizontalPodAutoscaler", "name", w.Name)
		if err := s.done("patch", "HorizontalPodAutoscaler", w.Name, s.r.Patch(ctx, updated, patch)); err != nil {
			return err
		}
	}
	return deleteUnwanted(ctx, s, "HorizontalPodAutoscaler", have, desired)
}

// byName indexes a List's items by name.
func byName[T any, PT interface {
	*T
	client.Object
}](items []T) map[string]PT {
	out := make(map[string]PT, len(items))
	for i := range items {
		o := PT(&items[i])
		out[o.GetName()] = o
	}
	return out
}

// deleteUnwanted deletes the objects of have that this RoutingService controls and desired does
// not name, with the observed UID as a precondition.
func deleteUnwanted[T client.Object](ctx context.Context, s *scalingSync, kind string, have map[string]T, desired map[string]bool) error {
	for name, h := range have {
		if desired[name] || h.GetDeletionTimestamp() != nil || !metav1.IsControlledBy(h, s.rsvc) {
			continue
		}
		logf.FromContext(ctx).Info("delete "+kind, "name", name)
		uid := h.GetUID()
		if err := s.done("delete", kind, name, s.r.Delete(ctx, h, client.Preconditions{UID: &uid})); err != nil {
			return err
		}
	}
	return nil
}
