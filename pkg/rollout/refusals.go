package rollout

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Refusal is a write the API server refused: it answered 400 Bad Request, 403 Forbidden (RBAC, an
// admission policy, a ResourceQuota), 413 or 422 Invalid (a pod template field the CRD cannot
// check). The reconciler reports one in Observed.Refusals and computes the plan again, so that the
// refusal is in status (Stalled=True, reason WriteRefused) instead of only in the manager's log.
// Retryable answers (409, 429, 5xx, timeouts) are never refusals.
type Refusal struct {
	// Verb is what was refused: "create", "patch" or "delete".
	Verb string
	// Kind is the object's kind: "ReplicaSet", "Job", "ControllerRevision" or
	// "PodDisruptionBudget".
	Kind string
	// Name is the object's name, in the RoutingService's namespace.
	Name string
	// Shard is the shard whose PodDisruptionBudget could not be created (Kind PodDisruptionBudget,
	// Verb create): that shard then has no budget, and no rolling step starts or continues there
	// until it has one. A rollback or a replica change in it goes on.
	Shard string
	// Message is the server's message, untrusted and unbounded: the planner keeps at most
	// maxRefusalMessage bytes of it, as valid UTF-8.
	Message string
}

// maxRefusalMessage bounds, in bytes, the server's message quoted in a condition or an Event: an
// Invalid answer lists every cause and can run to kilobytes, while an Event's note holds 1 KiB.
const maxRefusalMessage = 512

// describe is the refusal as condition and Event text.
func (r Refusal) describe() string {
	return fmt.Sprintf("the API server refused to %s %s %s: %s", r.Verb, r.Kind, r.Name, boundText(r.Message, maxRefusalMessage))
}

// boundText returns s as valid UTF-8 (invalid bytes become U+FFFD), cut to at most limit bytes on
// a rune boundary, with "…" when cut.
func boundText(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	cut := limit - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// refused reports whether the API server refused verb on kind name in this reconcile.
func (p *planner) refused(verb, kind, name string) bool {
	for _, r := range p.observed.Refusals {
		if r.Verb == verb && r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// holdRefusedBudgets stops the rolling steps of every shard whose PodDisruptionBudget the API
// server refused to create: a shard's budget exists before its pods change. Like a name conflict,
// this stalls the promotion at that shard; a rollback and a replica change, which bring back or
// keep what serves, are not held back.
func (p *planner) holdRefusedBudgets() {
	for _, r := range p.observed.Refusals {
		if r.Kind != "PodDisruptionBudget" || r.Verb != "create" || r.Shard == "" || p.mismatch[r.Shard] != "" {
			continue
		}
		p.conflict(r.Shard, routingv1alpha1.ReasonWriteRefused,
			fmt.Sprintf("%s; the shard's rolling steps wait until its budget exists (a rollback or a replica change does not)", r.describe()))
	}
}

// reportRefusals makes every refused write visible: with nothing else stalling the rollout,
// Stalled=True with reason WriteRefused and the server's message; otherwise the refusal is added to
// the stall message. A Warning Event is recorded when the stored condition did not already say so.
// Nothing else changes: deadlines computed in this reconcile stand, and the plan that was refused
// is tried again on the next one.
func (p *planner) reportRefusals() {
	var msgs []string
	for _, r := range p.observed.Refusals {
		if r.Kind == "PodDisruptionBudget" && r.Verb == "create" && p.mismatchReason[r.Shard] == routingv1alpha1.ReasonWriteRefused && p.stallReason == routingv1alpha1.ReasonWriteRefused {
			continue // already the stall message
		}
		msgs = append(msgs, r.describe())
	}
	if len(msgs) == 0 {
		return
	}
	msg := strings.Join(msgs, "; ")
	switch p.stallReason {
	case "":
		p.stall(routingv1alpha1.ReasonWriteRefused, msg+"; it is tried again on every reconcile")
	default:
		p.stall(p.stallReason, p.stallMessage+"; "+msg)
	}
	if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Status != "True" || !strings.Contains(old.Message, msg) {
		p.event(true, routingv1alpha1.ReasonWriteRefused, "%s", msg)
	}
	p.requeueAt(p.now.Add(refusalRecheck))
}

// refusalRecheck is how soon a refused write is tried again when no watch event comes first: a
// ResourceQuota raised or an admission policy removed sends none to schemagate.
const refusalRecheck = 15 * time.Second
