package rollout

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// settleRecheck is how soon a rolling step that waits for the ReplicaSet controller looks again
// when no watch event wakes it first. The controller's status write is a watch event, so this is
// only a fallback (for a pod cache that lags behind the ReplicaSet cache).
const settleRecheck = 2 * time.Second

// settled reports whether kube-controller-manager's ReplicaSet controller has caught up with rs,
// so that a write to rs now cannot race a status write of its still in flight:
//
//   - it has observed rs's current generation (status.observedGeneration);
//   - the pods it removed at the last scale-down are no longer counted (status.replicas is not
//     above spec.replicas);
//   - status.terminatingReplicas (Kubernetes 1.33+) does not count more terminating pods than
//     the manager's cache still holds: pods that are gone will be written out of it.
//
// terminating is the number of rs's pods with a deletionTimestamp in the cache. Status only
// counts against settling where it claims more than the cluster has, so a ReplicaSet whose pods
// the manager cannot see (envtest, a restricted cache) is settled once its status is current.
//
// Why: a write to a ReplicaSet while the controller holds an older copy makes its status update
// fail with 409 Conflict, and the controller then reads the ReplicaSet and writes again, all
// through the one client kube-controller-manager rate-limits (20 requests/s by default) for every
// ReplicaSet in the cluster. Under load that controller's queue holds each ReplicaSet for seconds,
// so a manager that scales the moment a new pod is available lands on the old ReplicaSet's pending
// status write regularly: 165 conflicts for 450 pods in issue 13's benchmark at N=50, none for the
// Deployment controller, whose own queue delays its scaling past the ReplicaSet controller's write.
func settled(rs *appsv1.ReplicaSet, terminating int32) bool {
	return rs.Status.ObservedGeneration >= rs.Generation &&
		rs.Status.Replicas <= replicasOf(rs) &&
		ptr.Deref(rs.Status.TerminatingReplicas, 0) <= terminating
}

// unsettledChange returns the first ReplicaSet among rss whose replicas a step would change
// (from replicasOf(rs) to want[i]) and that is not settled, or nil when there is none.
func (p *planner) unsettledChange(rss []*appsv1.ReplicaSet, want []int32) *appsv1.ReplicaSet {
	for i, rs := range rss {
		if want[i] != replicasOf(rs) && !settled(rs, p.observed.TerminatingPods[rs.UID]) {
			return rs
		}
	}
	return nil
}
