package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// IsSchemaComponent reports whether a Job (or pod) of this component is a schema Job: migration,
// check, contract or migration probe, the Jobs spec.schema.runWithShard places.
func IsSchemaComponent(c string) bool {
	return c == ComponentMigration || c == ComponentCheck || c == ComponentContract || c == ComponentProbe
}

// schemaPlaceFrozen reports whether the schema Jobs run in a cluster that does not answer:
// spec.schema.runWithShard names a shard with a cluster, and that shard is frozen (readClusters).
// Its migration, check and contract Jobs cannot be seen then, and an unseen Job is not a missing
// one: nothing may be decided from their absence.
func (p *planner) schemaPlaceFrozen() (string, ClusterView, bool) {
	shard := p.rsvc.Spec.Schema.RunWithShard
	if shard == "" {
		return "", ClusterView{}, false
	}
	view, frozen := p.frozen[shard]
	return shard, view, frozen
}

// holdSchemaPlace is the schema gate while the schema Jobs' cluster does not answer: no Job is
// created, suspended or deleted, the gate stays closed (mayRun reads only the evidence, and none
// is read), and the conditions stay as they were, as for lost evidence (hold): a SchemaReady that
// was True for a version at or above the required one stays True, so a steady RoutingService
// does not flip for it; otherwise it is False with the cluster's reason. Ready and Reconciling say why, and past
// unreachableDeadlineSeconds Stalled does. Nothing already serving changes because of it.
func (p *planner) holdSchemaPlace(shard string, view ClusterView) {
	reason := reasonOf(view.State)
	msg := fmt.Sprintf("the schema Jobs run with shard %s, in cluster %s, which is %s (%s): no migration, check or contract starts and no revision is scaled up until it answers",
		shard, view.Name, view.State, view.Message)
	confirmed := p.status.Schema.ConfirmedVersion
	if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old != nil && old.Status == metav1.ConditionTrue &&
		schemaversion.AtLeast(confirmed, p.rsvc.Spec.Schema.Version) {
		// Status is untrusted, but this opens nothing: the gate reads only evidence (mayRun).
		p.keepConfirmedRecord()
		p.holding = true
		p.decideSchema(metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed,
			fmt.Sprintf("schema %s was confirmed when last read; %s", confirmed, msg))
	} else {
		p.decideSchema(metav1.ConditionFalse, reason, msg)
	}
	if c := p.oldCondition(routingv1alpha1.ConditionContractReady); c != nil && p.rsvc.Spec.Schema.Contract != nil {
		p.decideContract(metav1.ConditionUnknown, reason, msg)
	}
	since := p.awaySince(shard)
	deadline := p.rsvc.Spec.Strategy.UnreachableDeadline()
	if !p.now.Before(since.Add(deadline)) {
		p.stall(reason, msg+fmt.Sprintf("; unreachable since %s, longer than unreachableDeadlineSeconds (%.0fs)", since.UTC().Format(time.RFC3339), deadline.Seconds()))
		return
	}
	p.requeueAt(since.Add(deadline))
	p.setActivity(reason, msg)
}

// schemaPlaceReturned adds the time the schema Jobs' cluster was away to the step of every other
// shard in progress (Progressing, Baking): the rollout held for it, so neither the progress
// deadline nor the bake is charged for it. The schema shard's own step is shifted by
// readClusters. away is how long it was away.
func (p *planner) schemaPlaceReturned(shard string, away time.Duration) {
	if away <= 0 || p.rsvc.Spec.Schema.RunWithShard != shard {
		return
	}
	for i := range p.status.Shards {
		ss := &p.status.Shards[i]
		if ss.Name == shard || (ss.Step != routingv1alpha1.ShardStepProgressing && ss.Step != routingv1alpha1.ShardStepBaking) {
			continue
		}
		if _, frozen := p.frozen[ss.Name]; frozen {
			continue // its own return shifts it
		}
		if p.shifted != nil {
			p.shifted[ss.Name] += away
		}
		if ss.StepStartTime != nil {
			ss.StepStartTime = &metav1.Time{Time: ss.StepStartTime.Add(away)}
		}
		if ss.ProgressStartTime != nil {
			ss.ProgressStartTime = &metav1.Time{Time: ss.ProgressStartTime.Add(away)}
		}
	}
}
