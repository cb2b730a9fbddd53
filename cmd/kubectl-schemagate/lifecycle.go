package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// LifecycleView is the schema lifecycle (expand, roll out, rollback window, contract) as the
// status reports it: nil for a RoutingService whose status says nothing of it.
type LifecycleView struct {
	// Phase is status.schema.phase; PhaseSince when it began, PhaseAge how long ago.
	Phase      string     `json:"phase,omitempty"`
	PhaseSince *time.Time `json:"phaseSince,omitempty"`
	PhaseAge   string     `json:"phaseAge,omitempty"`
	// Reported is the version the database last reported (status.schema.reportedVersion).
	Reported string `json:"reported,omitempty"`
	// Revisions are status.schema.revisions: the revisions that serve a shard or that a rollback
	// would return to, newest first, each with its range.
	Revisions []RevisionRangeView `json:"revisions,omitempty"`
	Contract  *ContractView       `json:"contract,omitempty"`
	// RollbackSafe is the RollbackSafe condition of the current generation: its status, reason
	// and message.
	RollbackSafe        string `json:"rollbackSafe,omitempty"`
	RollbackSafeReason  string `json:"rollbackSafeReason,omitempty"`
	RollbackSafeMessage string `json:"rollbackSafeMessage,omitempty"`
	// DatabaseAhead is the message of a condition of the current generation with reason
	// DatabaseAhead: the database is at a version a serving revision does not run on.
	DatabaseAhead string `json:"databaseAhead,omitempty"`
}

// RevisionRangeView is one revision's schema range.
type RevisionRangeView struct {
	Revision string `json:"revision"`
	Min      string `json:"min,omitempty"`
	Max      string `json:"max,omitempty"`
	// Assumed: the revision declares no range; it is assumed to run on min and every newer schema.
	Assumed bool     `json:"assumed,omitempty"`
	Shards  []string `json:"shards,omitempty"`
	// Excludes: the database's reported version is outside this range.
	Excludes bool `json:"excludesReported,omitempty"`
}

// ContractView is the contract migration.
type ContractView struct {
	Version        string     `json:"version"`
	Job            string     `json:"job,omitempty"`
	Attempt        int32      `json:"attempt,omitempty"`
	EligibleTime   *time.Time `json:"eligibleTime,omitempty"`
	StartTime      *time.Time `json:"startTime,omitempty"`
	CompletionTime *time.Time `json:"completionTime,omitempty"`
	// Ready is the ContractReady condition of the current generation ("False RollbackWindow").
	Ready        string `json:"ready,omitempty"`
	ReadyMessage string `json:"readyMessage,omitempty"`
	// Text is when it runs, in words, relative to the view's time.
	Text string `json:"text"`
}

// lifecycleView reads the schema lifecycle from r's spec and status.
func lifecycleView(r *routingv1alpha1.RoutingService, now time.Time) *LifecycleView {
	st := r.Status.Schema
	l := &LifecycleView{Phase: string(st.Phase), Reported: st.ReportedVersion}
	shown := st.Phase != "" || len(st.Revisions) > 0 || st.Contract != nil || r.Spec.Schema.Contract != nil
	if st.PhaseSince != nil {
		t := st.PhaseSince.UTC()
		l.PhaseSince, l.PhaseAge = &t, age(now, t)
	}
	for _, rv := range st.Revisions {
		l.Revisions = append(l.Revisions, RevisionRangeView{Revision: rv.Revision, Min: rv.Min, Max: rv.Max, Assumed: rv.Assumed,
			Shards: rv.Shards, Excludes: st.ReportedVersion != "" && !inRange(st.ReportedVersion, rv.Min, rv.Max)})
	}
	if c := currentCondition(r, routingv1alpha1.ConditionRollbackSafe); c != nil {
		l.RollbackSafe, l.RollbackSafeReason, l.RollbackSafeMessage = string(c.Status), c.Reason, c.Message
		shown = true
	}
	if r.Status.ObservedGeneration == r.Generation {
		for _, c := range r.Status.Conditions {
			if c.Reason == routingv1alpha1.ReasonDatabaseAhead && c.ObservedGeneration == r.Generation && c.Status == metav1.ConditionTrue {
				l.DatabaseAhead, shown = c.Message, true
				break
			}
		}
	}
	if cv := contractView(r, now); cv != nil {
		l.Contract, shown = cv, true
	}
	if !shown {
		return nil
	}
	return l
}

