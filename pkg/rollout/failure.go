package rollout

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// handleFailure applies strategy.failurePolicy to a failed update revision.
//
// Halt touches nothing: every shard stays as it is, Stalled=True.
//
// Rollback changes only the shards the failed revision touched (its ReplicaSet there asks for or
// still has pods), each back to the ReplicaSet that last served that shard alone and fully
// (lastServed: the schemagate.io/served-order annotation, kept in the cluster, so a lost status write
// changes nothing of the outcome). Shards the failed revision never reached keep what they serve
// (scenario S-17): with v2 promoted in us-east and eu-west and baking in ap-south, a v3 that fails
// in us-east returns us-east to v2 and changes nothing else. All touched shards roll back at once
// (going back to what served is not a promotion): the returning ReplicaSet is scaled up to the
// shard's replicas first, and the failed one is scaled down only as far as availability allows
// (Step), so a shard's last available pods are never removed (I2, scenario S-08). A touched shard
// that nothing served before (a first rollout, a shard new in this spec) is left as it is.
func (p *planner) handleFailure() {
	f := p.status.Failure
	msg := f.Message
	policy := p.rsvc.Spec.Strategy.FailurePolicyOrDefault()
	if f.Reason == routingv1alpha1.ReasonAborted {
		policy = routingv1alpha1.FailurePolicyRollback
	}
	if policy == routingv1alpha1.FailurePolicyHalt {
		p.stall(f.Reason, fmt.Sprintf("%s; failurePolicy is Halt: nothing more is changed until the spec changes (annotate %s to roll back the shards it touched, or %s to try again from shard %s)",
			msg, routingv1alpha1.AnnotationAbort, routingv1alpha1.AnnotationRetry, orNone(f.Shard)))
		return
	}

	var rolling, back, stuck, refused []string
	db := p.databaseVersion()
	for _, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		set := p.set(shard.Name)
		failed := set.byRev[p.update]
		touched := failed != nil && (replicasOf(failed) > 0 || failed.Status.Replicas > 0)
		if !touched && ss.Step != routingv1alpha1.ShardStepRollingBack {
			// Never touched, or rolled back already.
			if ss.Step == routingv1alpha1.ShardStepRolledBack {
				back = append(back, shard.Name)
			}
			continue
		}
		target := p.lastServed(shard.Name, failed)
		if target != nil && !p.revisionRange(target).Contains(db) {
			// The revision that served it last cannot run on the database as it is now: the shard
			// holds on the revision that works (rolling forward still works).
			refused = append(refused, fmt.Sprintf("shard %s to revision %s (runs on %s)", shard.Name, revisionOf(target), p.revisionRange(target)))
			continue
		}
		if next := p.database().Outside(p.revisionRange(target)); target != nil && len(next) > 0 {
			// Nor on the schema a live migration or contract may bring it to any moment
			// (nextschema.go).
			refused = append(refused, fmt.Sprintf("shard %s to revision %s (runs on %s; %s)", shard.Name, revisionOf(target), p.revisionRange(target), next[0]))
			continue
		}
		if target == nil || !p.mayRun(target) {
			stuck = append(stuck, shard.Name)
			continue
		}
		if set.completeRS(target, shard.Replicas) {
			// Back when the returning ReplicaSet alone serves the shard again: a revision that was
			// superseded mid-step there is scaled away too, not left beside it.
			if ss.Step == routingv1alpha1.ShardStepRollingBack {
				p.stepTo(ss, routingv1alpha1.ShardStepRolledBack)
				p.event(false, EventShardRolledBack, "shard %s is back on revision %s", shard.Name, revisionOf(target))
				p.plan.Events[len(p.plan.Events)-1].Shard = shard.Name
			}
			back = append(back, shard.Name)
			continue
		}
		rolling = append(rolling, shard.Name)
		if ss.Step != routingv1alpha1.ShardStepRollingBack {
			ss.StepRevision = p.update
			p.stepTo(ss, routingv1alpha1.ShardStepRollingBack)
			p.event(true, EventRollingBack, "shard %s is rolling back from revision %s to revision %s, which served it last", shard.Name, p.update, revisionOf(target))
		}
		b := p.budget(shard)
		b.Surge = max(b.Surge, shard.Replicas)
		p.rollTowardsRS(shard, target, b, "rollback", false)
	}
	switch {
	case len(refused) > 0:
		p.stall(routingv1alpha1.ReasonRollbackRefused, fmt.Sprintf("%s; the rollback of %s is refused: the database reports schema %s, outside that revision's range, so the shard holds on revision %s, which runs on it (roll forward with a fixed spec)",
			msg, strings.Join(refused, ", "), orNone(db), p.update))
	case len(rolling) > 0:
		p.stall(f.Reason, fmt.Sprintf("%s; rolling back %s to the revisions that served them last", msg, shardList(rolling)))
	case len(stuck) > 0:
		p.stall(f.Reason, fmt.Sprintf("%s; %s: no earlier revision to roll back to, left as it is until the spec changes", msg, shardList(stuck)))
	case len(back) > 0:
		p.stall(f.Reason, fmt.Sprintf("%s; rolled back: %s back on the revision that served it last, and no other shard was changed", msg, shardList(back)))
	default:
		p.stall(f.Reason, fmt.Sprintf("%s; no shard runs revision %s, nothing was changed", msg, p.update))
	}
}

// shardList names shards for a message: "shard us-east", "shards us-east, eu-west".
func shardList(names []string) string {
	if len(names) == 1 {
		return "shard " + names[0]
	}
	return "shards " + strings.Join(names, ", ")
}

func revisionOf(rs *appsv1.ReplicaSet) string {
	if rs == nil {
		return "none"
	}
	return rs.Labels[LabelRevision]
}
