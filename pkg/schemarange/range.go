// Package schemarange is the planner's one answer to "which schema may the database be at, now
// and next" and "may a revision run there": the range of schema versions a revision runs on
// (Range), and what the database is known to be at and may reach (Database). It is pure: it
// reads only its arguments, and every version it is given is untrusted (a version that does not
// parse is in no range).
package schemarange

import (
	"fmt"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Range is the range of database schema versions a revision runs on, both ends included. Min ""
// means the range is unknown and contains nothing; Max "" means no newest version.
type Range struct {
	Min, Max string
	// Assumed: the revision declared no range; it is taken to run on Min and every newer schema.
	Assumed bool
}

// Contains reports whether the database may be at version v for this range's binary. An unknown
// range, or a v that is not a version, contains nothing.
func (r Range) Contains(v string) bool {
	if r.Min == "" || !schemaversion.Valid(v) || !schemaversion.AtLeast(v, r.Min) {
		return false
	}
	return r.Max == "" || schemaversion.AtLeast(r.Max, v)
}

// String is the range for a message: "[1, 2]", "[2, no newest)", with " (assumed)" when it was
// not declared.
func (r Range) String() string {
	s := fmt.Sprintf("[%s, %s]", orNone(r.Min), r.Max)
	if r.Max == "" {
		s = fmt.Sprintf("[%s, no newest)", orNone(r.Min))
	}
	if r.Assumed {
		s += " (assumed)"
	}
	return s
}

// FromSpec is the range a spec declares for its revision (spec.schema.compatibility): Min
// defaults to the version, an empty Max is no newest; unset, it is [version, no newest) and
// assumed. It returns an error, naming the field, when the declared range is not a range of
// versions or does not contain the version (the CRD refuses most such specs; the manager refuses
// the rest with InvalidSchemaRange).
func FromSpec(s *routingv1alpha1.SchemaSpec) (Range, error) {
	r := Range{Min: s.Version, Assumed: s.Compatibility == nil}
	if c := s.Compatibility; c != nil {
		if c.Min != "" {
			r.Min = c.Min
		}
		r.Max = c.Max
	}
	for _, v := range []string{r.Min, r.Max} {
		if v != "" && !schemaversion.Valid(v) {
			return Range{}, fmt.Errorf("spec.schema.compatibility: %q is not a dotted numeric version", v)
		}
	}
	if !schemaversion.Valid(s.Version) {
		return Range{}, fmt.Errorf("spec.schema.version %q is not a dotted numeric version", s.Version)
	}
	if !r.Contains(s.Version) {
		return Range{}, fmt.Errorf("spec.schema.compatibility %s does not contain spec.schema.version %s", r, s.Version)
	}
	return r, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// NarrowedByBreaking is r once a migration from the version from was found breaking by its probe
// (a dropped column, an incompatible type change): a range that is only assumed and contains from
// ends at from, since nothing says its binary does not use what the migration takes away. A
// declared range is kept as declared (the team's word stands; the caller warns), and so is a
// range that does not contain from (the migration does not start from a schema it runs on).
func (r Range) NarrowedByBreaking(from string) Range {
	if !r.Assumed || !r.Contains(from) {
		return r
	}
	r.Max = from
	return r
}
