package controllers

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// spokeShard is a shard in another cluster, as this reconcile reached it: the connection its
// writes go through and the anchor that owns its ReplicaSets there (nil until the plan's Places
// create it: spoke_places.go).
type spokeShard struct {
	conn   *spokeConn
	anchor *corev1.ConfigMap
	// takeoverFrom is the hub whose anchor this one takes over (schemagate.io/takeover); the
	// anchor records it when the plan's Places write it.
	takeoverFrom string
	// jobs are the UIDs of the schema Jobs observed there (observeSchemaJobs).
	jobs map[types.UID]bool
}

// observeSpokes adds what the planner needs of every shard with spec.shards[].cluster to o: the
// state of its cluster (o.Clusters), and, where the cluster is reachable and its anchor is this
// RoutingService's (or there is none yet), its ReplicaSets and routing pods, read from the
// spoke's cache. It writes nothing. The
// ReplicaSets are shown to the planner as the hub's own would be (in the RoutingService's
// namespace, controlled by it); apply turns them back. Only ReplicaSets the anchor controls, or
// that no one controls, are shown; nothing in a spoke is ever deleted because it is missing here.
// The hub's own ReplicaSets of such a shard are left out (and alone).
func (r *RoutingServiceReconciler) observeSpokes(ctx context.Context, rsvc *routingv1alpha1.RoutingService, o *rollout.Observed) map[string]*spokeShard {
	clusterShards := map[string]bool{}
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster != nil {
			clusterShards[s.Name] = true
		}
	}
	if len(clusterShards) == 0 {
		return nil
	}
	o.EarlierPlaces = append(o.EarlierPlaces, hubEarlierPlaces(rsvc, o, clusterShards)...)
	o.ReplicaSets = slices.DeleteFunc(o.ReplicaSets, func(rs *appsv1.ReplicaSet) bool { return clusterShards[rs.Labels[rollout.LabelShard]] })
	// A cluster shard's check Jobs run in its cluster; the hub's own (from before the shard moved
	// there) are left alone and never read as its checks.
	o.Jobs = slices.DeleteFunc(o.Jobs, func(j *batchv1.Job) bool { return clusterShards[j.Labels[rollout.LabelShard]] })
	o.Pods = slices.DeleteFunc(o.Pods, func(p *corev1.Pod) bool { return clusterShards[p.Labels[rollout.LabelShard]] })
	o.Clusters = map[string]rollout.ClusterView{}
	out := map[string]*spokeShard{}
	type anchorMemo struct {
		cm       *corev1.ConfigMap
		takeover string
		why      string
		state    routingv1alpha1.ClusterState
	}
	anchors := map[*spokeConn]anchorMemo{}
	for _, shard := range rsvc.Spec.Shards {
		if shard.Cluster == nil {
			continue
		}
		if r.Spokes == nil {
			o.Clusters[shard.Name] = rollout.ClusterView{Name: shard.Cluster.Name, State: routingv1alpha1.ClusterConnecting, Message: errNoSpokes.Error()}
			continue
		}
		view, conn := r.Spokes.view(ctx, rsvc, shard.Cluster)
		if conn == nil {
			o.Clusters[shard.Name] = view
			continue
		}
		memo, ok := anchors[conn]
		if !ok {
			memo.cm, memo.takeover, memo.why, memo.state = r.readAnchor(ctx, rsvc, conn)
			anchors[conn] = memo
		}
		anchor := memo.cm
		if memo.why != "" {
			view.State, view.Message = memo.state, memo.why
			o.Clusters[shard.Name] = view
			continue
		}
		sel := ownedBy(conn.namespace, rsvc.Name, map[string]string{rollout.LabelShard: shard.Name})
		var rss appsv1.ReplicaSetList
		var pods corev1.PodList
		var jobs batchv1.JobList
		if err := conn.cache.List(ctx, &rss, sel...); err != nil {
			o.Clusters[shard.Name] = rollout.ClusterView{Name: shard.Cluster.Name, State: routingv1alpha1.ClusterUnreachable, Message: fmt.Sprintf("listing its ReplicaSets: %v", err)}
			continue
		}
		if err := conn.cache.List(ctx, &pods, sel...); err != nil {
			o.Clusters[shard.Name] = rollout.ClusterView{Name: shard.Cluster.Name, State: routingv1alpha1.ClusterUnreachable, Message: fmt.Sprintf("listing its pods: %v", err)}
			continue
		}
		if err := conn.cache.List(ctx, &jobs, sel...); err != nil {
			o.Clusters[shard.Name] = rollout.ClusterView{Name: shard.Cluster.Name, State: routingv1alpha1.ClusterUnreachable, Message: fmt.Sprintf("listing its Jobs: %v", err)}
			continue
		}
		for i := range rss.Items {
			rs := &rss.Items[i]
			ref := metav1.GetControllerOf(rs)
			if ref != nil && (anchor == nil || ref.UID != anchor.UID) {
				continue // another owner's: never touched
			}
			shown := rs.DeepCopy()
			shown.Namespace = rsvc.Namespace
			if ref != nil {
				shown.OwnerReferences = []metav1.OwnerReference{rollout.ControllerRef(rsvc)}
			}
			o.ReplicaSets = append(o.ReplicaSets, shown)
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if j.Labels[rollout.LabelComponent] != rollout.ComponentShardCheck || (anchor == nil || !metav1.IsControlledBy(j, anchor)) {
				continue // only the shard's check Jobs, and only the anchor's: nothing else is read or adopted
			}
			shown := j.DeepCopy()
			shown.Namespace = rsvc.Namespace
			shown.OwnerReferences = []metav1.OwnerReference{rollout.ControllerRef(rsvc)}
			o.Jobs = append(o.Jobs, shown)
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck {
				// A check Job's pod (the planner says why a check failed from it); its controller is
				// the spoke's Job, whose UID the shown Job keeps.
				shown := pod.DeepCopy()
				shown.Namespace = rsvc.Namespace
				o.Pods = append(o.Pods, shown)
				continue
			}
			if pod.Labels[rollout.LabelComponent] != rollout.ComponentRouting {
				continue
			}
			// The pod-health gate reads their restarts; their controller is the spoke's ReplicaSet,
			// whose UID the shown ReplicaSet keeps (the list's own copy: nothing writes it).
			o.AddPod(pod)
		}
		o.Clusters[shard.Name] = view
		out[shard.Name] = &spokeShard{conn: conn, anchor: anchor, takeoverFrom: memo.takeover}
	}
	return out
}

