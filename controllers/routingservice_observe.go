package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// observe lists, from the cache, the ReplicaSets, Jobs and ControllerRevisions labelled with the
// RoutingService's name in its namespace (through IndexRoutingService), and its migration and
// check Jobs' pods (their schema reports, and why a migration is stuck). The planner keeps only the ReplicaSets and Jobs it controls (by owner UID),
// and reads a report only from a pod its Job controls.
func (r *RoutingServiceReconciler) observe(ctx context.Context, rsvc *routingv1alpha1.RoutingService) (rollout.Observed, error) {
	// One bucket of the IndexRoutingService index per kind, not a scan of the namespace.
	owned := ownedBy(rsvc.Namespace, rsvc.Name, nil)

	var rsList appsv1.ReplicaSetList
	if err := r.List(ctx, &rsList, owned...); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	var jobList batchv1.JobList
	if err := r.List(ctx, &jobList, owned...); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing Jobs: %w", err)
	}
	// Its revision records (pkg/rollout/history.go).
	var crList appsv1.ControllerRevisionList
	if err := r.List(ctx, &crList, owned...); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	// One List of the RoutingService's pods: its Jobs' pods and its routing pods go to the planner
	// (schema reports, why a Job is stuck, the pod-health gate); routing pods are also counted.
	var podList corev1.PodList
	if err := r.List(ctx, &podList, owned...); err != nil {
		return rollout.Observed{}, fmt.Errorf("listing pods: %w", err)
	}
	o := rollout.Observed{RoutingService: rsvc, Now: r.Clock.Now(), TerminatingPods: map[types.UID]int32{}, RoutingPods: map[types.UID]int32{}, Probe: r.Probe}
	for i := range podList.Items {
		o.AddPod(&podList.Items[i])
	}
	for i := range rsList.Items {
		o.ReplicaSets = append(o.ReplicaSets, &rsList.Items[i])
	}
	for i := range jobList.Items {
		o.Jobs = append(o.Jobs, &jobList.Items[i])
	}
	for i := range crList.Items {
		o.ControllerRevisions = append(o.ControllerRevisions, &crList.Items[i])
	}
	return o, nil
}
