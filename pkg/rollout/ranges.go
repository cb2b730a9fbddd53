package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
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

// schemaRange is the range of database schema versions a revision runs on, both ends included.
// min "" means the range is unknown and contains nothing; max "" means no newest version.
type schemaRange struct {
	min, max string
	// assumed: the revision declared no range; it is taken to run on min and every newer schema.
	assumed bool
}

// contains reports whether the database may be at version v for this range's binary. An unknown
// range, or an unknown v, contains nothing.
func (r schemaRange) contains(v string) bool {
	if r.min == "" || !schemaversion.Valid(v) || !schemaversion.AtLeast(v, r.min) {
		return false
	}
	return r.max == "" || schemaversion.AtLeast(r.max, v)
}

// String is the range for a message: "[1, 2]", "[2, no newest)", with " (assumed)" when it was not
// declared.
func (r schemaRange) String() string {
	s := fmt.Sprintf("[%s, %s]", orNone(r.min), r.max)
	if r.max == "" {
		s = fmt.Sprintf("[%s, no newest)", orNone(r.min))
	}
	if r.assumed {
		s += " (assumed)"
	}
	return s
}

// specRange is the range the spec declares for its revision (spec.schema.compatibility): min
// defaults to version, an empty max is no newest; unset, it is [version, no newest) and assumed.
// It returns an error when the declared range is not a range of versions or does not contain
// version (the CRD refuses most such specs; the manager refuses the rest).
func specRange(s *routingv1alpha1.SchemaSpec) (schemaRange, error) {
	r := schemaRange{min: s.Version, assumed: s.Compatibility == nil}
	if c := s.Compatibility; c != nil {
		if c.Min != "" {
			r.min = c.Min
		}
		r.max = c.Max
	}
	for _, v := range []string{r.min, r.max} {
		if v != "" && !schemaversion.Valid(v) {
			return schemaRange{}, fmt.Errorf("spec.schema.compatibility: %q is not a dotted numeric version", v)
		}
	}
	if !schemaversion.Valid(s.Version) {
		return schemaRange{}, fmt.Errorf("spec.schema.version %q is not a dotted numeric version", s.Version)
	}
	if !r.contains(s.Version) {
		return schemaRange{}, fmt.Errorf("spec.schema.compatibility %s does not contain spec.schema.version %s", r, s.Version)
	}
	return r, nil
}

// rangeAnnotations are the annotations NewReplicaSet records the spec's range with. A spec whose
// range is invalid records the narrowest range that is certainly true: its own version alone.
func rangeAnnotations(s *routingv1alpha1.SchemaSpec) map[string]string {
	r, err := specRange(s)
	if err != nil {
		r = schemaRange{min: s.Version, max: s.Version}
	}
	out := map[string]string{annotationSchemaMin: r.min}
	if r.max != "" {
		out[annotationSchemaMax] = r.max
	}
	if r.assumed {
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
func rangeOfReplicaSet(rs *appsv1.ReplicaSet) schemaRange {
	need := RequiredSchema(rs)
	if !validVersion(need) {
		return schemaRange{}
	}
	a := rs.Annotations
	_, hasMin := a[annotationSchemaMin]
	_, hasMax := a[annotationSchemaMax]
	r := schemaRange{min: need, assumed: !hasMin && !hasMax || a[annotationSchemaRangeAssumed] == "true"}
	return narrow(r, a)
}

// narrow narrows r by a ReplicaSet's range annotations: a higher min raises it, a lower max lowers
// it, a value that is not a version leaves only r's min.
func narrow(r schemaRange, a map[string]string) schemaRange {
	lo, hasMin := a[annotationSchemaMin]
	hi, hasMax := a[annotationSchemaMax]
	need := r.min
	if hasMin {
		switch {
		case !validVersion(lo):
			r.max = need
		case schemaversion.AtLeast(lo, need):
			r.min = lo
		}
	}
	if hasMax {
		if !validVersion(hi) {
			r.max = need
		} else if r.max == "" || schemaversion.AtLeast(r.max, hi) {
			r.max = hi
		}
	}
	return r
}

// revisionRange is the schema range rs's revision runs on: the one place ranges of existing
// ReplicaSets come from. The update revision's ReplicaSet runs on the spec's range (the spec is
// trusted; its range is part of the revision), narrowed by its annotations; any other runs on
// what its annotations say, never wider than [RequiredSchema(rs), no newest) (rangeOfReplicaSet),
// so that a hand edit cannot let an old revision run on a schema older than it requires.
func (p *planner) revisionRange(rs *appsv1.ReplicaSet) schemaRange {
	if rs == nil {
		return schemaRange{}
	}
	if p.set(rs.Labels[LabelShard]).byRev[p.update] == rs && !p.untrusted[rs] {
		if r := p.updateRange(); r.min != "" {
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
func (p *planner) recordedRevisionRange(rs *appsv1.ReplicaSet) (schemaRange, bool) {
	if p.untrusted[rs] {
		return schemaRange{}, false
	}
	spec := p.revisionRecord(revisionOf(rs))
	if spec == nil || !schemaversion.Equal(spec.Schema.Version, RequiredSchema(rs)) {
		return schemaRange{}, false
	}
	r, err := specRange(&spec.Schema)
	if err != nil {
		return schemaRange{}, false
	}
	return r, true
}

// updateRange is the range of the update revision, from the spec; an invalid declared range is
// the empty range (the manager refuses it with InvalidSchemaRange).
func (p *planner) updateRange() schemaRange {
	r, err := specRange(&p.rsvc.Spec.Schema)
	if err != nil {
		return schemaRange{}
	}
	return r
}

// validVersion reports whether v is a version the API allows (status.schema.revisions reports
// ranges with the CRD's bound of 63 characters, so a longer one is no version here).
func validVersion(v string) bool { return len(v) <= 63 && schemaversion.Valid(v) }

// recordsUpdateRange reports whether rs records the range the spec declares for the update
// revision (a ReplicaSet without range annotations records [its version, no newest)). A
// ReplicaSet of another name is taken as the update revision only then: a spec that declares or
// changes a range is a new revision whose ReplicaSets record it, never an older one's.
func (p *planner) recordsUpdateRange(rs *appsv1.ReplicaSet) bool {
	want, err := specRange(&p.rsvc.Spec.Schema)
	if err != nil {
		return false
	}
	lo, hi := RecordedRange(rs)
	sameMax := hi == want.max || schemaversion.Equal(hi, want.max)
	return schemaversion.Equal(lo, want.min) && sameMax
}
