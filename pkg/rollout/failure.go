package rollout

import (
	"fmt"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// handleFailure applies strategy.failurePolicy to a failed update revision.
//
// Halt touches nothing: every shard stays as it is, Stalled=True.
//
// Rollback returns every shard that runs anything but the stable revision to the stable revision,
// all such shards at once (going back to the last-known-good is not a promotion): the stable
// ReplicaSet is scaled up to the shard's replicas first (surge up to replicas), and the other
// ReplicaSets are scaled down only as far as availability allows (Step), so a shard's last
// available pods are never removed (I2, scenario S-08). A shard with no stable ReplicaSet (a shard
// new in this spec, or a first rollout with no stable revision) is left as it is.
func (p *planner) handleFailure() {
	stable := p.status.StableRevision
	f := p.status.Failure
	msg := f.Message
	policy := p.rsvc.Spec.Strategy.FailurePolicy
	if f.Reason == routingv1alpha1.ReasonAborted {
		policy = routingv1alpha1.FailurePolicyRollback
	}
	if policy == routingv1alpha1.FailurePolicyHalt || stable == "" || stable == p.update {
		why := "failurePolicy is Halt"
		if policy != routingv1alpha1.FailurePolicyHalt {
			why = "there is no stable revision to roll back to"
		}
		p.stall(f.Reason, fmt.Sprintf("%s; %s: nothing more is changed until the spec changes", msg, why))
		return
	}

	rollingBack := false
	for _, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		set := p.set(shard.Name)
		failedHere := ss.Name == f.Shard
		if set.byRev[stable] == nil || set.complete(stable, shard.Replicas) {
			if ss.Step == routingv1alpha1.ShardStepRollingBack {
				p.stepTo(ss, routingv1alpha1.ShardStepRolledBack)
				p.event(false, EventShardRolledBack, "shard %s is back on stable revision %s", shard.Name, stable)
			}
			continue
		}
		rollingBack = true
		if !failedHere && ss.Step != routingv1alpha1.ShardStepRollingBack {
			ss.StepRevision = p.update
			p.stepTo(ss, routingv1alpha1.ShardStepRollingBack)
			p.event(true, EventRollingBack, "shard %s is rolling back to stable revision %s", shard.Name, stable)
		}
		b := p.budget(shard)
		b.Surge = max(b.Surge, shard.Replicas)
		p.rollTowards(shard, stable, b, "rollback")
	}
	if rollingBack {
		p.stall(f.Reason, fmt.Sprintf("%s; rolling back to stable revision %s", msg, stable))
		return
	}
	p.stall(f.Reason, fmt.Sprintf("%s; rolled back: stable revision %s serves every shard it served", msg, stable))
}
