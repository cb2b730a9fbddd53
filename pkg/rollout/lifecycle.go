package rollout

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/lifecycle"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The schema lifecycle of one revision: expand (the migration to spec.schema.version), roll out
// (shards are promoted), and, with spec.schema.contract, contract. Every revision runs on a range
// of schema versions (ranges.go); the rules of this file keep every pod inside its range:
//
//   - expand gate: the migration to V starts only when every revision that serves a shard, and
//     every revision failurePolicy would roll a touched shard back to, runs on V
//     (IncompatibleRevision otherwise; allowBreakingMigration lets it start anyway);
//   - binary-first: when the expand gate refuses V but the update revision also runs on the
//     database's current version, shards roll first and the migration follows once no serving or
//     rollback-target revision excludes V;
//   - rollback safety: a rollback to a revision whose range does not contain the database's
//     version is refused (RollbackRefused), and RollbackSafe says so before anything fails;
//   - database ahead: nothing scales up on a revision whose range does not contain the database's
//     version (mayRun), and DatabaseAhead says so.

// incompatible is a revision that cannot run on a version: the range it runs on, the shards it
// serves and the shards whose rollback would return to it.
type incompatible struct {
	revision   string
	rng        schemarange.Range
	serves     []string
	rollbackOf []string
	newest     metav1.Time
}

func (i incompatible) String() string {
	var where []string
	if len(i.serves) > 0 {
		where = append(where, "serves "+strings.Join(i.serves, ", "))
	}
	if len(i.rollbackOf) > 0 {
		where = append(where, "is the rollback target of "+strings.Join(i.rollbackOf, ", "))
	}
	return fmt.Sprintf("revision %s (runs on %s) %s", i.revision, i.rng, strings.Join(where, " and "))
}

// serving reports whether rs asks for or has pods.
func serving(rs *appsv1.ReplicaSet) bool {
	return replicasOf(rs) > 0 || rs.Status.Replicas > 0
}

