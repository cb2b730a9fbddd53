package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// writeStatus writes status only when it differs from the stored one (I4: a reconcile that
// changes nothing writes nothing). It is an Update with the observed resourceVersion: if another
// client changed the object meanwhile (S-11), it fails with a Conflict and the reconcile is
// retried on the fresh object, so no status is ever computed for one version and written onto another.
//
// A successful write is remembered (writtenVersions), so that reconciles on the cache's copy from
// before it are skipped until the cache has it, unless the server stored nothing new (it answered
// with the resourceVersion the write replaced).
func (r *RoutingServiceReconciler) writeStatus(ctx context.Context, key types.NamespacedName, rsvc *routingv1alpha1.RoutingService, status routingv1alpha1.RoutingServiceStatus) error {
	if equality.Semantic.DeepEqual(rsvc.Status, status) {
		return nil
	}
	updated := rsvc.DeepCopy()
	updated.Status = status
	if err := r.Status().Update(ctx, updated); err != nil {
		return err
	}
	r.written.wrote(key, rsvc.ResourceVersion, updated.ResourceVersion, r.Clock.Now())
	return nil
}

// staleCacheRecheck is the fallback requeue of a reconcile skipped because the cache has not yet
// seen the manager's own status write (the write's watch event normally comes first, in
// milliseconds).
const staleCacheRecheck = time.Second

// recordEvents records the planner's Events: each one fits the API's limits (eventNote) and has an
// action of its own (eventAction), so none is refused or folded into another.
func (r *RoutingServiceReconciler) recordEvents(rsvc *routingv1alpha1.RoutingService, events []rollout.Event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range events {
		eventType := corev1.EventTypeNormal
		if e.Warning {
			eventType = corev1.EventTypeWarning
		}
		note := eventNote(e.Message)
		r.Recorder.Eventf(rsvc, nil, eventType, e.Reason, eventAction(e.Reason, note), "%s", note)
	}
}