// readAnchor reads rsvc's anchor in conn's namespace; it writes nothing (the plan's Places make it
// exist and record what it should: spoke_places.go). cm is nil when there is none yet: the place
// is then empty of this RoutingService's objects. why is non-empty when the shard cannot be
// managed there, and state says how: ManagedElsewhere when the anchor is not this RoutingService's
// as managed by this hub and no takeover of it was asked for (cm is returned as read),
// CredentialsRefused when the spoke answered 401 or 403, Unreachable for any other error.
// takeoverFrom is the hub whose anchor the annotation schemagate.io/takeover asks to take over.
func (r *RoutingServiceReconciler) readAnchor(ctx context.Context, rsvc *routingv1alpha1.RoutingService, conn *spokeConn) (cm *corev1.ConfigMap, takeoverFrom, why string, state routingv1alpha1.ClusterState) {
	cm = &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: conn.namespace, Name: spoke.AnchorName(rsvc.Name)}
	err := conn.cache.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		// The cache may be behind a create of a previous reconcile's: ask directly.
		err = conn.client.Get(ctx, key, cm)
	}
	if apierrors.IsNotFound(err) {
		return nil, "", "", ""
	}
	if err != nil {
		return nil, "", fmt.Sprintf("reading its anchor ConfigMap: %v", err), refusedOr(err)
	}
	a := spoke.ReadAnchor(cm)
	why = a.Owner(rsvc, r.Spokes.Hub)
	if why == "" {
		return cm, "", "", ""
	}
	if a.Namespace == rsvc.Namespace && a.Name == rsvc.Name && a.Hub != "" && rsvc.Annotations[routingv1alpha1.AnnotationTakeover] == a.Hub {
		return cm, a.Hub, "", ""
	}
	return cm, "", why, routingv1alpha1.ClusterManagedElsewhere
}

// refusedOr is the cluster state a spoke's error means: CredentialsRefused for 401 and 403 (the
// hub's credentials there do not allow it), Unreachable otherwise.
func refusedOr(err error) routingv1alpha1.ClusterState {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return routingv1alpha1.ClusterCredentialsRefused
	}
	return routingv1alpha1.ClusterUnreachable
}

func equalData(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// jobToSpoke turns an action's Job back into the spoke's object: its namespace there, and, for a
// Job being created, the anchor as its controller and the RoutingService the anchor records
// (spoke.AnnotationRoutingService, AnnotationRoutingServiceUID).
func (s *spokeShard) jobToSpoke(a rollout.Action) rollout.Action {
	j := a.Job.DeepCopy()
	j.Namespace = s.conn.namespace
	if a.Kind == rollout.CreateJob {
		j.OwnerReferences = []metav1.OwnerReference{spoke.AnchorRef(s.anchor)}
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations[spoke.AnnotationRoutingService] = s.anchor.Data[spoke.KeyNamespace] + "/" + s.anchor.Data[spoke.KeyName]
		j.Annotations[spoke.AnnotationRoutingServiceUID] = s.anchor.Data[spoke.KeyUID]
	}
	a.Job = j
	return a
}

// toSpoke turns an action's ReplicaSet back into the spoke's object: its namespace there, and,
// for a ReplicaSet being created, the anchor as its controller.
func (s *spokeShard) toSpoke(a rollout.Action) rollout.Action {
	rs := a.ReplicaSet.DeepCopy()
	rs.Namespace = s.conn.namespace
	if a.Kind == rollout.CreateReplicaSet {
		rs.OwnerReferences = []metav1.OwnerReference{spoke.AnchorRef(s.anchor)}
	}
	a.ReplicaSet = rs
	return a
}
