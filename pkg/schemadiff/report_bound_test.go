package schemadiff

import (
	"strings"
	"testing"
)

// A report bounded below MaxBytes (a probe pod's share of the kubelet's 12 KiB of termination
// messages) keeps its verdict and its worst changes, whatever it leaves out.
func TestEncodeWithinKeepsTheVerdict(t *testing.T) {
	var changes []Change
	for i := 0; i < 40; i++ {
		changes = append(changes, Change{Class: Expand, Kind: ColumnAdded, Table: "routes", Column: strings.Repeat("c", 200), To: "text"})
	}
	changes = append([]Change{{Class: Breaking, Kind: ColumnType, Table: "routes", Column: "upstream", From: "text", To: "jsonb", Why: strings.Repeat("w", 300)}}, changes...)
	for _, limit := range []int{256, 1024, 2457} {
		b, err := NewReport(changes).EncodeWithin(limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(b) > limit {
			t.Fatalf("limit %d: %d bytes", limit, len(b))
		}
		r, err := Parse(b)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if r.Verdict != Breaking || r.Omitted+len(r.Changes) != len(changes) || (len(r.Changes) > 0 && r.Changes[0].Class != Breaking) {
			t.Fatalf("limit %d: verdict %s, %d changes kept, %d omitted", limit, r.Verdict, len(r.Changes), r.Omitted)
		}
	}
}
