package rollout

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// ClusterView is what the reconciler knows of the cluster a shard runs in (spec.shards[].cluster),
// as of this reconcile. The ReplicaSets of a shard whose cluster is not Reachable are the last ones
// its cache held, possibly stale: the planner shows them but acts on none of them.
type ClusterView struct {
	// Name is spec.shards[].cluster.name.
	Name string
	// State is Reachable, Connecting, Unreachable, CredentialsRefused or ManagedElsewhere.
	State routingv1alpha1.ClusterState
	// Message says why (it names the Secret or the error); empty when Reachable.
	Message string
	// LastContact is when the spoke last answered (zero: never).
	LastContact time.Time
	// Note is what ClustersReachable says of a cluster that answers (its server's certificate
	// is not verified), or "".
	Note string
}

// reasonOf is the ClustersReachable reason of a state.
func reasonOf(s routingv1alpha1.ClusterState) string {
	switch s {
	case routingv1alpha1.ClusterCredentialsRefused:
		return routingv1alpha1.ReasonCredentialsRefused
	case routingv1alpha1.ClusterConnecting:
		return routingv1alpha1.ReasonClusterConnecting
	case routingv1alpha1.ClusterManagedElsewhere:
		return routingv1alpha1.ReasonManagedByAnotherHub
	}
	return routingv1alpha1.ReasonClusterUnreachable
}

// readClusters records, for each shard with a cluster, its status.shards[].cluster entry and
// whether it is frozen (not Reachable). A shard coming back gets the time it was away added to its
// stepStartTime and progressStartTime: the progress deadline and the bake are not charged for a
// time its health could not be seen; when it is the shard the schema Jobs run with, every other
// shard in progress gets it too (schemaPlaceReturned).
func (p *planner) readClusters() {
	p.frozen = map[string]ClusterView{}
	p.shifted = map[string]time.Duration{}
	returned := map[string]time.Duration{}
	defer func() {
		for shard, away := range returned {
			p.schemaPlaceReturned(shard, away)
		}
	}()
	for _, shard := range p.rsvc.Spec.Shards {
		if shard.Cluster == nil {
			for i := range p.status.Shards {
				if p.status.Shards[i].Name == shard.Name {
					p.status.Shards[i].Cluster = nil
				}
			}
			continue
		}
		view, ok := p.observed.Clusters[shard.Name]
		if !ok {
			view = ClusterView{Name: shard.Cluster.Name, State: routingv1alpha1.ClusterConnecting, Message: "no client for this cluster yet"}
		}
		ss := p.shardStatus(shard.Name)
		old := ss.Cluster
		cs := &routingv1alpha1.ShardClusterStatus{Name: shard.Cluster.Name, State: view.State, Message: view.Message}
		if !view.LastContact.IsZero() {
			cs.LastContactTime = &metav1.Time{Time: view.LastContact.Truncate(time.Second)}
		} else if old != nil {
			cs.LastContactTime = old.LastContactTime
		}
		if view.State != routingv1alpha1.ClusterReachable {
			p.frozen[shard.Name] = view
			cs.UnreachableSince = &metav1.Time{Time: p.now}
			if old != nil && old.UnreachableSince != nil && old.Name == cs.Name {
				cs.UnreachableSince = old.UnreachableSince
			}
		} else if old != nil && old.UnreachableSince != nil {
			away := p.now.Sub(old.UnreachableSince.Time)
			returned[shard.Name] = away
			if away > 0 && (ss.Step == routingv1alpha1.ShardStepProgressing || ss.Step == routingv1alpha1.ShardStepBaking) {
				p.shifted[shard.Name] += away
				if ss.StepStartTime != nil {
					ss.StepStartTime = &metav1.Time{Time: ss.StepStartTime.Add(away)}
				}
				if ss.ProgressStartTime != nil {
					ss.ProgressStartTime = &metav1.Time{Time: ss.ProgressStartTime.Add(away)}
				}
			}
		}
		ss.Cluster = cs
	}
}