// shardNames are the shards of the spec, in spec order, then the others (shards removed from the
// spec whose ReplicaSets remain) by name.
func (p *planner) shardNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, s := range p.rsvc.Spec.Shards {
		if !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
	}
	var rest []string
	for name := range p.shards {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// failureTargets are, per shard, the ReplicaSet failurePolicy would roll the shard back to if the
// update revision failed now: the one that served it last, in each shard the update revision
// touched, while the update revision is not yet the stable one (a stable revision is not rolled
// back by a failure or an abort).
func (p *planner) failureTargets() map[string]*appsv1.ReplicaSet {
	out := map[string]*appsv1.ReplicaSet{}
	if p.status.StableRevision == p.update {
		return out
	}
	return p.rollbackTargets(nil)
}

// plannedView is the ReplicaSets as this reconcile's actions leave them: the status describes the
// cluster after the plan, so that the next reconcile, which observes it, writes nothing new (I4).
type plannedView struct {
	replicas map[*appsv1.ReplicaSet]int32
	created  map[string][]*appsv1.ReplicaSet
}

func (p *planner) planned() *plannedView {
	v := &plannedView{replicas: map[*appsv1.ReplicaSet]int32{}, created: map[string][]*appsv1.ReplicaSet{}}
	for _, a := range p.plan.Actions {
		switch a.Kind {
		case CreateReplicaSet:
			v.created[a.ReplicaSet.Labels[LabelShard]] = append(v.created[a.ReplicaSet.Labels[LabelShard]], a.ReplicaSet)
		case ScaleReplicaSet:
			v.replicas[a.ReplicaSet] = a.Replicas
		}
	}
	return v
}

// all is shard's ReplicaSets, observed (nil view) or as planned.
func (v *plannedView) all(p *planner, shard string) []*appsv1.ReplicaSet {
	if v == nil {
		return p.set(shard).all
	}
	return append(append([]*appsv1.ReplicaSet{}, p.set(shard).all...), v.created[shard]...)
}

// serving reports whether rs asks for (observed, or as planned) or has pods.
func (v *plannedView) serving(rs *appsv1.ReplicaSet) bool {
	if v != nil {
		if n, ok := v.replicas[rs]; ok {
			return n > 0 || rs.Status.Replicas > 0
		}
	}
	return serving(rs)
}

// rollbackTargets are, per shard the update revision touched, the ReplicaSet that served it last
// before: where a rollback, an abort or a spec reverted in Git returns it (observed with a nil
// view, else as planned).
func (p *planner) rollbackTargets(v *plannedView) map[string]*appsv1.ReplicaSet {
	out := map[string]*appsv1.ReplicaSet{}
	for _, shard := range p.shardNames() {
		var cur *appsv1.ReplicaSet
		for _, rs := range v.all(p, shard) {
			if revisionOf(rs) == p.update && !p.untrusted[rs] && (rs == p.set(shard).byRev[p.update] || !p.set(shard).contains(rs)) {
				cur = rs
			}
		}
		if cur == nil || !v.serving(cur) {
			continue
		}
		if rs := p.lastServed(shard, cur); rs != nil {
			out[shard] = rs
		}
	}
	return out
}

// incompatibleWith lists the revisions that serve a shard, or that failurePolicy would roll a
// touched shard back to, and whose range does not contain version, newest first: the serving
// set's (serving.go) as observed, never the status.
func (p *planner) incompatibleWith(version string) []incompatible {
	return p.servingSet(nil, p.failureTargets()).excluding(version)
}

// anyAssumed reports whether a revision of list runs on an assumed range.
func anyAssumed(list []incompatible) bool {
	for _, in := range list {
		if in.rng.Assumed {
			return true
		}
	}
	return false
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func describeIncompatible(list []incompatible) string {
	parts := make([]string, 0, len(list))
	for _, in := range list {
		parts = append(parts, in.String())
	}
	return strings.Join(parts, "; ")
}

// expandGate decides whether the migration to spec.schema.version may start now. It returns true
// when it may (no revision stands in its way and every place is seen, or allowBreakingMigration
// says to go on); otherwise it sets the SchemaReady condition: binary-first when the update
// revision runs on the database's current version (shards roll first), IncompatibleRevision
// (Stalled) when it does not, and the cluster's reason while only a place not seen holds it.
func (p *planner) expandGate() bool {
	required := p.rsvc.Spec.Schema.Version
	set := p.servingSet(nil, p.failureTargets())
	list, unseen := set.excluding(required), set.unseen
	current := p.confirmedNow()
	switch lifecycle.Expand(lifecycle.ExpandInput{Incompatible: len(list), Unseen: len(unseen),
		AllowBreaking: p.rsvc.Spec.Schema.AllowBreakingMigration, UpdateRunsOnCurrent: p.updateRange().Contains(current)}) {
	case lifecycle.ExpandStart:
		return true
	case lifecycle.ExpandBreaking:
		p.breaking = describeIncompatible(list)
		if len(unseen) > 0 {
			p.breaking = strings.TrimPrefix(p.breaking+"; and whatever serves where it cannot be seen: "+describeUnseen(unseen), "; and ")
		}
		return true
	case lifecycle.ExpandBinaryFirst:
		p.binaryFirst = true
		var why []string
		if len(list) > 0 {
			why = append(why, "no revision that serves or that a rollback would return to excludes it: "+describeIncompatible(list))
		}
		if len(unseen) > 0 {
			why = append(why, "every shard's cluster answers, so that what serves there can be seen: "+describeUnseen(unseen))
		}
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrationPending, fmt.Sprintf(
			"binary first: revision %s runs on %s, which contains the database's schema %s, so shards roll before the migration; the migration to %s starts once %s",
			p.update, p.updateRange(), current, required, strings.Join(why, ", and once ")))
		return false
	case lifecycle.ExpandUnseen:
		p.holdForUnseen(required, unseen)
		return false
	}
	if found := p.probeFindings(); found != "" && anyAssumed(list) {
		p.failSchema(routingv1alpha1.ReasonBreakingChange, fmt.Sprintf(
			"the migration to schema %s is refused before its Job exists: %s; that breaks %s, whose range the probe narrowed to the database's version because it is only assumed (declared nowhere); revision %s (runs on %s) cannot run on the database's schema %s either. Fix it one of three ways: declare the range the old revision runs on (spec.schema.compatibility in its manifest), split the change into an expand (add the new column beside the old) and a later contract (spec.schema.contract), or set spec.schema.allowBreakingMigration for planned downtime",
			required, found, describeIncompatible(list), p.update, p.updateRange(), orNone(current)))
		return false
	}
	p.failSchema(routingv1alpha1.ReasonIncompatibleRevision, fmt.Sprintf(
		"the migration to schema %s is refused before its Job exists: %s; revision %s (runs on %s) cannot run on the database's schema %s either, so it cannot roll first (declare spec.schema.compatibility so that the old and new revisions share a schema, or set spec.schema.allowBreakingMigration for planned downtime)",
		required, describeIncompatible(list), p.update, p.updateRange(), orNone(current)))
	return false
}

// databaseVersion is the version the database last reported (status.schema.reportedVersion), or
// the confirmed one when no report was read (evidence JobSuccess).
//
// A contract this RoutingService ran (or runs) counts too, whatever is left of its report
// (contractFloor): a lost or hand-edited report never makes a revision whose range ends below the
// contract look safe to roll back to.
func (p *planner) databaseVersion() string {
	v := p.status.Schema.ReportedVersion
	if v == "" {
		v = p.confirmedNow()
	}
	if floor := p.contractFloor(); floor != "" && (v == "" || !schemaversion.AtLeast(v, floor)) {
		v = floor
	}
	return v
}

// beyondAssumption reports whether a revision whose range is r runs on db only by the default: its
// range is assumed, not declared, and db is past the version it was built for (r.Min).
func beyondAssumption(r schemarange.Range, db string) bool {
	return r.Assumed && db != "" && schemaversion.Valid(r.Min) && !schemaversion.AtLeast(r.Min, db)
}

// assumedPast names the rollback targets that run on db only by the default (beyondAssumption):
// a rollback to them is unverified.
func assumedPast(targets []servingEntry, db string) []string {
	var out []string
	for _, e := range targets {
		if beyondAssumption(e.rng, db) {
			name := fmt.Sprintf("revision %s (runs on %s)", revisionOf(e.rs), e.rng)
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// warnAssumedServing says, with a Warning Event, when a revision starts serving on a schema past
// the version it was built for only by an assumed range (it declares none): the moment the
// default is relied on. It is said once: a revision that the stored status already showed serving
// past its version on an assumed range is not said again.
func (p *planner) warnAssumedServing(revisions []routingv1alpha1.RevisionSchema, db string) {
	relied := func(r routingv1alpha1.RevisionSchema, db string) bool {
		return len(r.Shards) > 0 && beyondAssumption(schemarange.Range{Min: r.Min, Max: r.Max, Assumed: r.Assumed}, db)
	}
	storedDB := p.rsvc.Status.Schema.ReportedVersion
	if storedDB == "" {
		storedDB = p.rsvc.Status.Schema.ConfirmedVersion
	}
	said := map[string]bool{}
	for _, r := range p.rsvc.Status.Schema.Revisions {
		if relied(r, storedDB) {
			said[r.Revision] = true
		}
	}
	for _, r := range revisions {
		if relied(r, db) && !said[r.Revision] {
			p.event(true, EventAssumedSchemaRange, "revision %s serves %s on schema %s, past the version %s it was built for, only because its range is assumed, not declared: a migration that breaks it is not refused; declare spec.schema.compatibility in its manifest (kubectl schemagate plan --migrations shows what a migration changes)",
				r.Revision, strings.Join(r.Shards, ", "), db, r.Min)
		}
	}
}

// lifecycle computes the schema lifecycle's part of the status, in one place: the phase, the
// ranges of the revisions that serve or that a rollback would return to, the RollbackSafe
// condition, and DatabaseAhead when a serving revision does not run on the database's version.
func (p *planner) lifecycle() {
	st := &p.status.Schema
	_, err := schemarange.FromSpec(&p.rsvc.Spec.Schema)
	phase := lifecycle.Phase(lifecycle.Evidence{
		Invalid:       err != nil,
		Confirmed:     p.gateOpen || p.holding,
		BinaryFirst:   p.binaryFirst,
		Promoted:      p.allPromoted(),
		Contract:      p.rsvc.Spec.Schema.Contract != nil,
		ContractPhase: p.contractPhase,
	})
	st.Phase, st.PhaseSince = phase, notAfter(st.PhaseSince, p.now)
	if p.rsvc.Status.Schema.Phase != phase || st.PhaseSince == nil {
		st.PhaseSince = &metav1.Time{Time: p.now}
	}
	if p.binaryFirst && p.rolloutComplete() {
		// The update revision becomes the stable one in this reconcile, so the older revision is
		// no rollback target any more: the migration may start on the next reconcile, which no
		// watch event would trigger (the status write is none).
		p.requeueAt(p.now.Add(time.Second))
	}
	view := p.planned()
	set := p.servingSet(view, p.rollbackTargets(view))
	st.Revisions = set.revisionSchemas(p.now)

	db := p.databaseVersion()
	database := p.database()
	var unsafe []string
	var next []schemarange.Pending
	targets := set.targets()
	unverified := assumedPast(targets, db)
	for _, e := range targets {
		out := database.Outside(e.rng)
		if !e.rng.Contains(db) || len(out) > 0 {
			unsafe = append(unsafe, fmt.Sprintf("shard %s to revision %s (runs on %s)", e.shard, revisionOf(e.rs), e.rng))
			next = append(next, out...)
		}
	}
	switch {
	case len(unsafe) > 0:
		may := ""
		if len(next) > 0 {
			// A live migration or contract: the database may be at its version any moment.
			may = fmt.Sprintf(" (and %s)", next[0])
		}
		p.setCondition(routingv1alpha1.ConditionRollbackSafe, metav1.ConditionFalse, routingv1alpha1.ReasonRollbackUnsafe, fmt.Sprintf(
			"the database reports schema %s%s, outside the range of a revision a rollback would return to: %s; such a rollback is refused, and rolling forward still works",
			orNone(db), may, strings.Join(unsafe, ", ")))
	case len(targets) == 0:
		p.setCondition(routingv1alpha1.ConditionRollbackSafe, metav1.ConditionTrue, routingv1alpha1.ReasonRollbackAvailable, fmt.Sprintf(
			"no shard has an earlier revision to roll back to from revision %s", p.update))
	case len(unverified) > 0:
		// Never "safe" on an assumption: the database is past the version such a revision was
		// built for, and nothing but the default says it runs there.
		p.setCondition(routingv1alpha1.ConditionRollbackSafe, metav1.ConditionUnknown, routingv1alpha1.ReasonRollbackUnverified, fmt.Sprintf(
			"the database reports schema %s, past the version %s was built for, and its range is assumed, not declared: whether a rollback to it works is not known; declare the range it runs on (spec.schema.compatibility in its manifest)",
			orNone(db), strings.Join(unverified, ", ")))
	default:
		p.setCondition(routingv1alpha1.ConditionRollbackSafe, metav1.ConditionTrue, routingv1alpha1.ReasonRollbackAvailable, fmt.Sprintf(
			"every revision a rollback would return to runs on the database's schema %s", orNone(db)))
	}

	p.warnAssumedServing(st.Revisions, db)

	if p.stallReason != "" || p.rsvc.Spec.Schema.AllowBreakingMigration || db == "" {
		return
	}
	var ahead []string
	for _, rs := range st.Revisions {
		r := schemarange.Range{Min: rs.Min, Max: rs.Max}
		if len(rs.Shards) > 0 && r.Max != "" && !schemaversion.AtLeast(r.Max, db) {
			ahead = append(ahead, fmt.Sprintf("revision %s (runs on %s) serves %s", rs.Revision, r, strings.Join(rs.Shards, ", ")))
		}
	}
	if len(ahead) > 0 {
		p.stall(routingv1alpha1.ReasonDatabaseAhead, fmt.Sprintf(
			"the database reports schema %s, which a serving revision does not run on: %s; nothing scales up on it (what serves is not scaled down either)",
			db, strings.Join(ahead, "; ")))
	}
}

// maxRevisionSchemas bounds status.schema.revisions (the CRD's maxItems).
const maxRevisionSchemas = 16

// contains reports whether rs is one of the shard's observed ReplicaSets.
func (s *shardSet) contains(rs *appsv1.ReplicaSet) bool {
	for _, x := range s.all {
		if x == rs {
			return true
		}
	}
	return false
}
