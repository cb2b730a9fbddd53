package lifecycle

import (
	"testing"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// One table row per transition of Phase.
func TestPhase(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Evidence
		want routingv1alpha1.SchemaPhase
	}{
		{"migration needed: expanding", Evidence{}, routingv1alpha1.SchemaPhaseExpanding},
		{"invalid range: expanding (refused)", Evidence{Invalid: true, Confirmed: true}, routingv1alpha1.SchemaPhaseExpanding},
		{"confirmed: rolling out", Evidence{Confirmed: true}, routingv1alpha1.SchemaPhaseRollingOut},
		{"confirmed and promoted: complete", Evidence{Confirmed: true, Promoted: true}, routingv1alpha1.SchemaPhaseComplete},
		{"promoted with a contract: still rolling out", Evidence{Confirmed: true, Promoted: true, Contract: true}, routingv1alpha1.SchemaPhaseRollingOut},
		{"the contract's own phase", Evidence{Confirmed: true, Promoted: true, Contract: true, ContractPhase: routingv1alpha1.SchemaPhaseContracting}, routingv1alpha1.SchemaPhaseContracting},
		{"a contract phase without a contract is not read", Evidence{Confirmed: true, Promoted: true, ContractPhase: routingv1alpha1.SchemaPhaseContracting}, routingv1alpha1.SchemaPhaseComplete},
		{"binary first: rolling out before the migration", Evidence{BinaryFirst: true}, routingv1alpha1.SchemaPhaseRollingOut},
		{"binary first, every shard promoted: expanding", Evidence{BinaryFirst: true, Promoted: true}, routingv1alpha1.SchemaPhaseExpanding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Phase(tc.e); got != tc.want {
				t.Fatalf("phase %s, want %s", got, tc.want)
			}
		})
	}
}

// One table row per verdict of the expand gate.
func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   ExpandInput
		want ExpandVerdict
	}{
		{"nothing in the way", ExpandInput{}, ExpandStart},
		{"nothing in the way, opt-in irrelevant", ExpandInput{AllowBreaking: true, UpdateRunsOnCurrent: true}, ExpandStart},
		{"in the way, planned downtime", ExpandInput{Incompatible: 1, AllowBreaking: true}, ExpandBreaking},
		{"in the way, the new binary runs on today's schema", ExpandInput{Incompatible: 2, UpdateRunsOnCurrent: true}, ExpandBinaryFirst},
		{"in the way, nothing can move", ExpandInput{Incompatible: 1}, ExpandRefused},
		// A place not seen is never a place where nothing serves.
		{"a place not seen, nothing else in the way", ExpandInput{Unseen: 1}, ExpandUnseen},
		{"a place not seen, the new binary runs on today's schema", ExpandInput{Unseen: 2, UpdateRunsOnCurrent: true}, ExpandBinaryFirst},
		{"a place not seen and a revision in the way", ExpandInput{Incompatible: 1, Unseen: 1}, ExpandRefused},
		{"a place not seen, planned downtime", ExpandInput{Unseen: 1, AllowBreaking: true}, ExpandBreaking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Expand(tc.in); got != tc.want {
				t.Fatalf("verdict %s, want %s", got, tc.want)
			}
		})
	}
	for v := ExpandStart; v <= ExpandUnseen; v++ {
		if v.String() == "ExpandVerdict(?)" {
			t.Errorf("verdict %d has no name", v)
		}
	}
}
