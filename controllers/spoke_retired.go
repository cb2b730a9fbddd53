package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// maxClustersUsed bounds schemagate.io/clusters-used, read and written alike: entries (50 shards,
// the CRD's bound, each of which may have moved twice) and bytes (the largest valid entry is
// ~800 bytes; all of an object's annotations share 256 KiB).
const (
	maxClustersUsed      = 150
	maxClustersUsedBytes = 128 << 10
)

// retireSettle is how long Ready must have held, for the current generation, before a retired
// place is cleaned up: a spoke's cache that has not yet seen a deletion of this manager's (a
// shard moved away and straight back) must not make a plan look complete.
const retireSettle = 10 * time.Second

// usedCluster is one entry of schemagate.io/clusters-used: a shard and the cluster (with the
// namespace there resolved) it ran in.
type usedCluster struct {
	Shard   string                       `json:"shard"`
	Cluster routingv1alpha1.ShardCluster `json:"cluster"`
}

func (u usedCluster) id(rsvc *routingv1alpha1.RoutingService) string {
	return u.Shard + "|" + connKey(rsvc, &u.Cluster)
}

// readClustersUsed parses the annotation: at most maxClustersUsedBytes, maxClustersUsed entries;
// an entry whose shard or cluster name is not a DNS label, or whose namespace is not one, is
// dropped (a hand edit never names a cluster schemagate would then write to).
func readClustersUsed(rsvc *routingv1alpha1.RoutingService) []usedCluster {
	raw := rsvc.Annotations[routingv1alpha1.AnnotationClustersUsed]
	if raw == "" || len(raw) > maxClustersUsedBytes {
		return nil
	}
	var in []usedCluster
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil
	}
	var out []usedCluster
	for _, u := range in {
		if len(out) == maxClustersUsed {
			break
		}
		ok := len(validation.IsDNS1123Label(u.Shard)) == 0 && len(validation.IsDNS1123Label(u.Cluster.Name)) == 0 &&
			len(validation.IsDNS1123Label(u.Cluster.Namespace)) == 0
		if sr := u.Cluster.SecretRef; sr != nil {
			ok = ok && len(validation.IsDNS1123Subdomain(sr.Name)) == 0 && len(sr.Key) <= 253 &&
				(sr.Format == "" || sr.Format == routingv1alpha1.ClusterSecretKubeconfig || sr.Format == routingv1alpha1.ClusterSecretArgoCD)
		}
		if ok {
			out = append(out, u)
		}
	}
	return out
}

// currentClusters is what the spec names now, each namespace resolved.
func currentClusters(rsvc *routingv1alpha1.RoutingService) []usedCluster {
	var out []usedCluster
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster == nil {
			continue
		}
		c := *s.Cluster.DeepCopy()
		c.Namespace = c.NamespaceOr(rsvc.Namespace)
		out = append(out, usedCluster{Shard: s.Name, Cluster: c})
	}
	return out
}

// retiredClusters are the recorded entries the spec no longer names (a shard removed or moved).
func retiredClusters(rsvc *routingv1alpha1.RoutingService) []usedCluster {
	now := map[string]bool{}
	for _, u := range currentClusters(rsvc) {
		now[u.id(rsvc)] = true
	}
	var out []usedCluster
	for _, u := range readClustersUsed(rsvc) {
		if !now[u.id(rsvc)] {
			out = append(out, u)
		}
	}
	return out
}

