package preview

import (
	"fmt"
	"strings"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// ProbeOutcome is what a migration probe's report (pkg/probe) means for the revisions that serve
// or that a rollback would return to. The rule: a breaking change narrows every revision whose
// range is only assumed, and that runs on the database's version now, to that version (the probe
// sees that the migration takes away something the schema had, and nothing says the revision does
// not use it); a declared range is never narrowed, but one the report contradicts is named.
type ProbeOutcome struct {
	Report *schemadiff.Report `json:"report"`
	// From is the version the database is at; To the migration's target.
	From string `json:"from"`
	To   string `json:"to"`
	// Broken are the revisions the migration would break: a breaking change, and a range only
	// assumed (narrowed to From), in the order their shards come.
	Broken []RevisionRange `json:"broken,omitempty"`
	// Contradicted are the revisions whose declared range contains To although the report has a
	// breaking change: a warning, the declaration stands.
	Contradicted []RevisionRange `json:"contradicted,omitempty"`
	// Assumed are the revisions the migration passes only on an assumed range (no breaking change
	// seen, but the probe cannot see the application's queries).
	Assumed []RevisionRange `json:"assumed,omitempty"`
	// ClosesRollback are the rollback revisions (the stable one) that cannot run on To: once the
	// migration runs, a rollback to them is refused.
	ClosesRollback []RevisionRange `json:"closesRollback,omitempty"`
}

// DecideProbe reads report against the revisions that run on the database while and after the
// migration runs (judged: for an expand, what serves or a rollback returns to, the manifest's own
// revision left out, as it is built for To; for a contract, the manifest's own revision, which
// serves through it) and the rollback targets whose way back it may close (rollbackOnly: for a
// contract, the revisions it retires).
func DecideProbe(report *schemadiff.Report, from, to string, judged, rollbackOnly []RevisionRange) ProbeOutcome {
	o := ProbeOutcome{Report: report, From: from, To: to}
	breaking := report.Verdict == schemadiff.Breaking
	for _, r := range judged {
		effective := r
		switch {
		case breaking && r.Assumed && r.contains(from):
			effective.Max = from
			o.Broken = append(o.Broken, effective)
		case breaking && !r.Assumed && r.contains(to):
			o.Contradicted = append(o.Contradicted, r)
		case !breaking && r.Assumed && r.contains(to):
			o.Assumed = append(o.Assumed, r)
		}
		if r.Stable && !effective.contains(to) {
			o.ClosesRollback = append(o.ClosesRollback, effective)
		}
	}
	for _, r := range rollbackOnly {
		effective := r
		if breaking && r.Assumed && r.contains(from) {
			effective.Max = from
		}
		if !effective.contains(to) {
			o.ClosesRollback = append(o.ClosesRollback, effective)
		}
	}
	return o
}

// Findings says in a line what of o --fail-on can fail on: the revisions it breaks, those that
// pass only on an assumed range, the ways back it closes.
func (o ProbeOutcome) Findings() string {
	var parts []string
	for _, f := range []struct {
		what string
		rs   []RevisionRange
	}{{"breaks", o.Broken}, {"passes only on an assumed range:", o.Assumed}, {"closes the way back to", o.ClosesRollback}} {
		if len(f.rs) == 0 {
			continue
		}
		var names []string
		for _, r := range f.rs {
			names = append(names, r.Revision)
		}
		parts = append(parts, f.what+" "+strings.Join(names, ", "))
	}
	if o.Report.Verdict == schemadiff.Failed {
		parts = append([]string{"the migration failed on the scratch database"}, parts...)
	}
	return strings.Join(parts, "; ")
}

// BaseRevision is the revision a base manifest (the spec as merged, before the change under
// review) runs everywhere, for a probe with no live object: its revision, its range (declared or
// assumed from its schema version), every shard, and the stable revision a rollback returns to.
func BaseRevision(base *routingv1alpha1.RoutingService) RevisionRange {
	r := declaredRange(&base.Spec, rollout.Revision(&base.Spec), "base manifest")
	for _, s := range base.Spec.Shards {
		r.Shards = append(r.Shards, s.Name)
	}
	r.Stable = true
	return r
}

// write prints the probe's section: the report, then what it means for each revision, with the
// fixes.
func (o *ProbeOutcome) write(b *strings.Builder) {
	fmt.Fprintf(b, "Migration probe: schema %s → %s on a scratch database\n", o.From, o.To)
	for _, l := range o.Report.Lines() {
		fmt.Fprintf(b, "  %s\n", l)
	}
	for _, r := range o.Broken {
		fmt.Fprintf(b, "  ! breaks revision %s%s: its range is assumed, not declared, so the breaking change narrows it to %s, and it cannot run on %s\n",
			r.Revision, servingText(r), r.bounds(), o.To)
	}
	if len(o.Broken) > 0 {
		b.WriteString("    fix: declare the range that revision really runs on (spec.schema.compatibility in its manifest); or split the change: an expand the old binary runs on, then a contract (spec.schema.contract) once it is gone; or, knowing the cost, spec.schema.allowBreakingMigration\n")
	}
	for _, r := range o.Contradicted {
		fmt.Fprintf(b, "  ! revision %s%s declares %s, which contains %s, but the probe reports a breaking change: make sure the declaration is true\n",
			r.Revision, servingText(r), r.Text(), o.To)
	}
	for _, r := range o.Assumed {
		fmt.Fprintf(b, "  ! revision %s%s passes only on its assumed range %s: the probe cannot see its queries; declare the range it runs on\n",
			r.Revision, servingText(r), r.bounds())
	}
	for _, r := range o.ClosesRollback {
		fmt.Fprintf(b, "  ! closes the way back to revision %s: once the database is at %s, a rollback to it is refused\n", r.Revision, o.To)
	}
}

func servingText(r RevisionRange) string {
	switch {
	case r.Source == "manifest":
		return " (this manifest's revision)"
	case r.Source == "unknown":
		return ""
	case len(r.Shards) == 0:
		return ""
	}
	return " (serving " + strings.Join(r.Shards, ", ") + ")"
}
