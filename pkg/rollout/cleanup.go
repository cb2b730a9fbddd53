package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/retention"
)

// cleanup deletes, in each shard, the scaled-down ReplicaSets of old revisions beyond
// strategy.revisionHistoryLimit, oldest first. The update and stable revisions' ReplicaSets, and
// the ones a rollback would return the shard to (the last served, and the last served before the
// update revision), are always kept (S-17). ReplicaSets of a shard removed from spec.shards are scaled to 0 and then deleted,
// but only once the update revision is promoted everywhere else, so removing a region never
// overlaps with a rollout. Finished Jobs beyond strategy.jobHistoryLimit are pruned too
// (pruneJobs, jobs_history.go).
func (p *planner) cleanup() {
	if _, _, held := p.schemaPlaceFrozen(); !held {
		// Held, the schema Jobs that matter cannot all be seen: none is pruned.
		p.pruneJobs()
	}
	limit := int(p.rsvc.Spec.Strategy.RevisionHistoryLimitOrDefault())
	inSpec := map[string]bool{}
	for _, shard := range p.rsvc.Spec.Shards {
		inSpec[shard.Name] = true
		var idle []int
		set := p.set(shard.Name)
		keep := map[*appsv1.ReplicaSet]bool{set.byRev[p.update]: true, set.byRev[p.status.StableRevision]: true,
			p.lastServed(shard.Name, nil): true, p.lastServed(shard.Name, set.byRev[p.update]): true}
		for i, rs := range set.all {
			if rs == set.byRev[p.update] || rs.Labels[LabelRevision] == p.update || p.untrusted[rs] {
				continue
			}
			if replicasOf(rs) == 0 && rs.Status.Replicas == 0 {
				idle = append(idle, i)
			}
		}
		// The kept ones count towards the limit; the oldest of the others go.
		items := make([]retention.Item, len(idle))
		for k, i := range idle {
			items[k] = retention.Item{Keep: keep[set.all[i]]}
		}
		for _, k := range retention.Prune(items, limit, p.now).Delete {
			p.act(Action{Kind: DeleteReplicaSet, ReplicaSet: set.all[idle[k]],
				Note: fmt.Sprintf("revisionHistoryLimit %d: shard %s keeps the newest %d scaled-down revisions", limit, shard.Name, limit)})
		}
	}
	if !p.rolloutComplete() {
		return
	}
	for name, set := range p.shards {
		if inSpec[name] {
			continue
		}
		for _, rs := range set.all {
			switch {
			case replicasOf(rs) != 0:
				p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: rs, Replicas: 0, Note: fmt.Sprintf("shard %s is no longer in spec.shards", name)})
			case rs.Status.Replicas == 0:
				p.act(Action{Kind: DeleteReplicaSet, ReplicaSet: rs, Note: fmt.Sprintf("shard %s is no longer in spec.shards", name)})
			}
		}
	}
}

// rolloutComplete reports whether the update revision is promoted in every shard of the spec
// with its schema confirmed and nothing failed.
func (p *planner) rolloutComplete() bool {
	if !(p.gateOpen || p.holding || p.binaryFirst) || p.failed() || len(p.mismatch) > 0 {
		return false
	}
	for _, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		if ss.StepRevision != p.update || ss.Step != routingv1alpha1.ShardStepPromoted {
			return false
		}
	}
	return true
}
