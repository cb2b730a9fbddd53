package rollout

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// summarize computes the rest of the status in one place: the schema lifecycle's part (phase,
// revision ranges, RollbackSafe, DatabaseAhead: lifecycle.go), per-shard counts, the
// promoted-shards summary, the stable revision, and the Ready, Reconciling, Stalled and Available
// conditions (SchemaReady is set by the gate). Every condition is set on every reconcile, stamped with the
// generation it describes (I4, scenario S-12); unchanged conditions keep their transition time,
// so a reconcile that changes nothing produces an identical status and writes nothing.
func (p *planner) summarize() {
	p.lifecycle()
	shards := make([]routingv1alpha1.ShardStatus, 0, len(p.rsvc.Spec.Shards))
	promoted := 0
	var short []string
	for _, shard := range p.rsvc.Spec.Shards {
		ss := *p.shardStatus(shard.Name)
		ss.Replicas = shard.Replicas
		ss.Scaling = p.scaling[shard.Name]
		_, frozen := p.frozen[shard.Name]
		if !frozen {
			// A frozen shard's counts and revision stay as last seen: its cluster gave no fresh
			// list of ReplicaSets (an unreachable cluster is not an empty one).
			ss.Updated, ss.Ready, ss.Available, ss.Revision = 0, 0, 0, ""
		}
		best := int32(0)
		for _, rs := range p.set(shard.Name).all {
			if frozen {
				break
			}
			rev := rs.Labels[LabelRevision]
			ss.Ready += rs.Status.ReadyReplicas
			ss.Available += rs.Status.AvailableReplicas
			if rev == p.update {
				ss.Updated = rs.Status.Replicas
			}
			if a := rs.Status.AvailableReplicas; a > best || (a == best && a > 0 && rev == p.update) {
				best, ss.Revision = a, rev
			}
		}
		if ss.Step == routingv1alpha1.ShardStepPromoted && ss.StepRevision == p.update {
			promoted++
		}
		if min := p.availabilityFloor(shard); ss.Available < min {
			short = append(short, fmt.Sprintf("%s (%d/%d available, at least %d needed)", shard.Name, ss.Available, shard.Replicas, min))
		}
		shards = append(shards, ss)
	}
	p.status.Shards = shards
	p.status.PromotedShards = fmt.Sprintf("%d/%d", promoted, len(shards))

	complete := p.rolloutComplete()

	if len(short) == 0 {
		p.setCondition(routingv1alpha1.ConditionAvailable, metav1.ConditionTrue, routingv1alpha1.ReasonMinimumReplicasAvailable,
			"every shard has at least replicas - maxUnavailable available pods")
	} else {
		p.setCondition(routingv1alpha1.ConditionAvailable, metav1.ConditionFalse, routingv1alpha1.ReasonMinimumReplicasUnavailable,
			"shards below their minimum: "+strings.Join(short, ", "))
	}

	switch {
	case p.stallReason != "":
		p.setCondition(routingv1alpha1.ConditionStalled, metav1.ConditionTrue, p.stallReason, p.stallMessage)
		p.setCondition(routingv1alpha1.ConditionReconciling, metav1.ConditionFalse, p.stallReason, "stalled: "+p.stallMessage)
		p.setCondition(routingv1alpha1.ConditionReady, metav1.ConditionFalse, p.stallReason, p.stallMessage)
	case complete:
		msg := fmt.Sprintf("revision %s is promoted in all %d shards", p.update, len(shards))
		p.setCondition(routingv1alpha1.ConditionStalled, metav1.ConditionFalse, routingv1alpha1.ReasonRolloutComplete, msg)
		p.setCondition(routingv1alpha1.ConditionReconciling, metav1.ConditionFalse, routingv1alpha1.ReasonRolloutComplete, msg)
		if away, why := p.firstAway(); away != "" && len(short) == 0 {
			// Complete as last seen, but a cluster does not answer: what it serves now is not known.
			p.setCondition(routingv1alpha1.ConditionReady, metav1.ConditionFalse, away, why)
		} else if len(short) == 0 {
			p.setCondition(routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete, msg)
		} else {
			p.setCondition(routingv1alpha1.ConditionReady, metav1.ConditionFalse, routingv1alpha1.ReasonMinimumReplicasUnavailable, p.conditionMessage(routingv1alpha1.ConditionAvailable))
		}
	default:
		reason, msg := p.activityReason, p.activityMessage
		if reason == "" {
			reason, msg = routingv1alpha1.ReasonShardProgressing, fmt.Sprintf("promoting revision %s", p.update)
		}
		p.setCondition(routingv1alpha1.ConditionStalled, metav1.ConditionFalse, reason, msg)
		p.setCondition(routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		p.setCondition(routingv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	}
}

// markStable makes the update revision the stable one (the last-known-good that rollbacks return
// to) once it is promoted in every shard.
//
// RolloutComplete is recorded when the update revision becomes stable, and also when a rollout of
// the stable revision itself completes (a revert after a failure or an abort: its last shard was
// promoted in this reconcile), so tools that count Events or the outcome metric see it end.
func (p *planner) markStable() {
	if !p.rolloutComplete() || (p.status.StableRevision == p.update && !p.promotedNow) {
		return
	}
	p.event(false, EventRolloutComplete, "revision %s is promoted in every shard and is now the stable revision", p.update)
	p.status.StableRevision = p.update
}

func (p *planner) setCondition(conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&p.status.Conditions, metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: p.rsvc.Generation,
		LastTransitionTime: metav1.Time{Time: p.now},
	})
}

// oldCondition is the condition as stored before this reconcile.
func (p *planner) oldCondition(conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(p.rsvc.Status.Conditions, conditionType)
}

func (p *planner) conditionMessage(conditionType string) string {
	if c := meta.FindStatusCondition(p.status.Conditions, conditionType); c != nil {
		return c.Message
	}
	return ""
}
