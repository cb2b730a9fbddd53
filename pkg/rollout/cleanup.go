package rollout

import (
	"fmt"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// cleanup deletes, in each shard, the scaled-down ReplicaSets of old revisions beyond
// strategy.revisionHistoryLimit, oldest first. The update and stable revisions' ReplicaSets are
// always kept. ReplicaSets of a shard removed from spec.shards are scaled to 0 and then deleted,
// but only once the update revision is promoted everywhere else, so removing a region never
// overlaps with a rollout.
func (p *planner) cleanup() {
	limit := int(p.rsvc.Spec.Strategy.RevisionHistoryLimitOrDefault())
	inSpec := map[string]bool{}
	for _, shard := range p.rsvc.Spec.Shards {
		inSpec[shard.Name] = true
		var idle []int
		set := p.set(shard.Name)
		for i, rs := range set.all {
			rev := rs.Labels[LabelRevision]
			if rev == p.update || rev == p.status.StableRevision {
				continue
			}
			if replicasOf(rs) == 0 && rs.Status.Replicas == 0 {
				idle = append(idle, i)
			}
		}
		for _, i := range idle[:max(0, len(idle)-limit)] {
			p.act(Action{Kind: DeleteReplicaSet, ReplicaSet: set.all[i],
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
	if !p.gateOpen || p.failed() || len(p.mismatch) > 0 {
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
