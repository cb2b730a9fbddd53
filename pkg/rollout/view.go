package rollout

// The view the planner decides from, beyond grouping: which ReplicaSet is the update revision
// (templates compared, not names), a revision renamed by an upgrade, and the stored status made safe
// to read.

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// matchTemplates decides, in each shard, which ReplicaSet is the update revision, comparing pod
// templates rather than trusting names, as the Deployment controller does (S-22): the ReplicaSet
// named for the revision counts only if its template is the one schemagate would create (a hand
// edit, or a hash collision, is reported as TemplateMismatch and never counted); when there is
// none, a ReplicaSet of another name whose template, required schema and recorded range are the
// update revision's is that revision (ReplicaSets named by an older schemagate's hash), so an operator
// upgrade that renames revisions re-rolls nothing.
func (p *planner) matchTemplates() {
	for _, shard := range p.rsvc.Spec.Shards {
		set := p.shards[shard.Name]
		if set == nil {
			if holder := p.taken("ReplicaSet", ReplicaSetName(p.rsvc.Name, shard.Name, p.update)); holder != "" {
				p.conflict(shard.Name, routingv1alpha1.ReasonNameConflict, fmt.Sprintf("ReplicaSet %s/%s", p.rsvc.Namespace, holder))
			}
			continue
		}
		want := NewReplicaSet(p.rsvc, shard, p.update, 0).Spec.Template
		if rs := set.byRev[p.update]; rs != nil {
			ok, diff := TemplateMatches(want, rs.Spec.Template)
			if ok && !schemaversion.Equal(RequiredSchema(rs), p.rsvc.Spec.Schema.Version) {
				// The revision's hash covers its schema version, so its own ReplicaSet records
				// that version; one that records another was not made for it (found by FuzzCompute).
				ok, diff = false, fmt.Sprintf("it records schema %q, the revision requires %q", RequiredSchema(rs), p.rsvc.Spec.Schema.Version)
			}
			if !ok {
				delete(set.byRev, p.update)
				p.untrusted[rs] = true
				p.conflict(shard.Name, routingv1alpha1.ReasonTemplateMismatch, fmt.Sprintf("ReplicaSet %s is labelled revision %s but runs another pod template (%s); it is not counted as the revision: delete it and schemagate creates it again",
					rs.Name, p.update, diff))
			}
			continue
		}
		if holder := p.taken("ReplicaSet", ReplicaSetName(p.rsvc.Name, shard.Name, p.update)); holder != "" {
			p.conflict(shard.Name, routingv1alpha1.ReasonNameConflict, fmt.Sprintf("ReplicaSet %s/%s", p.rsvc.Namespace, holder))
			continue
		}
		for i := len(set.all) - 1; i >= 0; i-- {
			rs := set.all[i]
			if !schemaversion.Equal(RequiredSchema(rs), p.rsvc.Spec.Schema.Version) || !p.recordsUpdateRange(rs) {
				continue
			}
			// The revision label inside the template is the candidate's own.
			if ok, _ := TemplateMatches(NewReplicaSet(p.rsvc, shard, rs.Labels[LabelRevision], 0).Spec.Template, rs.Spec.Template); ok {
				set.byRev[p.update] = rs
				break
			}
		}
	}
}

// conflict records that shard's update-revision ReplicaSet cannot be used, and why.
func (p *planner) conflict(shard, reason, message string) {
	p.mismatch[shard], p.mismatchReason[shard] = message, reason
}

// renameRevision carries the status over when the update revision is the same ReplicaSets under a
// new name (an upgrade of schemagate changed how revisions are named): every shard's ReplicaSet
// for the old name is the one for the new name, so nothing re-rolls and no condition flips.
func (p *planner) renameRevision() {
	old := p.status.UpdateRevision
	if old == "" || old == p.update {
		return
	}
	same := false
	for _, shard := range p.rsvc.Spec.Shards {
		set := p.set(shard.Name)
		a, b := set.byRev[old], set.byRev[p.update]
		if a != b {
			return
		}
		same = same || a != nil
	}
	if !same {
		return
	}
	for i := range p.status.Shards {
		if ss := &p.status.Shards[i]; ss.StepRevision == old {
			ss.StepRevision = p.update
		}
	}
	if p.status.StableRevision == old {
		p.status.StableRevision = p.update
	}
	if f := p.status.Failure; f != nil && f.Revision == old {
		f.Revision = p.update
	}
}

// sanitizeStatus makes the stored status safe to compute from: status is untrusted input (a
// restored backup, a kubectl edit, another version of schemagate), so unknown steps become
// Pending, a step that needs a start time and has none starts again now, and a start time in the
// future is taken as now (S-19). Nothing here can open the gate: the gate reads only Jobs.
func (p *planner) sanitizeStatus() {
	for i := range p.status.Shards {
		ss := &p.status.Shards[i]
		switch ss.Step {
		case routingv1alpha1.ShardStepPending, routingv1alpha1.ShardStepPromoted, routingv1alpha1.ShardStepFailed,
			routingv1alpha1.ShardStepRolledBack:
		case routingv1alpha1.ShardStepProgressing, routingv1alpha1.ShardStepBaking, routingv1alpha1.ShardStepRollingBack:
			if ss.StepStartTime == nil {
				ss.Step = routingv1alpha1.ShardStepPending
			}
		default:
			ss.Step, ss.StepStartTime, ss.ProgressStartTime = routingv1alpha1.ShardStepPending, nil, nil
		}
		if ss.StepStartTime != nil && ss.StepStartTime.Time.After(p.now) {
			ss.StepStartTime = &metav1.Time{Time: p.now}
		}
		if ss.ProgressStartTime != nil && ss.ProgressStartTime.Time.After(p.now) {
			ss.ProgressStartTime = &metav1.Time{Time: p.now}
		}
	}
	if f := p.status.Failure; f != nil && (f.Reason == "" || f.Revision == "" || !recordable(f)) {
		// A failure whose record would not read back (a reason that is no condition reason,
		// bytes that are not UTF-8, an unbounded revision) would be written to every ReplicaSet
		// as a record nothing trusts, and its reason would fail every status write (found by
		// FuzzCompute).
		p.status.Failure = nil
	}
	// Only schemagate's own condition types, once each: they are all set on every reconcile, so
	// no condition is left stamped with another generation (I4; found by FuzzCompute).
	seen := map[string]bool{}
	kept := p.status.Conditions[:0]
	for _, c := range p.status.Conditions {
		switch c.Type {
		case routingv1alpha1.ConditionReady, routingv1alpha1.ConditionReconciling, routingv1alpha1.ConditionStalled,
			routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionAvailable, routingv1alpha1.ConditionContractReady, routingv1alpha1.ConditionRollbackSafe,
			routingv1alpha1.ConditionClustersReachable:
			if !seen[c.Type] {
				seen[c.Type] = true
				kept = append(kept, c)
			}
		}
	}
	p.status.Conditions = kept
}
