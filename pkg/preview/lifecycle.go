package preview

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The annotations on a revision's ReplicaSets that record the schema range it runs on (the
// record that survives a lost status write or a restored backup), and the older one that records
// only the version it requires (ReplicaSets of earlier releases carry only that one).
const (
	annotationSchemaMin = "schemagate.io/schema-min"
	annotationSchemaMax = "schemagate.io/schema-max"
	// annotationSchemaRangeAssumed is "true" on the ReplicaSets of a revision that declared no
	// range (the manager records [version, no newest) for it).
	annotationSchemaRangeAssumed = "schemagate.io/schema-range-assumed"
	annotationRequiresSchema     = "schemagate.io/requires-schema"
)

// defaultRollbackWindow is spec.schema.contract.rollbackWindowSeconds' default.
const defaultRollbackWindow = 600 * time.Second

// Lifecycle is the schema lifecycle of an apply: expand (the migration to spec.schema.version),
// roll out (the shards), contract (spec.schema.contract), and the ranges of the revisions
// involved. Shown is false when neither the manifest nor the live object uses it (no range, no
// contract declared or recorded anywhere): the preview then prints no lifecycle section.
type Lifecycle struct {
	Shown bool `json:"shown"`
	// Database is the version the database is known to be at: the live status's reportedVersion,
	// else its confirmedVersion; "" when unknown (offline, or a new RoutingService).
	Database string `json:"database,omitempty"`
	// Next is the manifest's revision and its range.
	Next RevisionRange `json:"next"`
	// BinaryFirst: a migration runs, and the manifest's revision also runs on the database's
	// version, so shards may roll before the migration, which follows.
	BinaryFirst bool `json:"binaryFirst,omitempty"`
	// Revisions are the live revisions that serve a shard or that a rollback would return to,
	// with their ranges; empty offline.
	Revisions []RevisionRange `json:"revisions,omitempty"`
	// Contract is the manifest's contract migration, nil without one.
	Contract *Contract `json:"contract,omitempty"`
}

// RevisionRange is a revision's schema range and its part in the apply.
type RevisionRange struct {
	Revision string `json:"revision"`
	Min      string `json:"min,omitempty"`
	Max      string `json:"max,omitempty"`
	// Assumed: no range is declared; it is assumed to run on Min and every newer schema.
	Assumed bool `json:"assumed,omitempty"`
	// Unreadable names a recorded bound that is not a version (a hand edit): the revision is
	// counted as running on no version at all, so it never lets a migration or a rollback pass.
	Unreadable string `json:"unreadable,omitempty"`
	// Source is where the range comes from: manifest, replicasets, status, live spec, or
	// requires-schema (a ReplicaSet of an earlier release: its required version, assumed open).
	Source string `json:"source"`
	// Shards are the shards it serves; Stable: it is the live status's stable revision, where a
	// rollback returns.
	Shards []string `json:"shards,omitempty"`
	Stable bool     `json:"stable,omitempty"`
}

// Contract is the contract step of the lifecycle.
type Contract struct {
	From    string        `json:"from"`
	Version string        `json:"version"`
	Window  time.Duration `json:"window"`
	// Deadline bounds the contract Job.
	Deadline        time.Duration `json:"deadline"`
	RequireApproval bool          `json:"requireApproval,omitempty"`
	// Earliest is when it may start, when the live status says (every shard is promoted and
	// the window's end is known); otherwise it starts at the earliest Window after the last
	// shard is promoted and baked: AfterApply after the apply (the rollout's duration range plus
	// the window).
	Earliest   *time.Time `json:"earliest,omitempty"`
	AfterApply Range      `json:"afterApply"`
	// Done: the live status says the database is at Version after the contract.
	Done bool `json:"done,omitempty"`
}

// contains says whether v is inside r, by the planner's own rule (schemarange.Range.Contains: a
// range with no min contains nothing, as does an unreadable one), so a plan never lets a version
// pass that the manager would refuse.
func (r RevisionRange) contains(v string) bool {
	if r.Unreadable != "" {
		return false
	}
	return schemarange.Range{Min: r.Min, Max: r.Max}.Contains(v)
}

// Text is "[min, max]", "[min, ∞)", with "assumed" or why it cannot be read.
func (r RevisionRange) Text() string {
	s := r.bounds()
	if r.Assumed && r.Unreadable == "" {
		s += " (assumed)"
	}
	return s
}

