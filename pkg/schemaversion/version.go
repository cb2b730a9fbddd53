// Package schemaversion parses and orders schema versions: dotted numeric strings such as "9",
// "10" or "2026.10.1", compared segment by segment as numbers of any size.
package schemaversion

import (
	"fmt"
	"strings"
)

// Valid reports whether v is a dotted numeric version: one or more runs of ASCII digits joined by
// single dots ("1", "2026.10.1"). It is the rule the CRD enforces on spec.schema.version.
func Valid(v string) bool {
	if v == "" {
		return false
	}
	for _, seg := range strings.Split(v, ".") {
		if seg == "" {
			return false
		}
		for _, r := range seg {
			if r < '0' || r > '9' {
				return false
			}
		}
	}
	return true
}

// Compare orders two versions: -1 if a < b, 0 if equal, +1 if a > b. Segments are compared as
// unbounded integers ("9" < "10", "007" == "7"); a missing segment counts as 0, so "2" == "2.0".
// The empty string is below every version ("no schema confirmed yet"). It returns an error when
// either non-empty argument is not Valid.
func Compare(a, b string) (int, error) {
	for _, v := range []string{a, b} {
		if v != "" && !Valid(v) {
			return 0, fmt.Errorf("schema version %q is not a dotted numeric version", v)
		}
	}
	switch {
	case a == "" && b == "":
		return 0, nil
	case a == "":
		return -1, nil
	case b == "":
		return 1, nil
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		if c := compareSegment(segment(as, i), segment(bs, i)); c != 0 {
			return c, nil
		}
	}
	return 0, nil
}

// AtLeast reports whether have >= want; an invalid version is never at least anything.
func AtLeast(have, want string) bool {
	c, err := Compare(have, want)
	return err == nil && have != "" && c >= 0
}

func segment(segs []string, i int) string {
	if i < len(segs) {
		return segs[i]
	}
	return "0"
}

// compareSegment compares two digit strings as integers without converting them, so a segment
// longer than 64 bits still orders correctly.
func compareSegment(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// Canonical returns the shortest spelling of v: leading zeros of each segment and trailing ".0"
// segments removed, so every spelling of one version ("2", "2.0", "02.00") has one canonical form
// ("2"). Migration Job names and labels use it, so "2" and "2.0" are one Job (scenario S-15). An
// invalid v is returned unchanged.
func Canonical(v string) string {
	if !Valid(v) {
		return v
	}
	segs := strings.Split(v, ".")
	for i, s := range segs {
		if s = strings.TrimLeft(s, "0"); s == "" {
			s = "0"
		}
		segs[i] = s
	}
	for len(segs) > 1 && segs[len(segs)-1] == "0" {
		segs = segs[:len(segs)-1]
	}
	return strings.Join(segs, ".")
}

// Equal reports whether a and b are valid spellings of one version.
func Equal(a, b string) bool {
	c, err := Compare(a, b)
	return err == nil && a != "" && b != "" && c == 0
}
