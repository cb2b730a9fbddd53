package rollout

// The rules the contract waits on: every shard promoted on a revision that runs on its version, no
// older pod left, the rollback window over, no other schema Job running; and what a contract that
// ran (or runs) means for an expand and a rollback.

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// contractShardsWait is WaitingForShards's reason and message while some shard is not fully
// promoted, baked, to a revision whose range contains version ("" when every shard is).
func (p *planner) contractShardsWait(version string) (string, string) {
	wait := func(format string, args ...any) (string, string) {
		return routingv1alpha1.ReasonWaitingForShards, fmt.Sprintf(format, args...) + fmt.Sprintf("; the contract to schema %s waits", version)
	}
	switch {
	case !p.gateOpen:
		return wait("schema %s is not confirmed yet (the expand comes first)", p.rsvc.Spec.Schema.Version)
	case p.failed():
		return wait("the rollout of revision %s failed at shard %s", p.update, orNone(p.status.Failure.Shard))
	}
	for _, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		set := p.set(shard.Name)
		rs := set.byRev[p.update]
		switch {
		case p.mismatch[shard.Name] != "":
			return wait("shard %s: %s", shard.Name, p.mismatch[shard.Name])
		case ss.StepRevision != p.update || ss.Step != routingv1alpha1.ShardStepPromoted:
			return wait("shard %s is not promoted to revision %s yet (step %s)", shard.Name, p.update, ss.Step)
		case shard.Replicas > 0 && (rs == nil || replicasOf(rs) != shard.Replicas || rs.Status.ObservedGeneration < rs.Generation || rs.Status.AvailableReplicas < shard.Replicas):
			// Pods of other revisions are olderPods' concern.
			return wait("shard %s is promoted but revision %s does not have all %d replicas available", shard.Name, p.update, shard.Replicas)
		case rs != nil && !p.contractRangeOK(rs, version):
			return wait("revision %s (shard %s) runs on schema %s, which does not contain %s", p.update, shard.Name, p.revisionRange(rs), version)
		}
	}
	if p.status.StableRevision != p.update {
		return wait("revision %s is not the stable revision yet", p.update)
	}
	return "", ""
}

// olderPods says which pods of a revision other than the update revision exist, in any shard
// (those no longer in the spec included): a ReplicaSet of another revision that asks for pods or
// still has some, a terminating pod of any ReplicaSet but the update revision's, or (when the
// reconciler counted them) any routing pod not controlled by an update-revision ReplicaSet.
// "" when there are none.
func (p *planner) olderPods() string {
	current := map[types.UID]bool{}
	for _, set := range p.shards {
		if rs := set.byRev[p.update]; rs != nil && !p.untrusted[rs] {
			current[rs.UID] = true
		}
	}
	for _, shard := range sortedShardNames(p.shards) {
		for _, rs := range p.shards[shard].all {
			if current[rs.UID] {
				continue
			}
			if n := max(replicasOf(rs), rs.Status.Replicas, p.observed.TerminatingPods[rs.UID]); n > 0 {
				return fmt.Sprintf("ReplicaSet %s (revision %s, shard %s) still has %d pods (terminating ones included)", rs.Name, rs.Labels[LabelRevision], shard, n)
			}
		}
	}
	for uid, n := range p.observed.TerminatingPods {
		if n > 0 && !current[uid] {
			return fmt.Sprintf("%d routing pods of an older ReplicaSet are still terminating", n)
		}
	}
	for uid, n := range p.observed.RoutingPods {
		if n > 0 && !current[uid] {
			return fmt.Sprintf("%d routing pods not of revision %s still exist", n, p.update)
		}
	}
	return ""
}

// contractEligible is the end of the rollback window: rollbackWindowSeconds after the last shard
// was promoted. When that was is read from every record there is, and the latest wins, so that
// neither a status edited or lost nor an annotation edited by hand ends the window early: each
// shard's Promoted step time (status), the promoted-at annotation on its update-revision
// ReplicaSet, and the stored eligibleTime. With none of them it starts now. A time in the future
// counts as now.
func (p *planner) contractEligible(c *routingv1alpha1.ContractSpec) time.Time {
	window := time.Duration(rollbackWindowSeconds(c)) * time.Second
	var last time.Time
	seen := false
	note := func(t time.Time) {
		if t.After(p.now) {
			t = p.now
		}
		if !seen || t.After(last) {
			last, seen = t, true
		}
	}
	for _, shard := range p.rsvc.Spec.Shards {
		if ss := p.shardStatus(shard.Name); ss.StepStartTime != nil {
			note(ss.StepStartTime.Time)
		}
		if rs := p.set(shard.Name).byRev[p.update]; rs != nil {
			if t, ok := promotedAt(rs); ok {
				note(t)
			}
		}
	}
	if prev := p.rsvc.Status.Schema.Contract; prev != nil && prev.EligibleTime != nil && schemaversion.Equal(prev.Version, c.Version) {
		note(prev.EligibleTime.Time.Add(-window))
	}
	if !seen {
		last = p.now
	}
	return last.Add(window)
}