// bounds is Text without "(assumed)".
func (r RevisionRange) bounds() string {
	if r.Unreadable != "" {
		return "an unreadable range (" + r.Unreadable + ")"
	}
	lo := r.Min
	if lo == "" {
		lo = "?"
	}
	if r.Max != "" {
		return "[" + lo + ", " + r.Max + "]"
	}
	return "[" + lo + ", ∞)"
}

// role is what a live revision does: "serves us-east, eu-west; the stable revision".
func (r RevisionRange) role() string {
	var parts []string
	if len(r.Shards) > 0 {
		parts = append(parts, "serves "+strings.Join(r.Shards, ", "))
	}
	if r.Stable {
		parts = append(parts, "the stable revision, where a rollback returns")
	}
	if len(parts) == 0 {
		return "the live spec's revision"
	}
	return strings.Join(parts, "; ")
}

// declaredRange is the manifest revision's range: spec.schema.compatibility, or [version, ∞)
// assumed.
func declaredRange(spec *routingv1alpha1.RoutingServiceSpec, revision, source string) RevisionRange {
	r := RevisionRange{Revision: revision, Min: spec.Schema.Version, Source: source}
	c := spec.Schema.Compatibility
	if c == nil {
		r.Assumed = true
		return r
	}
	if c.Min != "" {
		r.Min = c.Min
	}
	r.Max = c.Max
	for _, b := range []struct{ name, v string }{{"compatibility.min", c.Min}, {"compatibility.max", c.Max}} {
		if b.v != "" && !schemaversion.Valid(b.v) {
			r.Unreadable = fmt.Sprintf("%s %q", b.name, truncate(b.v))
		}
	}
	return r
}

// replicaSetRange is the range the revision's ReplicaSets record: the narrowest when they differ
// (a hand edit of one of them never widens it), unreadable when a bound is not a version;
// ok is false when none records one.
func replicaSetRange(revision string, rss []*appsv1.ReplicaSet) (RevisionRange, bool) {
	r := RevisionRange{Revision: revision, Source: "replicasets"}
	found, requires := false, ""
	for _, rs := range rss {
		lo, hasLo := rs.Annotations[annotationSchemaMin]
		hi, hasHi := rs.Annotations[annotationSchemaMax]
		if req := rs.Annotations[annotationRequiresSchema]; req != "" && requires == "" {
			requires = req
		}
		if !hasLo && !hasHi {
			continue
		}
		for _, b := range []struct{ key, v string }{{annotationSchemaMin, lo}, {annotationSchemaMax, hi}} {
			if b.v != "" && !schemaversion.Valid(b.v) {
				r.Unreadable = fmt.Sprintf("%s=%q on %s", b.key, truncate(b.v), rs.Name)
			}
		}
		if !hasLo || lo == "" {
			r.Unreadable = fmt.Sprintf("no %s on %s", annotationSchemaMin, rs.Name)
		}
		if rs.Annotations[annotationSchemaRangeAssumed] == "true" {
			r.Assumed = true
		}
		if !found {
			r.Min, r.Max, found = lo, hi, true
			continue
		}
		if schemaversion.Valid(lo) && schemaversion.Valid(r.Min) && schemaversion.AtLeast(lo, r.Min) {
			r.Min = lo
		}
		if hi != "" && (r.Max == "" || (schemaversion.Valid(hi) && schemaversion.Valid(r.Max) && !schemaversion.AtLeast(hi, r.Max))) {
			r.Max = hi
		}
	}
	if found {
		return r, true
	}
	if requires != "" {
		return RevisionRange{Revision: revision, Min: requires, Assumed: true, Source: "requires-schema"}, true
	}
	return r, false
}

