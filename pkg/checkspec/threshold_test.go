package checkspec

import (
	"math"
	"testing"
)

func TestThreshold(t *testing.T) {
	for _, tc := range []struct {
		cond  string
		op    string
		value float64
		ok    bool
	}{
		{"result < 0.01", "<", 0.01, true},
		{"result[0] >= 0.99", ">=", 0.99, true},
		{"  result<=5.0  ", "<=", 5, true},
		{"result [ 0 ] > -1e-3", ">", -0.001, true},
		{"result == 1.0", "==", 1, true},
		{"result > .5", ">", 0.5, true},
		{"result < 2.", "<", 2, true},
		{"result < 1E+2", "<", 100, true},
		// Not the one shape Threshold reads.
		{"result < 0.01 && result > 0.0", "", 0, false},
		{"0.01 > result", "", 0, false},
		{"result != 0.0", "", 0, false},
		{"result = 1.0", "", 0, false},
		{"result < ", "", 0, false},
		{"result[1] < 0.5", "", 0, false},
		{"result[0 < 0.5", "", 0, false},
		{"results < 0.5", "", 0, false},
		{"result <> 0.5", "", 0, false},
		{"result < double(1)", "", 0, false},
		{"result < 0x10", "", 0, false},
		{"result < 1_000", "", 0, false},
		{"result < 1e", "", 0, false},
		{"result < .", "", 0, false},
		{"result < 1..2", "", 0, false},
		{"result < --1", "", 0, false},
		// Never a non-finite threshold.
		{"result < Inf", "", 0, false},
		{"result < NaN", "", 0, false},
		{"result < 1e999", "", 0, false},
		{"result < -1e400", "", 0, false},
		{"", "", 0, false},
	} {
		op, v, ok := Threshold(tc.cond)
		if op != tc.op || v != tc.value || ok != tc.ok {
			t.Errorf("Threshold(%q) = %q, %g, %v; want %q, %g, %v", tc.cond, op, v, ok, tc.op, tc.value, tc.ok)
		}
	}
}

// FuzzThreshold: whatever the condition, Threshold does not panic, and what it reads is a known
// operator with a finite value; with ok=false it returns nothing else.
func FuzzThreshold(f *testing.F) {
	for _, s := range []string{"result < 0.01", "result[0] >= 0.99", "result == -1e-300", "result < 1e999", "result[", "result <= +.5e+3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cond string) {
		op, v, ok := Threshold(cond)
		if !ok {
			if op != "" || v != 0 {
				t.Fatalf("Threshold(%q) = %q, %g with ok=false", cond, op, v)
			}
			return
		}
		switch op {
		case "<", "<=", ">", ">=", "==":
		default:
			t.Fatalf("Threshold(%q): operator %q", cond, op)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("Threshold(%q): non-finite %g", cond, v)
		}
	})
}