// setClustersUsed writes the annotation as entries (sorted, canonical) when it differs; rsvc is
// updated from the answer, so the reconcile goes on with it.
//
// It never writes more than readClustersUsed reads (maxClustersUsed entries, maxClustersUsedBytes):
// past that, the entries of the spec as it is now are kept and retired ones are dropped (their
// pods then keep running where they are, as before this record existed), with a log line.
func (r *RoutingServiceReconciler) setClustersUsed(ctx context.Context, rsvc *routingv1alpha1.RoutingService, entries []usedCluster) error {
	slices.SortFunc(entries, func(a, b usedCluster) int { return strings.Compare(a.id(rsvc), b.id(rsvc)) })
	entries = slices.CompactFunc(entries, func(a, b usedCluster) bool { return a.id(rsvc) == b.id(rsvc) })
	value := ""
	for len(entries) > 0 {
		b, err := json.Marshal(entries)
		if err != nil {
			return err
		}
		if len(entries) <= maxClustersUsed && len(b) <= maxClustersUsedBytes {
			value = string(b)
			break
		}
		entries = dropOneRetired(rsvc, entries)
		logf.FromContext(ctx).Info("schemagate.io/clusters-used is full: a retired cluster is forgotten, its pods there keep running")
	}
	if rsvc.Annotations[routingv1alpha1.AnnotationClustersUsed] == value {
		return nil
	}
	// With the resourceVersion read: the rollout's reconciler adds entries and the retirement
	// controller drops them, and neither may overwrite what the other has just written.
	patch := client.MergeFromWithOptions(rsvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if value == "" {
		delete(rsvc.Annotations, routingv1alpha1.AnnotationClustersUsed)
	} else {
		if rsvc.Annotations == nil {
			rsvc.Annotations = map[string]string{}
		}
		rsvc.Annotations[routingv1alpha1.AnnotationClustersUsed] = value
	}
	return r.Patch(ctx, rsvc, patch)
}

// dropOneRetired removes one entry the spec does not name now (the last), or, when every entry is
// current, the last one.
func dropOneRetired(rsvc *routingv1alpha1.RoutingService, entries []usedCluster) []usedCluster {
	now := map[string]bool{}
	for _, u := range currentClusters(rsvc) {
		now[u.id(rsvc)] = true
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if !now[entries[i].id(rsvc)] {
			return slices.Delete(entries, i, i+1)
		}
	}
	return entries[:len(entries)-1]
}

// retireSpokes cleans up the clusters a shard no longer runs in, once the update revision is
// promoted and available everywhere the spec says (Ready=True in status): as for a shard removed
// from spec.shards in one cluster, the pods that served it stay until the rollout is complete.
// In each retired cluster it reaches, it deletes the shard's ReplicaSets and budget that this
// RoutingService's anchor controls, then (when no shard of the spec still uses that namespace
// there) the anchor itself; the entry is dropped once nothing of it is left. A cluster it cannot
// reach keeps its entry and is tried again; a namespace whose anchor is another RoutingService's
// or another hub's is dropped without a write.
//
// The same place can be named two ways (another Secret for the same cluster, a renamed
// cluster.name): a retired entry whose anchor is the one a current shard of the same name uses is
// the shard's live place, and nothing is deleted there; an anchor a current shard uses is never
// deleted. Ready must have held for the current generation for retireSettle (wasReady, from the
// status as stored before this reconcile, and ready, this plan's), and nothing is deleted by a
// hub without a name of its own (UnnamedHub: two such hubs cannot tell their anchors apart) or
// under an anchor that records another RoutingService's UID.
func (r *RoutingServiceReconciler) retireSpokes(ctx context.Context, rsvc *routingv1alpha1.RoutingService, stored, status *routingv1alpha1.RoutingServiceStatus, spokes map[string]*spokeShard) error {
	retired := retiredClusters(rsvc)
	if len(retired) == 0 || r.Spokes == nil || r.Spokes.Hub == UnnamedHub || !settledReady(rsvc, stored, r.Clock.Now()) ||
		!meta.IsStatusConditionTrue(status.Conditions, routingv1alpha1.ConditionReady) {
		return nil
	}
	log := logf.FromContext(ctx)
	// What the current shards use, by connection and by anchor (every current cluster answered:
	// Ready needs it).
	inUse := map[string]bool{}
	for _, u := range currentClusters(rsvc) {
		inUse[connKey(rsvc, &u.Cluster)] = true
	}
	anchorShards := map[string]map[string]bool{} // anchor UID → current shards under it
	for shard, sh := range spokes {
		uid := string(sh.anchor.UID)
		if anchorShards[uid] == nil {
			anchorShards[uid] = map[string]bool{}
		}
		anchorShards[uid][shard] = true
	}
	drop := map[string]bool{}
	waiting := map[string]string{} // entry id → the state of its cluster
	why := map[string]string{}     // entry id → the Event's message
	defer r.reportRetirementsWaiting(rsvc, waiting, why)
	for _, u := range retired {
		view, conn := r.Spokes.view(ctx, rsvc, &u.Cluster)
		if conn == nil {
			// Not reachable now: tried again later, and said once (an Event) while it waits.
			waiting[u.id(rsvc)] = string(view.State)
			why[u.id(rsvc)] = fmt.Sprintf("shard %s's earlier place, cluster %s namespace %s, is not cleaned up: the cluster is %s (%s); what runs there keeps running until it answers (remove the entry from %s to give up on it)",
				u.Shard, u.Cluster.Name, u.Cluster.NamespaceOr(rsvc.Namespace), view.State, view.Message, routingv1alpha1.AnnotationClustersUsed)
			continue
		}
		anchor := &corev1.ConfigMap{}
		err := conn.client.Get(ctx, client.ObjectKey{Namespace: conn.namespace, Name: spoke.AnchorName(rsvc.Name)}, anchor)
		if err == nil {
			if a := spoke.ReadAnchor(anchor); a.Owner(rsvc, r.Spokes.Hub) != "" || (a.UID != "" && a.UID != rsvc.UID) {
				drop[u.id(rsvc)] = true // not ours: never written
				continue
			}
			if anchorShards[string(anchor.UID)][u.Shard] {
				drop[u.id(rsvc)] = true // the shard's live place, named another way
				continue
			}
		}
		if apierrors.IsNotFound(err) {
			drop[u.id(rsvc)] = true // nothing of ours there
			continue
		}
		if err != nil {
			continue
		}
		var sets appsv1.ReplicaSetList
		if err := conn.cache.List(ctx, &sets, ownedBy(conn.namespace, rsvc.Name, map[string]string{rollout.LabelShard: u.Shard})...); err != nil {
			continue
		}
		left := false
		for i := range sets.Items {
			rs := &sets.Items[i]
			if !metav1.IsControlledBy(rs, anchor) {
				continue
			}
			left = true
			if rs.DeletionTimestamp == nil {
				log.Info("delete the ReplicaSet of a retired shard", "cluster", u.Cluster.Name, "replicaSet", rs.Name)
				if err := conn.client.Delete(ctx, rs, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &rs.UID}); client.IgnoreNotFound(err) != nil {
					log.Info("deleting a retired shard's ReplicaSet failed; tried again later", "error", err.Error())
				}
			}
		}
		pdb := &policyv1.PodDisruptionBudget{}
		if err := conn.client.Get(ctx, client.ObjectKey{Namespace: conn.namespace, Name: rollout.DisruptionBudgetName(rsvc.Name, u.Shard)}, pdb); err == nil && metav1.IsControlledBy(pdb, anchor) {
			left = true
			if err := conn.client.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID}); client.IgnoreNotFound(err) != nil {
				log.Info("deleting a retired shard's budget failed; tried again later", "error", err.Error())
			}
		}
		if left {
			continue
		}
		if !inUse[connKey(rsvc, &u.Cluster)] && len(anchorShards[string(anchor.UID)]) == 0 && !usedByAnotherRetired(rsvc, retired, u, drop) {
			log.Info("delete the anchor of a cluster no shard runs in", "cluster", u.Cluster.Name)
			if err := conn.client.Delete(ctx, anchor, client.Preconditions{UID: &anchor.UID}); client.IgnoreNotFound(err) != nil {
				continue
			}
		}
		drop[u.id(rsvc)] = true
	}
	if len(drop) == 0 {
		return nil
	}
	var keep []usedCluster
	for _, u := range readClustersUsed(rsvc) {
		if !drop[u.id(rsvc)] {
			keep = append(keep, u)
		}
	}
	return r.setClustersUsed(ctx, rsvc, keep)
}