// lifecycle computes p.Lifecycle and its risks.
func (p *Preview) lifecycle(live, next *routingv1alpha1.RoutingService, rss []appsv1.ReplicaSet) {
	l := Lifecycle{Next: declaredRange(&next.Spec, p.NextRevision, "manifest")}
	s := &next.Spec.Schema
	l.Shown = s.Compatibility != nil || s.Contract != nil || s.AllowBreakingMigration
	if live != nil {
		st := live.Status.Schema
		l.Database = st.ReportedVersion
		if !schemaversion.Valid(l.Database) {
			l.Database = st.ConfirmedVersion
		}
		if !schemaversion.Valid(l.Database) {
			l.Database = ""
		}
		l.Revisions = liveRevisions(live, rss)
		for _, r := range l.Revisions {
			if r.Source != "unknown" && (!r.Assumed || r.Source == "replicasets") {
				l.Shown = true
			}
		}
		l.Shown = l.Shown || live.Spec.Schema.Contract != nil || st.Contract != nil || st.Phase != ""
	}
	l.BinaryFirst = p.Migration.Runs && l.Database != "" && p.Rollout && l.Next.contains(l.Database)
	if p.Decision != nil {
		// The manager's planner says whether the shards roll first: only when a revision that
		// serves does not run on the new version, which the ranges alone do not say.
		l.BinaryFirst = p.Decision.BinaryFirst
	}
	if c := s.Contract; c != nil {
		window := defaultRollbackWindow
		if c.RollbackWindowSeconds != nil {
			window = seconds(max(0, *c.RollbackWindowSeconds))
		}
		k := &Contract{From: s.Version, Version: c.Version, Window: window, RequireApproval: c.RequireApproval,
			Deadline: seconds(c.Migration.ActiveDeadlineSecondsOrDefault()) + rollout.MigrationGrace}
		if live != nil && !p.Rollout && live.Status.UpdateRevision == p.NextRevision {
			if lc := live.Status.Schema.Contract; lc != nil && schemaversion.Equal(lc.Version, c.Version) {
				k.Done = lc.CompletionTime != nil && schemaversion.AtLeast(l.Database, c.Version)
				if lc.EligibleTime != nil {
					t := lc.EligibleTime.UTC()
					k.Earliest = &t
				}
			}
		}
		k.AfterApply = Range{Min: p.Duration.Min + window, Max: p.Duration.Max + window}
		l.Contract = k
	}
	p.Lifecycle = l
	// A return: the manifest's revision ran here before (its ReplicaSets are kept, or the status
	// lists it).
	for i := range rss {
		p.returns = p.returns || (rss[i].Labels[rollout.LabelName] == next.Name && rss[i].Labels[rollout.LabelRevision] == p.NextRevision)
	}
	if live != nil {
		p.returns = p.returns || slices.ContainsFunc(live.Status.Schema.Revisions, func(r routingv1alpha1.RevisionSchema) bool { return r.Revision == p.NextRevision })
	}
	p.lifecycleRisks(live, next)
}

// liveRevisions are the revisions that serve a shard (status.shards, or ReplicaSets with
// replicas) or that a rollback would return to (status.stableRevision), and the live spec's,
// newest first as the status lists them, each with its range: from its ReplicaSets' annotations
// (the record in the cluster), else from status.schema.revisions, else from the live spec (its
// own revision), else assumed from the ReplicaSets' required version.
func liveRevisions(live *routingv1alpha1.RoutingService, rss []appsv1.ReplicaSet) []RevisionRange {
	byRev := map[string][]*appsv1.ReplicaSet{}
	shards := map[string][]string{}
	addShard := func(rev, shard string) {
		if rev != "" && shard != "" && !slices.Contains(shards[rev], shard) {
			shards[rev] = append(shards[rev], shard)
		}
	}
	for i := range rss {
		rs := &rss[i]
		if rs.Labels[rollout.LabelName] != live.Name || rs.DeletionTimestamp != nil {
			continue
		}
		rev := rs.Labels[rollout.LabelRevision]
		if rev == "" {
			continue
		}
		byRev[rev] = append(byRev[rev], rs)
		if ptr.Deref(rs.Spec.Replicas, 0) > 0 || rs.Status.Replicas > 0 {
			addShard(rev, rs.Labels[rollout.LabelShard])
		}
	}
	for _, sh := range live.Status.Shards {
		addShard(sh.Revision, sh.Name)
	}
	recorded := map[string]routingv1alpha1.RevisionSchema{}
	var order []string
	for _, r := range live.Status.Schema.Revisions {
		if r.Revision != "" && !slices.Contains(order, r.Revision) {
			recorded[r.Revision] = r
			order = append(order, r.Revision)
		}
	}
	liveRev := rollout.Revision(&live.Spec)
	extra := []string{liveRev, live.Status.UpdateRevision, live.Status.StableRevision}
	var fromShards []string
	for rev := range shards {
		fromShards = append(fromShards, rev)
	}
	sort.Strings(fromShards)
	for _, rev := range append(extra, fromShards...) {
		if rev != "" && !slices.Contains(order, rev) {
			order = append(order, rev)
		}
	}
	// Spec order for the shards each revision serves.
	spec := map[string]int{}
	for i, s := range live.Spec.Shards {
		spec[s.Name] = i
	}
	var out []RevisionRange
	for _, rev := range order {
		serves, stable := shards[rev], rev == live.Status.StableRevision
		if len(serves) == 0 && !stable && rev != liveRev {
			continue // a revision nothing serves and no rollback returns to
		}
		r, ok := replicaSetRange(rev, byRev[rev])
		if !ok || r.Source == "requires-schema" {
			switch rec, has := recorded[rev]; {
			case has:
				r = RevisionRange{Revision: rev, Min: rec.Min, Max: rec.Max, Assumed: rec.Assumed, Source: "status"}
				for _, b := range []string{rec.Min, rec.Max} {
					if b != "" && !schemaversion.Valid(b) {
						r.Unreadable = fmt.Sprintf("status.schema.revisions bound %q", truncate(b))
					}
				}
			case rev == liveRev:
				r = declaredRange(&live.Spec, rev, "live spec")
			case !ok:
				r = RevisionRange{Revision: rev, Source: "unknown", Unreadable: "no range recorded: no ReplicaSet read, no status entry"}
			}
		}
		sort.Slice(serves, func(i, j int) bool { return spec[serves[i]] < spec[serves[j]] })
		r.Shards, r.Stable = serves, stable
		out = append(out, r)
	}
	return out
}

