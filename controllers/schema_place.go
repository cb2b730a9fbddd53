package controllers

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// schemaShard is the shard whose cluster the schema Jobs run in (spec.schema.runWithShard, when
// that shard names a cluster), or "" when they run in the RoutingService's own namespace.
func schemaShard(rsvc *routingv1alpha1.RoutingService) string {
	if s := rsvc.Spec.Schema.RunWithShard; s != "" && isClusterShard(rsvc, s) {
		return s
	}
	return ""
}

// observeSchemaJobs adds to o the schema Jobs (and their pods) this RoutingService's anchors
// control in every shard cluster reached in this reconcile (spokes), shown as the hub's own
// would be (in the RoutingService's namespace, controlled by it), and remembers each on its
// spokeShard by UID so that apply sends its deletes and patches there.
//
// Not only spec.schema.runWithShard's cluster: a Job started where runWithShard pointed before
// (it changed, or its shard moved, with a status that no longer said the Job ran; the API server
// refuses the change otherwise) is still running against the same database, and a check or retry
// must wait for it (issue 42 item 7). The hub's own schema Jobs (from before runWithShard was
// set) stay in o: they are history, and may be the evidence. When runWithShard's cluster was not
// reached, nothing of it is added: the planner holds (pkg/rollout/schemaplace.go).
func (r *RoutingServiceReconciler) observeSchemaJobs(ctx context.Context, rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, spokes map[string]*spokeShard) error {
	read := map[*spokeConn]bool{}
	for _, shard := range rsvc.Spec.Shards {
		sp := spokes[shard.Name]
		if sp == nil || sp.conn == nil || read[sp.conn] {
			continue
		}
		read[sp.conn] = true
		if err := observeSchemaJobsIn(ctx, rsvc, o, sp, shard.Name); err != nil {
			return err
		}
	}
	return nil
}

// observeSchemaJobsIn adds the schema Jobs and pods of sp's cluster to o (observeSchemaJobs).
func observeSchemaJobsIn(ctx context.Context, rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, sp *spokeShard, shard string) error {
	sel := ownedBy(sp.conn.namespace, rsvc.Name, nil)
	var jobs batchv1.JobList
	if err := sp.conn.cache.List(ctx, &jobs, sel...); err != nil {
		return fmt.Errorf("listing the schema Jobs in shard %s's cluster: %w", shard, err)
	}
	var pods corev1.PodList
	if err := sp.conn.cache.List(ctx, &pods, sel...); err != nil {
		return fmt.Errorf("listing the schema Jobs' pods in shard %s's cluster: %w", shard, err)
	}
	sp.jobs = map[types.UID]bool{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !rollout.IsSchemaComponent(j.Labels[rollout.LabelComponent]) || sp.anchor == nil || !metav1.IsControlledBy(j, sp.anchor) {
			continue
		}
		shown := j.DeepCopy()
		shown.Namespace = rsvc.Namespace
		shown.OwnerReferences = []metav1.OwnerReference{rollout.ControllerRef(rsvc)}
		o.Jobs = append(o.Jobs, shown)
		sp.jobs[j.UID] = true
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !rollout.IsSchemaComponent(pod.Labels[rollout.LabelComponent]) {
			continue
		}
		// Its report is read only if the pod's controller is one of the Jobs shown (by UID).
		shown := pod.DeepCopy()
		shown.Namespace = rsvc.Namespace
		o.Pods = append(o.Pods, shown)
	}
	return nil
}

// jobPlace returns where a Job action goes: the spoke for a check Job of a cluster shard, for a
// schema Job created while spec.schema.runWithShard names a cluster shard, or for a Job observed
// there; nil for the hub. skip is true when the action must not be applied anywhere: its cluster
// was not reached in this reconcile (the planner plans none then), or it adopts a Job in a spoke
// (only the anchor's Jobs are shown there: there is no orphan to adopt).
func jobPlace(rsvc *routingv1alpha1.RoutingService, a rollout.Action, spokes map[string]*spokeShard) (sp *spokeShard, skip bool) {
	if shard := a.Job.Labels[rollout.LabelShard]; shard != "" {
		if sp := spokes[shard]; sp != nil {
			return sp, a.Kind == rollout.AdoptJob
		}
		return nil, isClusterShard(rsvc, shard)
	}
	if a.Kind == rollout.CreateJob && rollout.IsSchemaComponent(a.Job.Labels[rollout.LabelComponent]) {
		if shard := schemaShard(rsvc); shard != "" {
			sp := spokes[shard]
			return sp, sp == nil
		}
		return nil, false
	}
	for _, sp := range spokes {
		if sp.jobs[a.Job.UID] {
			return sp, a.Kind == rollout.AdoptJob
		}
	}
	return nil, false
}
