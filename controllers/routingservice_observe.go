package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// observe lists, from the cache, the ReplicaSets and Jobs labelled with the RoutingService's name
// in its namespace, and its migration Jobs' pods (to say why a migration is stuck). The planner
// keeps only the ReplicaSets and Jobs it controls (by owner UID).
func (r *RoutingServiceReconciler) observe(ctx context.Context, rsvc *routingv1alpha1.RoutingService) (rollout.Observed, error) {
	selector := client.MatchingLabels{rollout.LabelName: rsvc.Name, rollout.LabelManagedBy: rollout.ManagedByValue}
	in := client.InNamespace(rsvc.Namespace)

	var rsList appsv1.ReplicaSetList
	if err := r.List(ctx, &rsList, in, selector); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	var jobList batchv1.JobList
	if err := r.List(ctx, &jobList, in, selector); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing Jobs: %w", err)
	}
	var podList corev1.PodList
	migration := client.MatchingLabels{rollout.LabelName: rsvc.Name, rollout.LabelManagedBy: rollout.ManagedByValue, rollout.LabelComponent: rollout.ComponentMigration}
	if err := r.List(ctx, &podList, in, migration); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing migration pods: %w", err)
	}
	o := rollout.Observed{RoutingService: rsvc, Now: r.Clock.Now()}
	for i := range podList.Items {
		o.Pods = append(o.Pods, &podList.Items[i])
	}
	for i := range rsList.Items {
		o.ReplicaSets = append(o.ReplicaSets, &rsList.Items[i])
	}
	for i := range jobList.Items {
		o.Jobs = append(o.Jobs, &jobList.Items[i])
	}
	return o, nil
}