func (p *Preview) lifecycleRisks(live, next *routingv1alpha1.RoutingService) {
	l := &p.Lifecycle
	s := &next.Spec.Schema
	v := s.Version
	if l.Next.Unreadable != "" {
		p.Risks = append(p.Risks, Risk{"spec.schema.compatibility", "cannot be read (" + l.Next.Unreadable + ")"})
	} else if !l.Next.contains(v) {
		p.Risks = append(p.Risks, Risk{"spec.schema.compatibility", fmt.Sprintf("%s does not contain spec.schema.version %s", l.Next.Text(), v)})
	}
	// Expand: every revision that serves, or that a rollback would return to, must run on v.
	// With the manager's Decision its planner decides that (below); this preview's own reading of
	// the ranges decides it only without one.
	if p.Migration.Runs && live != nil {
		for _, r := range l.Revisions {
			if r.Revision == p.NextRevision || r.contains(v) {
				continue
			}
			if len(r.Shards) == 0 && !r.Stable {
				continue // the live spec's revision, serving nothing and no rollback target
			}
			unknown := fmt.Sprintf("plan cannot tell whether revision %s (%s) runs on schema %s: it found no range recorded for it (its ReplicaSets or status.schema.revisions); the manager decides from its ReplicaSets' record",
				r.Revision, r.role(), v)
			if p.Decision != nil {
				// The planner saw no ReplicaSet of it either: still worth a look.
				if r.Source == "unknown" && !s.AllowBreakingMigration {
					p.Risks = append(p.Risks, Risk{"spec.schema.version", unknown})
				}
				continue
			}
			what := fmt.Sprintf("the migration to schema %s is refused before its Job exists (IncompatibleRevision): revision %s runs on %s and %s",
				v, r.Revision, r.Text(), r.role())
			refused := true
			if r.Source == "unknown" {
				what, refused = unknown, false
			}
			if s.AllowBreakingMigration {
				what = fmt.Sprintf("allowBreakingMigration: the migration to schema %s runs although revision %s runs on %s and %s: planned downtime there until each shard is rolled",
					v, r.Revision, r.Text(), r.role())
				refused = false
			}
			p.Risks = append(p.Risks, Risk{"spec.schema.version", what})
			if refused && p.Refused == "" {
				p.Refused = "IncompatibleRevision, by plan's own reading of the ranges (the manager's decision was not computed): " + what
			}
		}
	}
	if d := p.Decision; d != nil {
		switch {
		case d.SchemaReady.Reason == routingv1alpha1.ReasonIncompatibleRevision, d.SchemaReady.Reason == routingv1alpha1.ReasonWaitingForContract:
			p.Risks = append(p.Risks, Risk{"spec.schema.version", managerSays(d.SchemaReady)})
		case d.breaking != "":
			p.Risks = append(p.Risks, Risk{"spec.schema.version", fmt.Sprintf("manager's decision (%s): %s", rollout.EventBreakingMigration, d.breaking)})
		}
	}
	// Assumed ranges decide the gate when a migration runs: say which.
	if p.Migration.Runs && live != nil {
		for _, r := range l.Revisions {
			if r.Assumed && r.Revision != p.NextRevision && r.contains(v) && (len(r.Shards) > 0 || r.Stable) {
				p.Risks = append(p.Risks, Risk{"spec.schema.compatibility", fmt.Sprintf("revision %s (%s) declares no range: it is assumed to run on %s, so the migration to %s is let through on that assumption; declare the range it really runs on",
					r.Revision, r.role(), r.bounds(), v)})
			}
		}
	}
	if l.Next.Assumed && l.Shown {
		p.Risks = append(p.Risks, Risk{"spec.schema.compatibility", fmt.Sprintf("unset: revision %s is assumed to run on %s; a later migration that breaks it would not be refused", p.NextRevision, l.Next.bounds())})
	}
	// The database is past the manifest's revision: a revert after a contract, a restored backup.
	if l.Database != "" && !l.Next.contains(l.Database) && schemaversion.AtLeast(l.Database, v) && !schemaversion.Equal(l.Database, v) {
		reason := "DatabaseAhead: nothing scales up on it"
		if live != nil && p.NextRevision != p.CurrentRevision && (p.NextRevision == live.Status.StableRevision || p.returns) {
			reason = "a return to it is refused (RollbackRefused): every shard holds on the revision that serves it"
		}
		p.Risks = append(p.Risks, Risk{"spec.schema.compatibility", fmt.Sprintf("the database reports schema %s, outside revision %s's range %s: %s", l.Database, p.NextRevision, l.Next.Text(), reason)})
	}
	// One lifecycle at a time: a contract still pending in the live object, and a new expand
	// (with a Decision, the planner says whether the expand waits: WaitingForContract above).
	if live != nil && p.Migration.Runs && p.Decision == nil {
		if lc := live.Spec.Schema.Contract; lc != nil && (s.Contract == nil || !schemaversion.Equal(lc.Version, s.Contract.Version)) {
			st := live.Status.Schema.Contract
			if (st == nil || st.CompletionTime == nil) && !(l.Next.contains(lc.Version) && l.Next.contains(v)) {
				p.Risks = append(p.Risks, Risk{"spec.schema.version", fmt.Sprintf("the live contract to %s has not run: the expand to %s waits for it (WaitingForContract), since revision %s's range %s does not cover both", lc.Version, v, p.NextRevision, l.Next.Text())})
			}
		}
	}
	// A serving revision the database is already past (a contract run by hand, a restored backup).
	if l.Database != "" {
		for _, r := range l.Revisions {
			if r.Revision != p.NextRevision && len(r.Shards) > 0 && !r.contains(l.Database) {
				p.Risks = append(p.Risks, Risk{"status.schema.reportedVersion", fmt.Sprintf("the database reports schema %s, outside the range %s of revision %s, which serves %s: nothing scales up on it (DatabaseAhead)",
					l.Database, r.Text(), r.Revision, strings.Join(r.Shards, ", "))})
			}
		}
	}
	c := l.Contract
	if c == nil {
		return
	}
	if !schemaversion.Valid(c.Version) || !schemaversion.AtLeast(c.Version, v) || schemaversion.Equal(c.Version, v) {
		p.Risks = append(p.Risks, Risk{"spec.schema.contract.version", fmt.Sprintf("%s is not above spec.schema.version %s", c.Version, v)})
	} else if !l.Next.contains(c.Version) {
		p.Risks = append(p.Risks, Risk{"spec.schema.contract.version", fmt.Sprintf("%s is outside revision %s's own range %s: the contract would break the revision it is for", c.Version, p.NextRevision, l.Next.Text())})
	}
	// The contract closes the way back to every live revision whose range stops below it; one
	// whose range is assumed is taken to run on it, which nobody declared.
	if live != nil && !c.Done {
		for _, r := range l.Revisions {
			if r.Revision == p.NextRevision {
				continue
			}
			if r.contains(c.Version) {
				if r.Assumed && (len(r.Shards) > 0 || r.Stable) {
					p.Risks = append(p.Risks, Risk{"spec.schema.contract", fmt.Sprintf("revision %s (%s) declares no range: it is assumed to run on %s, so the contract to %s is taken not to break it and a rollback to it stays allowed after the contract; declare the range it really runs on",
						r.Revision, r.role(), r.bounds(), c.Version)})
				}
				continue
			}
			p.Risks = append(p.Risks, Risk{"spec.schema.contract", fmt.Sprintf("closes the rollback window of revision %s, which runs on %s (%s): once the contract to %s has run, a rollback, an abort or a revert to it is refused (RollbackSafe=False)",
				r.Revision, r.Text(), r.role(), c.Version)})
		}
	}
}

// truncate bounds a value from an untrusted source before it is printed.
func truncate(s string) string {
	const limit = 40
	if len(s) <= limit {
		return strings.ToValidUTF8(s, "?")
	}
	return strings.ToValidUTF8(s[:limit], "?") + "…"
}

// managerSays is a condition the manager's planner decided, said to be its decision.
func managerSays(c DecidedCondition) string {
	return fmt.Sprintf("manager's decision (SchemaReady=%s %s): %s", c.Status, c.Reason, c.Message)
}