// promotedAt reads a ReplicaSet's promoted-at annotation (untrusted: false when it does not
// parse).
func promotedAt(rs *appsv1.ReplicaSet) (time.Time, bool) {
	v, ok := rs.Annotations[annotationPromotedAt]
	if !ok || len(v) > 64 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// recordPromotions plans the promoted-at annotation on the update revision's ReplicaSet of each
// shard promoted in this reconcile (its step was not Promoted in the stored status), and of each
// promoted shard whose ReplicaSet has none: once per promotion, nothing in a steady state.
func (p *planner) recordPromotions() {
	if p.rsvc.Spec.Schema.Contract == nil {
		return
	}
	for _, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		rs := p.set(shard.Name).byRev[p.update]
		if rs == nil || p.untrusted[rs] || ss.StepRevision != p.update || ss.Step != routingv1alpha1.ShardStepPromoted {
			continue
		}
		_, has := promotedAt(rs)
		if has && p.wasPromoted(shard.Name) {
			continue
		}
		at := p.now
		if ss.StepStartTime != nil && !has {
			at = ss.StepStartTime.Time
		}
		p.act(Action{Kind: RecordControls, ReplicaSet: rs, Annotations: map[string]string{annotationPromotedAt: at.UTC().Format(time.RFC3339)},
			Note: fmt.Sprintf("shard %s is promoted to revision %s: the rollback window counts from then", shard.Name, p.update)})
	}
}

// wasPromoted reports whether the stored status already had shard promoted to the update revision.
func (p *planner) wasPromoted(shard string) bool {
	for _, ss := range p.rsvc.Status.Shards {
		if ss.Name == shard {
			return ss.StepRevision == p.update && ss.Step == routingv1alpha1.ShardStepPromoted
		}
	}
	return false
}

// schemaJobRunning says which migration, check, shard-check or (another version's) contract Job
// of this RoutingService may still run ("" when none): one that has not finished and is not suspended, or that still has pods; or a
// pod of a migration or contract Job that is gone.
func (p *planner) schemaJobRunning() string {
	if pod := p.strayMigrationPod(); pod != nil {
		return strayText(pod)
	}
	for _, j := range p.observed.Jobs {
		if j == nil || !metav1.IsControlledBy(j, p.rsvc) {
			continue
		}
		switch j.Labels[LabelComponent] {
		case ComponentMigration, ComponentCheck, ComponentShardCheck, ComponentContract:
			// A contract Job here is another version's (an earlier spec's contract still runs).
			if live(j) {
				return fmt.Sprintf("%s Job %s is still running", j.Labels[LabelComponent], j.Name)
			}
		}
	}
	return ""
}

// contractRangeOK reports whether rs's revision runs on version, by revisionRange (ranges.go),
// the one place ranges come from.
func (p *planner) contractRangeOK(rs *appsv1.ReplicaSet, version string) bool {
	return p.revisionRange(rs).Contains(version)
}

// contractFloor is, for rollback safety, the highest version a contract of this RoutingService
// may have brought the database to ("" when none): a contract Job that runs, or that succeeded
// unless its own report says the database stayed below its version. A contract whose report is
// gone counts: the database may be contracted, and believing so only refuses a rollback. The
// rollback gate reads it with the reported version, so a lost report never makes a revision
// whose range ends below a contract look safe again.
func (p *planner) contractFloor() string {
	floor := p.recordedContract()
	for i := range p.contracts {
		oj := &p.contracts[i]
		own := readingOf(p.readings, oj)
		counts := live(oj.job) && !ptr.Deref(oj.job.Spec.Suspend, false)
		if jobCondition(oj.job, batchv1.JobComplete) != nil {
			counts = own == nil || !own.usable() || own.confirms(oj.version) || own.dirty
		}
		if counts && (floor == "" || schemaversion.AtLeast(oj.version, floor)) {
			floor = oj.version
		}
	}
	return floor
}

// contractHoldsExpand says why a migration to required must wait for a contract ("" when it need
// not): a contract Job of this RoutingService still runs (never two migrations at once), or a
// contract Job ended without the database reporting its version and the update revision's range
// does not contain both that version and required. Called before a migration Job is created.
func (p *planner) contractHoldsExpand(required string) string {
	ev := evidence(p.readings)
	for _, j := range p.observed.Jobs {
		if j != nil && metav1.IsControlledBy(j, p.rsvc) && j.Labels[LabelComponent] == ComponentContract && live(j) {
			return fmt.Sprintf("contract Job %s still runs, and a migration never runs beside a contract: the migration to schema %s starts when it has ended", j.Name, required)
		}
	}
	for i := range p.contracts {
		oj := &p.contracts[i]
		own := readingOf(p.readings, oj)
		if jobCondition(oj.job, batchv1.JobComplete) != nil && (own == nil || !own.usable() || own.confirms(oj.version)) {
			// It ran (its report gone since, or said so): nothing is pending.
			continue
		}
		if ev.confirms(oj.version) || p.rangeCovers(required, oj.version) {
			continue
		}
		return fmt.Sprintf("the contract to schema %s is pending (contract Job %s ended without the database reporting it), and revision %s does not run on both %s and %s: the migration to schema %s waits for the contract (retry it, or delete Job %s to give it up)",
			oj.version, oj.job.Name, p.update, required, oj.version, required, oj.job.Name)
	}
	return ""
}

// rangeCovers reports whether the update revision's declared range contains both versions.
func (p *planner) rangeCovers(a, b string) bool {
	lo, hi := p.rsvc.Spec.Schema.Version, ""
	if c := p.rsvc.Spec.Schema.Compatibility; c != nil {
		if c.Min != "" {
			lo = c.Min
		}
		hi = c.Max
	}
	in := func(v string) bool {
		return schemaversion.Valid(lo) && schemaversion.AtLeast(v, lo) && (hi == "" || (schemaversion.Valid(hi) && schemaversion.AtLeast(hi, v)))
	}
	return in(a) && in(b)
}
