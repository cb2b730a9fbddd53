package v1alpha1

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// The CRD's printer columns: `kubectl get rsvc` names each column for what it shows (the
// confirmed schema version is CONFIRMED beside REQUIRED, not SCHEMA), and `-o wide` adds the
// Stalled condition, the update and stable revisions, spec.paused, the schema lifecycle's phase
// (expand, roll out, rollback window, contract) and the Ready message.
func TestPrinterColumns(t *testing.T) {
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name    string `json:"name"`
				Columns []struct {
					Name     string `json:"name"`
					JSONPath string `json:"jsonPath"`
					Priority int32  `json:"priority"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	type col struct {
		name, path string
		wide       bool
	}
	want := []col{
		{"Ready", `.status.conditions[?(@.type=="Ready")].status`, false},
		{"Reason", `.status.conditions[?(@.type=="Ready")].reason`, false},
		{"Confirmed", ".status.schema.confirmedVersion", false},
		{"Required", ".spec.schema.version", false},
		{"Shards", ".status.promotedShards", false},
		{"Age", ".metadata.creationTimestamp", false},
		{"Stalled", `.status.conditions[?(@.type=="Stalled")].status`, true},
		{"Update", ".status.updateRevision", true},
		{"Stable", ".status.stableRevision", true},
		{"Paused", ".spec.paused", true},
		{"Phase", ".status.schema.phase", true},
		{"Message", `.status.conditions[?(@.type=="Ready")].message`, true},
	}
	for _, v := range crd.Spec.Versions {
		var got []col
		for _, c := range v.Columns {
			got = append(got, col{c.Name, c.JSONPath, c.Priority > 0})
		}
		if len(got) != len(want) {
			t.Fatalf("%s: columns %v, want %v", v.Name, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: column %d is %v, want %v", v.Name, i, got[i], want[i])
			}
		}
	}
}
