package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// observe lists, from the cache, the ReplicaSets and Jobs labelled with the RoutingService's name
// in its namespace, and its migration and check Jobs' pods (their schema reports, and why a
// migration is stuck). The planner keeps only the ReplicaSets and Jobs it controls (by owner UID),
// and reads a report only from a pod its Job controls.
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
	if err := r.List(ctx, &podList, in, client.MatchingLabelsSelector{Selector: schemaPods(rsvc.Name)}); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing migration and check pods: %w", err)
	}
	var routingPods corev1.PodList
	if err := r.List(ctx, &routingPods, in, client.MatchingLabels{rollout.LabelName: rsvc.Name, rollout.LabelManagedBy: rollout.ManagedByValue, rollout.LabelComponent: rollout.ComponentRouting}); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing routing pods: %w", err)
	}
	o := rollout.Observed{RoutingService: rsvc, Now: r.Clock.Now(), TerminatingPods: terminatingByOwner(routingPods.Items)}
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

// terminatingByOwner counts the pods that have a deletionTimestamp by the UID of their
// controller (a ReplicaSet), for the planner's check that the ReplicaSet controller has caught up
// before a rolling step writes a ReplicaSet again.
func terminatingByOwner(pods []corev1.Pod) map[types.UID]int32 {
	out := map[types.UID]int32{}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			continue
		}
		if ref := metav1.GetControllerOf(&pods[i]); ref != nil {
			out[ref.UID]++
		}
	}
	return out
}

// schemaPods selects the pods of a RoutingService's migration, check and shard-check Jobs (not
// its routing pods, which can be many).
func schemaPods(name string) labels.Selector {
	sel := labels.SelectorFromSet(labels.Set{rollout.LabelName: name, rollout.LabelManagedBy: rollout.ManagedByValue})
	req, err := labels.NewRequirement(rollout.LabelComponent, selection.In, []string{rollout.ComponentMigration, rollout.ComponentCheck, rollout.ComponentShardCheck})
	if err != nil {
		// The values are constants that are valid label values; this cannot fail.
		panic(err)
	}
	return sel.Add(*req)
}