func contractView(r *routingv1alpha1.RoutingService, now time.Time) *ContractView {
	spec, st := r.Spec.Schema.Contract, r.Status.Schema.Contract
	if spec == nil && st == nil {
		return nil
	}
	c := &ContractView{}
	if spec != nil {
		c.Version = spec.Version
	}
	if st != nil {
		if st.Version != "" {
			c.Version = st.Version
		}
		c.Job, c.Attempt = st.Job, st.Attempt
		c.EligibleTime, c.StartTime, c.CompletionTime = utcTime(st.EligibleTime), utcTime(st.StartTime), utcTime(st.CompletionTime)
	}
	if cond := currentCondition(r, routingv1alpha1.ConditionContractReady); cond != nil {
		c.Ready, c.ReadyMessage = string(cond.Status)+" "+cond.Reason, cond.Message
	}
	switch {
	case c.CompletionTime != nil:
		c.Text = fmt.Sprintf("to schema %s done at %s (%s ago)", c.Version, rfc3339(*c.CompletionTime), age(now, *c.CompletionTime))
	case c.StartTime != nil:
		c.Text = fmt.Sprintf("to schema %s running since %s (%s)", c.Version, rfc3339(*c.StartTime), age(now, *c.StartTime))
	case c.EligibleTime != nil && c.EligibleTime.After(now):
		c.Text = fmt.Sprintf("to schema %s at %s (in %s)", c.Version, rfc3339(*c.EligibleTime), countdown(c.EligibleTime.Sub(now)))
	case c.EligibleTime != nil:
		c.Text = fmt.Sprintf("to schema %s eligible since %s (%s ago)", c.Version, rfc3339(*c.EligibleTime), age(now, *c.EligibleTime))
	default:
		window := int32(600)
		if spec != nil && spec.RollbackWindowSeconds != nil {
			window = *spec.RollbackWindowSeconds
		}
		c.Text = fmt.Sprintf("to schema %s once every shard is promoted and baked, then a rollback window of %s", c.Version, countdown(time.Duration(window)*time.Second))
	}
	if c.Job != "" {
		c.Text += fmt.Sprintf(", Job %s (attempt %d)", c.Job, c.Attempt)
	}
	return c
}

// inRange says whether v is in [lo, hi] (hi "" is no upper end); an unreadable bound says no.
func inRange(v, lo, hi string) bool {
	if lo != "" && !schemaversion.AtLeast(v, lo) {
		return false
	}
	return hi == "" || schemaversion.AtLeast(hi, v)
}

// rangeText is "[lo, hi]", with ∞ for no upper end.
func rangeText(lo, hi string) string {
	if lo == "" {
		lo = "?"
	}
	if hi == "" {
		hi = "∞)"
	} else {
		hi += "]"
	}
	return "[" + lo + ", " + hi
}

func utcTime(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// renderLifecycle writes the header lines of the schema lifecycle: Lifecycle, Contract, Ranges,
// Rollback, Database. What needs a person (a refused rollback, an unsafe one, a database ahead of
// a serving revision) is red.
func renderLifecycle(w io.Writer, l *LifecycleView, p palette, label func(string) string) {
	phase := "no phase reported"
	if l.Phase != "" {
		phase = p.paint(stateColor(l.Phase), l.Phase)
		if l.PhaseSince != nil {
			phase += fmt.Sprintf(" for %s (since %s)", l.PhaseAge, rfc3339(*l.PhaseSince))
		}
	}
	reported := "the database has reported no version yet"
	if l.Reported != "" {
		v := l.Reported
		if l.DatabaseAhead != "" {
			v = p.paint(sgrRed, v)
		}
		reported = "the database reports schema " + v
	}
	fmt.Fprintf(w, "%s %s; %s\n", label("Lifecycle:"), phase, reported)
	if c := l.Contract; c != nil {
		text := c.Text
		if c.Ready != "" {
			text += "; ContractReady=" + c.Ready
		}
		fmt.Fprintf(w, "%s %s\n", label("Contract:"), text)
	}
	if len(l.Revisions) > 0 {
		var parts []string
		for _, rv := range l.Revisions {
			rng := rangeText(rv.Min, rv.Max)
			if rv.Excludes {
				rng = p.paint(sgrRed, rng)
			}
			part := rv.Revision + " runs on " + rng
			if rv.Assumed {
				part += " (assumed: no range declared)"
			}
			if len(rv.Shards) > 0 {
				part += ", serves " + strings.Join(rv.Shards, ", ")
			} else {
				part += ", serves no shard"
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(w, "%s %s\n", label("Ranges:"), strings.Join(parts, "; "))
	}
	if l.RollbackSafe != "" {
		what := "safe"
		color := ""
		switch l.RollbackSafe {
		case string(metav1.ConditionFalse):
			what, color = "unsafe", sgrRed
		case string(metav1.ConditionUnknown):
			what = "unknown"
		}
		text := p.paint(color, what+" ("+l.RollbackSafeReason+")")
		if l.RollbackSafeMessage != "" {
			text += ": " + l.RollbackSafeMessage
		}
		fmt.Fprintf(w, "%s %s\n", label("Rollback:"), text)
	}
	if l.DatabaseAhead != "" {
		fmt.Fprintf(w, "%s %s: %s\n", label("Database:"), p.paint(sgrRed, routingv1alpha1.ReasonDatabaseAhead), l.DatabaseAhead)
	}
}
