package rollout

import (
	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The schema range a revision runs on is recorded on each of its ReplicaSets, next to the version
// it requires (annotationSchemaVersion), so that what an old revision is known to run on survives
// a lost status write, a restored backup or a spec that moved on.
const (
	// annotationSchemaMin is the oldest schema version the revision runs on.
	annotationSchemaMin = "schemagate.io/schema-min"
	// annotationSchemaMax is the newest schema version the revision runs on; absent: no newest.
	annotationSchemaMax = "schemagate.io/schema-max"
	// annotationSchemaRangeAssumed is "true" when the revision declared no range
	// (spec.schema.compatibility unset) and runs on the assumed [version, no newest).
	annotationSchemaRangeAssumed = "schemagate.io/schema-range-assumed"
)

// rangeAnnotations are the annotations NewReplicaSet records the spec's range with. A spec whose
// range is invalid records the narrowest range that is certainly true: its own version alone.
func rangeAnnotations(s *routingv1alpha1.SchemaSpec) map[string]string {
	r, err := schemarange.FromSpec(s)
	if err != nil {
		r = schemarange.Range{Min: s.Version, Max: s.Version}
	}
	out := map[string]string{annotationSchemaMin: r.Min}
	if r.Max != "" {
		out[annotationSchemaMax] = r.Max
	}
	if r.Assumed {
		out[annotationSchemaRangeAssumed] = "true"
	}
	return out
}

// RecordedRange is the range recorded on a schemagate ReplicaSet as written, for checkers that
// trust the objects they watch (the invariant checkers): min defaults to the required version, an
// absent max is no newest. The planner never reads it (revisionRange).
func RecordedRange(rs *appsv1.ReplicaSet) (min, max string) {
	min, max = RequiredSchema(rs), rs.Annotations[annotationSchemaMax]
	if v, ok := rs.Annotations[annotationSchemaMin]; ok {
		min = v
	}
	return min, max
}

// rangeOfReplicaSet is the schema range a schemagate ReplicaSet's revision runs on, read from its
// annotations, which are untrusted input and may only narrow: the range is never wider than
// [RequiredSchema(rs), no newest), the rule of the schemagate releases that recorded no range, and
// a ReplicaSet without range annotations gets exactly that, assumed. A min below the required
// version is raised to it; a min or max that is not a version narrows the range to the required
// version alone. A ReplicaSet without a required version runs on nothing (min "").
func rangeOfReplicaSet(rs *appsv1.ReplicaSet) schemarange.Range {
	need := RequiredSchema(rs)
	if !validVersion(need) {
		return schemarange.Range{}
	}
	a := rs.Annotations
	_, hasMin := a[annotationSchemaMin]
	_, hasMax := a[annotationSchemaMax]
	r := schemarange.Range{Min: need, Assumed: !hasMin && !hasMax || a[annotationSchemaRangeAssumed] == "true"}
	return narrow(r, a)
}

// narrow narrows r by a ReplicaSet's range annotations: a higher min raises it, a lower max lowers
// it, a value that is not a version leaves only r's min.
func narrow(r schemarange.Range, a map[string]string) schemarange.Range {
	lo, hasMin := a[annotationSchemaMin]
	hi, hasMax := a[annotationSchemaMax]
	need := r.Min
	if hasMin {
		switch {
		case !validVersion(lo):
			r.Max = need
		case schemaversion.AtLeast(lo, need):
			r.Min = lo
		}
	}
	if hasMax {
		if !validVersion(hi) {
			r.Max = need
		} else if r.Max == "" || schemaversion.AtLeast(r.Max, hi) {
			r.Max = hi
		}
	}
	return r
}

// revisionRange is the schema range rs's revision runs on: the one place ranges of existing
// ReplicaSets come from. A range only assumed is narrowed by the breaking migration probes that
// speak for the database (probe.go). The update revision's ReplicaSet runs on the spec's range (the spec is
// trusted; its range is part of the revision), narrowed by its annotations; any other runs on
// what its annotations say, never wider than [RequiredSchema(rs), no newest) (rangeOfReplicaSet),
// so that a hand edit cannot let an old revision run on a schema older than it requires.
func (p *planner) revisionRange(rs *appsv1.ReplicaSet) schemarange.Range {
	return p.probeNarrowed(p.declaredRange(rs))
}

// declaredRange is revisionRange before the migration probes narrow it.
func (p *planner) declaredRange(rs *appsv1.ReplicaSet) schemarange.Range {
	if rs == nil {
		return schemarange.Range{}
	}
	if p.set(rs.Labels[LabelShard]).byRev[p.update] == rs && !p.untrusted[rs] {
		if r := p.updateRange(); r.Min != "" {
			return narrow(r, rs.Annotations)
		}
	}
	if r, ok := p.recordedRevisionRange(rs); ok {
		return narrow(r, rs.Annotations)
	}
	return rangeOfReplicaSet(rs)
}

// recordedRevisionRange is the range rs's revision declared, from its verified revision record
// (history.go: a ControllerRevision whose data hashes to the revision, so neither a hand edit of
// the record nor of rs can change it), when one exists and requires what rs requires. It is what
// keeps an old revision's declared newest schema, and a min below its version (a binary-first
// revision), after the spec moved on and whatever happened to rs's annotations.
func (p *planner) recordedRevisionRange(rs *appsv1.ReplicaSet) (schemarange.Range, bool) {
	if p.untrusted[rs] {
		return schemarange.Range{}, false
	}
	spec := p.revisionRecord(revisionOf(rs))
	if spec == nil || !schemaversion.Equal(spec.Schema.Version, RequiredSchema(rs)) {
		return schemarange.Range{}, false
	}
	r, err := schemarange.FromSpec(&spec.Schema)
	if err != nil {
		return schemarange.Range{}, false
	}
	return r, true
}

// updateRange is the range of the update revision, from the spec, narrowed by the breaking
// migration probes that speak for the database (a spec reverted to a revision whose range is
// only assumed does not run past what the probe found it cannot); an invalid declared range is
// the empty range (the manager refuses it with InvalidSchemaRange).
func (p *planner) updateRange() schemarange.Range {
	r, err := schemarange.FromSpec(&p.rsvc.Spec.Schema)
	if err != nil {
		return schemarange.Range{}
	}
	return p.probeNarrowed(r)
}

// validVersion reports whether v is a version the API allows (status.schema.revisions reports
// ranges with the CRD's bound of 63 characters, so a longer one is no version here).
func validVersion(v string) bool { return len(v) <= 63 && schemaversion.Valid(v) }

// recordsUpdateRange reports whether rs records the range the spec declares for the update
// revision (a ReplicaSet without range annotations records [its version, no newest)). A
// ReplicaSet of another name is taken as the update revision only then: a spec that declares or
// changes a range is a new revision whose ReplicaSets record it, never an older one's.
func (p *planner) recordsUpdateRange(rs *appsv1.ReplicaSet) bool {
	want, err := schemarange.FromSpec(&p.rsvc.Spec.Schema)
	if err != nil {
		return false
	}
	lo, hi := RecordedRange(rs)
	sameMax := hi == want.Max || schemaversion.Equal(hi, want.Max)
	return schemaversion.Equal(lo, want.Min) && sameMax
}
