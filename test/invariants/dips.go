package invariants

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// A dip is an I2 breach this checker saw in its own informer view of a shard. That view is
// assembled from watch events and can be inconsistent for a while: after a kube-apiserver restart
// the ReplicaSet informer lists again and hands the listed objects over one at a time, so one
// ReplicaSet can be seen at its new state beside another still at a state from before the outage
// (CI on 2026-12-06 saw a shard's old ReplicaSet at 0 replicas beside a new one still at its
// state of 90 s before, when the API server held it at 3 available). A dip therefore counts only
// when the API server's own state at the same etcd revision shows it too (verifyDips).
type dip struct {
	what, key, ns, name, shard string
	// rv is the highest ReplicaSet resourceVersion this checker had seen when it saw the dip: the
	// etcd revision its view of ReplicaSets claims to show.
	rv     int64
	floor  int32
	counts func(*appsv1.ReplicaSet) bool
	seen   string // the breach as the checker's own view shows it
}

// ReplicaSetsAt lists namespace ns's ReplicaSets matching selector exactly as they were at etcd
// revision rv (resourceVersionMatch=Exact; an error once etcd has compacted it away).
type ReplicaSetsAt func(ctx context.Context, ns, selector string, rv int64) ([]appsv1.ReplicaSet, error)

// shardAvailable sums the available pods of shard's ReplicaSets of RoutingService name among rss
// that counts accepts. Pods above spec.replicas are being removed: a scale-down takes them away
// the moment it is written, before the ReplicaSet controller updates status, so they do not count
// (the planner does not count them either). detail describes each ReplicaSet counted.
func shardAvailable(rss []*appsv1.ReplicaSet, name, shard string, counts func(*appsv1.ReplicaSet) bool) (available int32, detail []string) {
	for _, rs := range rss {
		if rs.Labels[rollout.LabelName] == name && rs.Labels[rollout.LabelShard] == shard && counts(rs) {
			available += min(rs.Status.AvailableReplicas, ptr.Deref(rs.Spec.Replicas, 1))
			detail = append(detail, fmt.Sprintf("%s %d/%d@%s", rs.Labels[rollout.LabelRevision], rs.Status.AvailableReplicas, ptr.Deref(rs.Spec.Replicas, 1), rs.ResourceVersion))
		}
	}
	return available, detail
}

func (d dip) violation(available int32, detail []string, how string) string {
	return fmt.Sprintf("%s: shard %s has %d available replicas, below replicas-maxUnavailable = %d (%s)%s", d.what, d.key, available, d.floor, strings.Join(detail, ", "), how)
}

// recordDip files d: at once as a violation when this checker has no way to read the API server
// (unit tests feed it events by hand), otherwise for verifyDips. k.mu is held.
func (k *Checker) recordDip(d dip) {
	if k.replicaSetsAt == nil {
		k.violations = append(k.violations, d.seen)
		return
	}
	k.pendingI2 = append(k.pendingI2, d)
}

// verifyDips reads each pending dip's shard from the API server at the dip's revision: a dip
// that is there too is a violation; one that is not was this checker's view lagging behind
// (listed under "corrected" in Report); one whose revision is compacted away is undecided. A read
// that fails otherwise (the API server down) is tried again on the next call, and is undecided
// when final. It does not hold k.mu while it reads.
func (k *Checker) verifyDips(ctx context.Context, final bool) {
	k.mu.Lock()
	pending, list := k.pendingI2, k.replicaSetsAt
	k.pendingI2 = nil
	k.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	var violations, corrected, undecided []string
	var retry []dip
	for _, d := range pending {
		sel := rollout.LabelName + "=" + d.name + "," + rollout.LabelShard + "=" + d.shard
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		items, err := list(rctx, d.ns, sel, d.rv)
		cancel()
		if err != nil && !final && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			retry = append(retry, d)
			continue
		}
		if err != nil {
			undecided = append(undecided, fmt.Sprintf("%s; reading the shard at resourceVersion %d failed: %v", d.seen, d.rv, err))
			continue
		}
		rss := make([]*appsv1.ReplicaSet, len(items))
		for i := range items {
			rss[i] = &items[i]
		}
		available, detail := shardAvailable(rss, d.name, d.shard, d.counts)
		if available < d.floor {
			violations = append(violations, d.violation(available, detail, fmt.Sprintf(", as the API server held it at resourceVersion %d", d.rv)))
		} else {
			corrected = append(corrected, fmt.Sprintf("%s; the API server held %d available at resourceVersion %d (%s)", d.seen, available, d.rv, strings.Join(detail, ", ")))
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.violations = append(k.violations, violations...)
	k.correctedI2 = append(k.correctedI2, corrected...)
	k.undecided = append(k.undecided, undecided...)
	k.pendingI2 = append(k.pendingI2, retry...)
}

// ReplicaSetsAtRevision is a ReplicaSetsAt on cs: a list with resourceVersionMatch=Exact, which the
// API server serves from etcd's history (or its watch cache's snapshots) until compaction.
func ReplicaSetsAtRevision(cs kubernetes.Interface) ReplicaSetsAt {
	return func(ctx context.Context, ns, selector string, rv int64) ([]appsv1.ReplicaSet, error) {
		l, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: strconv.FormatInt(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
}
