package schemadiff

import (
	"strconv"
	"strings"
)

// typeChange classifies a column's type change, from and to as format_type writes them. The rule
// is the reader's and the writer's both: a binary of the schema before must still be able to
// write what it wrote (every value of from is a value of to) and read what it reads.
func typeChange(from, to string) (Class, string) {
	fb, fm := splitType(from)
	tb, tm := splitType(to)
	switch {
	case strings.HasSuffix(from, "[]") != strings.HasSuffix(to, "[]"):
		return Breaking, "an array becomes a scalar or back"
	case isText(fb) && isText(tb):
		if tm == nil || (fm != nil && tm[0] >= fm[0]) {
			return Expand, "every value of the old type is one of the new"
		}
		return Breaking, "values the old type allowed are too long for the new"
	case intRank(fb) > 0 && intRank(tb) > 0:
		if intRank(tb) >= intRank(fb) {
			return Expand, "a wider integer: a binary that reads it into a narrower one fails only once a value exceeds that range"
		}
		return Breaking, "a narrower integer: values the old type allowed no longer fit"
	case fb == "real" && tb == "double precision":
		return Expand, "a wider floating-point type"
	case fb == "numeric" && tb == "numeric":
		if tm == nil || (len(fm) == 2 && len(tm) == 2 && tm[1] >= fm[1] && tm[0]-tm[1] >= fm[0]-fm[1]) {
			return Expand, "every value of the old precision fits the new"
		}
		return Breaking, "values the old precision allowed no longer fit"
	case intRank(fb) > 0 && tb == "numeric" && tm == nil:
		return Conditional, "integers become numeric: a binary that scans an integer may read a decimal"
	case fb == "timestamp without time zone" && tb == "timestamp with time zone",
		fb == "timestamp with time zone" && tb == "timestamp without time zone":
		return Conditional, "the time zone of stored and returned values changes meaning"
	case fb == "json" && tb == "jsonb":
		return Conditional, "jsonb drops duplicate keys and reorders them"
	}
	return Breaking, "a binary of the old type writes or reads values the new type does not take as they are"
}

// splitType splits "character varying(10)" into "character varying" and [10], "numeric(10,2)"
// into "numeric" and [10 2]; modifiers are nil when there are none (or they do not parse).
func splitType(t string) (string, []int) {
	t = strings.TrimSuffix(t, "[]")
	open := strings.IndexByte(t, '(')
	if open < 0 || !strings.HasSuffix(t, ")") {
		return t, nil
	}
	base := t[:open]
	// "timestamp(3) without time zone" keeps its words after the modifier.
	var mods []int
	for _, f := range strings.Split(t[open+1:len(t)-1], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return t, nil
		}
		mods = append(mods, n)
	}
	return base, mods
}

func isText(base string) bool {
	return base == "text" || base == "character varying"
}

// intRank orders the integer types by width (0: not an integer type).
func intRank(base string) int {
	switch base {
	case "smallint":
		return 1
	case "integer":
		return 2
	case "bigint":
		return 3
	}
	return 0
}
