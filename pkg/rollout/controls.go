package rollout

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/controls"
)

// Handled controls are recorded in the cluster, not only in status. A control annotation
// (schemagate.io/abort, retry, promote) is never cleared, so the value that was acted on must be
// known for the life of the RoutingService: status alone is not enough, since a restore that skips
// status, or a `kubectl get -o yaml` re-applied after a delete with --cascade=orphan, brings the old
// annotation back with no status, and the old value would act again (an old abort rolling back a
// healthy rollout). So every ReplicaSet the RoutingService controls carries the values handled
// last, in the annotations below; a ReplicaSet it creates carries them from the start. These are
// the objects the controls act on, they survive both a status-less restore and an orphan delete
// (they are adopted again), and no GitOps tool applies them, so nobody fights over the field.
//
// A value is handled when status says so (status.lastHandledAbort, lastHandledRetry,
// lastHandledPromote) or any of the RoutingService's ReplicaSets records it: pkg/controls decides
// that (controls.Read) and keeps the records bounded (controls.Keep).
const (
	annotationHandledAbort   = "schemagate.io/handled-abort"
	annotationHandledRetry   = "schemagate.io/handled-retry"
	annotationHandledPromote = "schemagate.io/handled-promote"
)

// control is one control annotation and where its handled value lives.
type control struct {
	annotation, record string
	handled            *string
	// ignored is the Event reason that says a value of it did nothing.
	ignored string
}

func (p *planner) controls() []control {
	return []control{
		{routingv1alpha1.AnnotationAbort, annotationHandledAbort, &p.status.LastHandledAbort, EventAbortIgnored},
		{routingv1alpha1.AnnotationRetry, annotationHandledRetry, &p.status.LastHandledRetry, EventRetryIgnored},
		{routingv1alpha1.AnnotationPromote, annotationHandledPromote, &p.status.LastHandledPromote, EventPromoteIgnored},
		// Recorded on the ReplicaSets only (no status field); contract.go reports it.
		{routingv1alpha1.AnnotationApproveContract, annotationHandledApproveContract, &p.approveHandled, ""},
	}
}

// recordedReplicaSets are the ReplicaSets whose records count and that get them: those this
// RoutingService controls (or adopts now), never one whose template does not match its revision.
// Sorted by shard name, then oldest first, so the order of records is the same on every reconcile.
func (p *planner) recordedReplicaSets() []*appsv1.ReplicaSet {
	names := make([]string, 0, len(p.shards))
	for name := range p.shards {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*appsv1.ReplicaSet
	for _, name := range names {
		for _, rs := range p.shards[name].all {
			if !p.untrusted[rs] {
				out = append(out, rs)
			}
		}
	}
	return out
}

// recoverControls reads the handled values recorded on the ReplicaSets. A control annotation whose
// value is recorded there is handled, whatever status says: status was lost or restored from an
// older copy, and the value is not acted on again. Called before any control is read.
func (p *planner) recoverControls() {
	p.handledRecords = map[string][]string{}
	rss := p.recordedReplicaSets()
	for _, c := range p.controls() {
		records := make([]string, len(rss))
		for i, rs := range rss {
			records[i] = rs.Annotations[c.record]
		}
		hist := controls.Merge(records...)
		p.handledRecords[c.record] = hist
		token := p.rsvc.Annotations[c.annotation]
		if controls.Read(token, *c.handled, hist) != controls.Recorded {
			continue
		}
		*c.handled = token
		if c.ignored != "" {
			p.event(false, c.ignored, "%s=%q was acted on before (status does not say so, its ReplicaSets do); it does not act again", c.annotation, token)
		}
	}
}

// recordControls plans the writes that keep every ReplicaSet's records up to date with the values
// handled now, and stamps the ReplicaSets this plan creates. It writes nothing in a steady state,
// nor when no control was ever used.
func (p *planner) recordControls() {
	want := map[string]string{}
	for _, c := range p.controls() {
		if keep := controls.Keep(p.handledRecords[c.record], *c.handled); keep != "" {
			want[c.record] = keep
		}
	}
	fail, failWrite := p.failureWant()
	if done := p.contractDone(); done != "" {
		// Not a control, but kept the same way: contracted.go.
		want[annotationContracted] = done
	}
	if len(want) == 0 && !failWrite {
		return
	}
	deleted := map[*appsv1.ReplicaSet]bool{}
	for _, a := range p.plan.Actions {
		if a.Kind == DeleteReplicaSet {
			deleted[a.ReplicaSet] = true
		}
	}
	for _, rs := range p.recordedReplicaSets() {
		if deleted[rs] {
			continue // a patch of a ReplicaSet this plan deletes would fail, and stop the apply
		}
		diff := map[string]string{}
		for k, v := range want {
			if old, has := rs.Annotations[k]; old != v && (has || v != "") {
				diff[k] = v
			}
		}
		if failWrite {
			// The failure goes on the update revision's ReplicaSets only, the ones its rollback
			// acts on; a shard the revision never reached is not written (S-17). A record left
			// on another is cleared.
			v := ""
			if rs.Labels[LabelRevision] == p.update {
				v = fail
			}
			if old, has := rs.Annotations[annotationFailure]; old != v && (has || v != "") {
				diff[annotationFailure] = v
			}
		}
		if len(diff) > 0 {
			p.act(Action{Kind: RecordControls, ReplicaSet: rs, Annotations: diff,
				Note: fmt.Sprintf("keep %s in the cluster on shard %s's revision %s", strings.Join(sortedKeys(diff), ", "), rs.Labels[LabelShard], rs.Labels[LabelRevision])})
		}
	}
	stamp := map[string]string{}
	for k, v := range want {
		if v != "" {
			stamp[k] = v
		}
	}
	if fail != "" {
		stamp[annotationFailure] = fail
	}
	for _, a := range p.plan.Actions {
		if a.Kind == CreateReplicaSet {
			SetAnnotations(a.ReplicaSet, stamp)
		}
	}
}

// SetAnnotations sets annotations on rs (the records of RecordControls).
func SetAnnotations(rs *appsv1.ReplicaSet, annotations map[string]string) {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		rs.Annotations[k] = v
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