// holdsAtCluster is promote's rule for a shard whose cluster is not Reachable: nothing in it is
// counted, rolled or rolled back. Under unreachablePolicy Hold the rollout waits there (true);
// under Skip the shards after it go on (false). Past unreachableDeadlineSeconds Stalled says a
// person is needed; nothing changes in any cluster because of it.
func (p *planner) holdsAtCluster(shard routingv1alpha1.ShardSpec, view ClusterView) bool {
	since := p.awaySince(shard.Name)
	reason := reasonOf(view.State)
	msg := fmt.Sprintf("shard %s: cluster %s is %s since %s (%s); the shard keeps serving what it serves and is neither counted nor changed until it answers",
		shard.Name, view.Name, view.State, since.UTC().Format(time.RFC3339), view.Message)
	deadline := p.rsvc.Spec.Strategy.UnreachableDeadline()
	if !p.now.Before(since.Add(deadline)) {
		p.stall(reason, msg+fmt.Sprintf("; unreachable for longer than unreachableDeadlineSeconds (%.0fs)", deadline.Seconds()))
	} else {
		p.requeueAt(since.Add(deadline))
	}
	if p.rsvc.Spec.Strategy.UnreachablePolicyOrDefault() == routingv1alpha1.UnreachableSkip {
		if p.activityReason == "" {
			p.setActivity(reason, msg+"; unreachablePolicy Skip: the shards after it go on")
		}
		return false
	}
	p.setActivity(reason, msg+"; the rollout holds here")
	return true
}

// dropFrozenActions removes every action on a shard whose cluster is not Reachable: the planner
// may have decided on its last-known (stale) ReplicaSets, and no write may reach it. It runs after
// every stage that plans actions.
func (p *planner) dropFrozenActions() {
	if len(p.frozen) == 0 {
		return
	}
	kept := p.plan.Actions[:0]
	for _, a := range p.plan.Actions {
		shard := ""
		switch {
		case a.ReplicaSet != nil:
			shard = a.ReplicaSet.Labels[LabelShard]
		case a.Job != nil:
			shard = a.Job.Labels[LabelShard]
			if schemaShard, _, held := p.schemaPlaceFrozen(); held && shard == "" && IsSchemaComponent(a.Job.Labels[LabelComponent]) {
				shard = schemaShard // a schema Job goes where runWithShard says: frozen with it
			}
		}
		if _, frozen := p.frozen[shard]; frozen && shard != "" {
			continue
		}
		kept = append(kept, a)
	}
	p.plan.Actions = kept
}

// firstAway is the reason and message of the first shard, in spec order, whose cluster is not
// Reachable ("" when every one is): ClustersReachable says so, and Ready is False for it.
func (p *planner) firstAway() (string, string) {
	for _, shard := range p.rsvc.Spec.Shards {
		if view, frozen := p.frozen[shard.Name]; frozen && shard.Cluster != nil {
			return reasonOf(view.State), fmt.Sprintf("shard %s: cluster %s is %s: %s", shard.Name, view.Name, view.State, view.Message)
		}
	}
	return "", ""
}

// clustersCondition sets ClustersReachable when a shard names a cluster (and removes it when none
// does). Ready is False while a shard's cluster is not Reachable (summarize).
func (p *planner) clustersCondition() {
	named := false
	for _, shard := range p.rsvc.Spec.Shards {
		if shard.Cluster == nil {
			continue
		}
		named = true
		if reason, msg := p.firstAway(); reason != "" {
			p.setCondition(routingv1alpha1.ConditionClustersReachable, metav1.ConditionFalse, reason, msg)
			return
		}
	}
	if !named {
		meta.RemoveStatusCondition(&p.status.Conditions, routingv1alpha1.ConditionClustersReachable)
		return
	}
	msg := "every shard's cluster answers"
	seen := map[string]bool{}
	for _, shard := range p.rsvc.Spec.Shards {
		if view, ok := p.observed.Clusters[shard.Name]; ok && shard.Cluster != nil && view.Note != "" && !seen[view.Name] {
			seen[view.Name] = true
			msg += fmt.Sprintf("; cluster %s: %s", view.Name, view.Note)
		}
	}
	p.setCondition(routingv1alpha1.ConditionClustersReachable, metav1.ConditionTrue, routingv1alpha1.ReasonClustersReachable, msg)
}

// awaySince is when shard's cluster stopped answering, as status.shards[].cluster.unreachableSince
// records it (readClusters keeps it while the cluster stays away), or now when none is recorded.
func (p *planner) awaySince(shard string) time.Time {
	if ss := p.shardStatus(shard); ss.Cluster != nil && ss.Cluster.UnreachableSince != nil {
		return ss.Cluster.UnreachableSince.Time
	}
	return p.now
}
