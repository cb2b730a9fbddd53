package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// writeStatus writes status only when it differs from the stored one (I4: a reconcile that
// changes nothing writes nothing). It is an Update with the observed resourceVersion: if another
// client changed the object meanwhile (S-11), it fails with a Conflict and the reconcile is
// retried on the fresh object, so no status is ever computed for one version and written onto another.
func (r *RoutingServiceReconciler) writeStatus(ctx context.Context, rsvc *routingv1alpha1.RoutingService, status routingv1alpha1.RoutingServiceStatus) error {
	if equality.Semantic.DeepEqual(rsvc.Status, status) {
		return nil
	}
	updated := rsvc.DeepCopy()
	updated.Status = status
	return r.Status().Update(ctx, updated)
}

func (r *RoutingServiceReconciler) recordEvents(rsvc *routingv1alpha1.RoutingService, events []rollout.Event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range events {
		eventType := corev1.EventTypeNormal
		if e.Warning {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(rsvc, nil, eventType, e.Reason, "Reconcile", "%s", e.Message)
	}
}
