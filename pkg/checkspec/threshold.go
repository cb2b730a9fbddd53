package checkspec

import (
	"math"
	"strconv"
	"strings"
)

// Threshold reads the threshold out of a prometheus check's successCondition, so that a dashboard
// or an alert can draw the measured value beside the value it must stay under (or over). It
// recognises only the simplest shape, `result` (or `result[0]`, as Argo Rollouts analyses write
// it) compared with one finite number:
//
//	result < 0.01        → "<", 0.01, true
//	result[0] >= 0.99    → ">=", 0.99, true
//	result == 1.0        → "==", 1, true
//
// Anything else (a conjunction, the number on the left, a function call, NaN or an infinity,
// trailing text) is ok=false: no threshold is better than a wrong one. It is a reading aid, not
// a CEL parser; CompileCondition stays the judge of what a condition means. It never panics, and
// its work is linear in the length of the condition.
func Threshold(successCondition string) (op string, value float64, ok bool) {
	s := strings.TrimSpace(successCondition)
	rest, found := strings.CutPrefix(s, "result")
	if !found {
		return "", 0, false
	}
	rest = strings.TrimLeft(rest, " \t")
	if r, indexed := strings.CutPrefix(rest, "["); indexed {
		r = strings.TrimLeft(r, " \t")
		r, zero := strings.CutPrefix(r, "0")
		if !zero {
			return "", 0, false
		}
		r = strings.TrimLeft(r, " \t")
		if rest, found = strings.CutPrefix(r, "]"); !found {
			return "", 0, false
		}
		rest = strings.TrimLeft(rest, " \t")
	}
	// Two-character operators first, so "<=" is not read as "<" followed by "=".
	for _, o := range []string{"<=", ">=", "==", "<", ">"} {
		if r, found := strings.CutPrefix(rest, o); found {
			op, rest = o, r
			break
		}
	}
	if op == "" {
		return "", 0, false
	}
	num := strings.TrimSpace(rest)
	if !isDecimal(num) {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		// A literal too large for a float64 (1e999) parses as ±Inf with an error.
		return "", 0, false
	}
	return op, v, true
}

// isDecimal reports whether s is a plain decimal number: an optional sign, digits with at most
// one decimal point (at least one digit), and an optional exponent. ParseFloat alone would also
// take "Inf", "NaN", hexadecimal floats and underscores, none of which is a threshold.
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, point := 0, false
mantissa:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point:
			point = true
		default:
			break mantissa
		}
	}
	if digits == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	exp := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		exp++
	}
	return exp > 0 && i == len(s)
}