// EventRetirementPending is the Warning Event of a retired place (schemagate.io/clusters-used)
// whose cluster does not answer, so its cleanup waits: recorded once per place and state.
const EventRetirementPending = "RetirementPending"

// reportRetirementsWaiting records EventRetirementPending, with its message in why, for each
// waiting place (entry id → the state of its cluster) not already reported in that state.
func (r *RoutingServiceReconciler) reportRetirementsWaiting(rsvc *routingv1alpha1.RoutingService, waiting, why map[string]string) {
	for _, id := range r.retirementsWaiting.fresh(types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}, waiting) {
		if r.Recorder != nil {
			r.recordFact(rsvc, corev1.EventTypeWarning, EventRetirementPending, "%s", why[id])
		}
	}
}

// settledReady reports whether the stored status says Ready=True for the current generation, and
// has for retireSettle.
func settledReady(rsvc *routingv1alpha1.RoutingService, stored *routingv1alpha1.RoutingServiceStatus, now time.Time) bool {
	since, ok := readySince(rsvc, stored)
	return ok && now.Sub(since) >= retireSettle
}

// readySince is when st's Ready became True, when it is True for the current generation (ok).
func readySince(rsvc *routingv1alpha1.RoutingService, st *routingv1alpha1.RoutingServiceStatus) (since time.Time, ok bool) {
	c := meta.FindStatusCondition(st.Conditions, routingv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || st.ObservedGeneration != rsvc.Generation || c.ObservedGeneration != rsvc.Generation {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// usedByAnotherRetired reports whether another retired entry, not yet cleaned up (not in done),
// uses u's connection: its anchor must stay until that one is done too.
func usedByAnotherRetired(rsvc *routingv1alpha1.RoutingService, retired []usedCluster, u usedCluster, done map[string]bool) bool {
	for _, o := range retired {
		if o.id(rsvc) != u.id(rsvc) && !done[o.id(rsvc)] && connKey(rsvc, &o.Cluster) == connKey(rsvc, &u.Cluster) {
			return true
		}
	}
	return false
}
