package main

import (
	"strings"
	"testing"
)

// A stream as govulncheck -format json writes it (trimmed to what the gate reads): one
// vulnerability called, one only imported.
const stream = `{"config":{"protocol_version":"v1.0.0"}}
{"osv":{"id":"GO-2026-0001"}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.2.3","trace":[{"module":"example.com/m","version":"v1.2.0","package":"example.com/m/p"}]}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.2.3","trace":[{"module":"example.com/m","version":"v1.2.0","package":"example.com/m/p","function":"Parse"},{"module":"github.com/schemagate/schemagate","package":"x","function":"main"}]}}
{"finding":{"osv":"GO-2026-0002","fixed_version":"v0.5.0","trace":[{"module":"example.com/n","version":"v0.4.0","package":"example.com/n"}]}}
`

// The gate fails on a called vulnerability nobody accepted, passes once it is accepted, never
// fails on one only imported, and fails on an accepted one the code no longer calls.
func TestGate(t *testing.T) {
	vulns, err := readFindings(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		accepted map[string]string
		fail     bool
		says     string
	}{
		{"called, not accepted", nil, true, "CALLED      GO-2026-0001 example.com/m v1.2.0 (fixed in v1.2.3)"},
		{"called, accepted", map[string]string{"GO-2026-0001": "why"}, false, "accepted    GO-2026-0001"},
		{"accepted, not called", map[string]string{"GO-2026-0001": "why", "GO-2026-0002": "why"}, true, "STALE       GO-2026-0002"},
	} {
		var out strings.Builder
		if failed := report(&out, vulns, tc.accepted); failed != tc.fail || !strings.Contains(out.String(), tc.says) {
			t.Errorf("%s: failed %v, want %v; output:\n%s", tc.name, failed, tc.fail, out.String())
		}
		if !strings.Contains(out.String(), "not called  GO-2026-0002") && tc.accepted["GO-2026-0002"] == "" {
			t.Errorf("%s: the imported-only vulnerability is not listed:\n%s", tc.name, out.String())
		}
	}
	if _, err := readFindings(strings.NewReader(`{"finding":`)); err == nil {
		t.Error("a cut stream reads as no findings")
	}
}
