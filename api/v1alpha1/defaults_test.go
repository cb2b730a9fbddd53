package v1alpha1

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const crdPath = "../../config/crd/bases/routing.schemagate.io_routingservices.yaml"

// specDefaults reads every default the generated CRD declares under .spec, keyed by the field's
// path (e.g. "strategy.bakeSeconds"). Pod templates (Kubernetes' own types, with their own
// defaults) are not descended into.
func specDefaults(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	for _, v := range crd.Spec.Versions {
		if v.Name == GroupVersion.Version {
			spec, _ = v.Schema.OpenAPIV3Schema["properties"].(map[string]any)["spec"].(map[string]any)
		}
	}
	if spec == nil {
		t.Fatalf("%s: no .spec schema for version %s", crdPath, GroupVersion.Version)
	}
	out := map[string]any{}
	var walk func(path string, schema map[string]any)
	walk = func(path string, schema map[string]any) {
		if d, ok := schema["default"]; ok && path != "" {
			out[path] = d
		}
		if items, ok := schema["items"].(map[string]any); ok {
			// A list's items: their fields' paths leave the index out ("strategy.checks.job").
			walk(path, items)
		}
		props, _ := schema["properties"].(map[string]any)
		for name, sub := range props {
			if name == "template" {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			walk(p, sub.(map[string]any))
		}
	}
	walk("", spec)
	return out
}

// jsonValue is v as it reads back from the CRD's YAML (numbers as float64, objects as maps).
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCRDDefaultsMatchGoConstants checks that each +kubebuilder:default marker, as generated into
// the CRD, states the same value as the Go constant the accessors use, and that no default in the
// CRD lacks a Go constant.
func TestCRDDefaultsMatchGoConstants(t *testing.T) {
	want := map[string]any{
		"strategy":                                        map[string]any{},
		"strategy.maxSurge":                               intstr.FromString(DefaultMaxSurge),
		"strategy.maxUnavailable":                         intstr.FromInt32(DefaultMaxUnavailable),
		"strategy.minReadySeconds":                        DefaultMinReadySeconds,
		"strategy.bakeSeconds":                            DefaultBakeSeconds,
		"strategy.progressDeadlineSeconds":                DefaultProgressDeadlineSeconds,
		"strategy.failurePolicy":                          DefaultFailurePolicy,
		"strategy.revisionHistoryLimit":                   DefaultRevisionHistoryLimit,
		"strategy.jobHistoryLimit":                        DefaultJobHistoryLimit,
		"strategy.unreachablePolicy":                      DefaultUnreachablePolicy,
		"strategy.unreachableDeadlineSeconds":             DefaultUnreachableDeadlineSeconds,
		"strategy.podHealth":                              map[string]any{},
		"strategy.podHealth.mode":                         DefaultPodHealthMode,
		"strategy.podHealth.maxRestarts":                  DefaultPodHealthMaxRestarts,
		"disruptionBudget":                                map[string]any{},
		"disruptionBudget.enabled":                        DefaultDisruptionBudgetEnabled,
		"schema.migration.backoffLimit":                   DefaultMigrationBackoffLimit,
		"schema.migration.activeDeadlineSeconds":          DefaultMigrationActiveDeadlineSeconds,
		"schema.evidence":                                 DefaultSchemaEvidence,
		"schema.probe.mode":                               DefaultProbeMode,
		"schema.probe.onFailure":                          DefaultProbeOnFailure,
		"schema.probe.databaseEnv":                        DefaultProbeDatabaseEnv,
		"schema.probe.activeDeadlineSeconds":              DefaultProbeActiveDeadlineSeconds,
		"schema.contract.migration.backoffLimit":          DefaultMigrationBackoffLimit,
		"schema.contract.migration.activeDeadlineSeconds": DefaultMigrationActiveDeadlineSeconds,
		"schema.contract.rollbackWindowSeconds":           DefaultContractRollbackWindowSeconds,
		"strategy.checks.when":                            []CheckWhen{DefaultCheckWhen},
		"strategy.checks.job.backoffLimit":                DefaultJobCheckBackoffLimit,
		"strategy.checks.job.activeDeadlineSeconds":       DefaultJobCheckActiveDeadlineSeconds,
		"schema.check.backoffLimit":                       DefaultCheckBackoffLimit,
		"schema.check.activeDeadlineSeconds":              DefaultCheckActiveDeadlineSeconds,
		"strategy.checks.intervalSeconds":                 DefaultMeasurementIntervalSeconds,
		"strategy.checks.count":                           DefaultMeasurementCount,
		"strategy.checks.initialDelaySeconds":             DefaultMeasurementInitialDelaySeconds,
		"strategy.checks.failureLimit":                    DefaultFailureLimit,
		"strategy.checks.inconclusiveLimit":               DefaultInconclusiveLimit,
		"strategy.checks.consecutiveErrorLimit":           DefaultConsecutiveErrorLimit,
		"strategy.checks.minSuccessful":                   DefaultMinSuccessful,
		"strategy.checks.timeoutSeconds":                  DefaultMeasurementTimeoutSeconds,
	}
	// Inside a list element the CRD declares no default (hack/crdtrim removes them: a GitOps diff
	// replaces a list whole, so a default filled in one element is drift); the accessors apply
	// the Go constants alone there.
	for p := range want {
		if strings.HasPrefix(p, "strategy.checks.") {
			delete(want, p)
		}
	}
	got := specDefaults(t)
	var paths []string
	for p := range got {
		paths = append(paths, p)
	}
	for p := range want {
		if _, ok := got[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, ok := want[p]
		if !ok {
			t.Errorf("spec.%s: the CRD defaults it to %v, but api/v1alpha1 has no Default constant for it", p, got[p])
			continue
		}
		g, ok := got[p]
		if !ok {
			t.Errorf("spec.%s: the CRD declares no default; the Go default is %v", p, w)
			continue
		}
		if wj := jsonValue(t, w); !reflect.DeepEqual(g, wj) {
			t.Errorf("spec.%s: the CRD defaults it to %#v, the Go constant is %#v", p, g, wj)
		}
	}
}

// TestAccessorDefaults checks that an empty strategy and migration read as the documented
// defaults, and that set values (zeros included) are returned as they are.
func TestAccessorDefaults(t *testing.T) {
	var s RolloutStrategy
	if got := s.MaxSurgeOrDefault(); got != intstr.FromString("25%") {
		t.Errorf("MaxSurgeOrDefault() = %v, want 25%%", got.String())
	}
	if got := s.MaxUnavailableOrDefault(); got != intstr.FromInt32(0) {
		t.Errorf("MaxUnavailableOrDefault() = %v, want 0", got.String())
	}
	if got := s.MinReadySecondsOrDefault(); got != 0 {
		t.Errorf("MinReadySecondsOrDefault() = %d, want 0", got)
	}
	if got := s.BakeSecondsOrDefault(); got != 60 {
		t.Errorf("BakeSecondsOrDefault() = %d, want 60", got)
	}
	if got := s.Bake().String(); got != "1m0s" {
		t.Errorf("Bake() = %s, want 1m0s", got)
	}
	if got := s.ProgressDeadlineSecondsOrDefault(); got != 600 {
		t.Errorf("ProgressDeadlineSecondsOrDefault() = %d, want 600", got)
	}
	if got := s.ProgressDeadline().String(); got != "10m0s" {
		t.Errorf("ProgressDeadline() = %s, want 10m0s", got)
	}
	if got := s.FailurePolicyOrDefault(); got != FailurePolicyRollback {
		t.Errorf("FailurePolicyOrDefault() = %s, want Rollback", got)
	}
	if got := s.RevisionHistoryLimitOrDefault(); got != 2 {
		t.Errorf("RevisionHistoryLimitOrDefault() = %d, want 2", got)
	}
	var m MigrationSpec
	if got := m.BackoffLimitOrDefault(); got != 2 {
		t.Errorf("BackoffLimitOrDefault() = %d, want 2", got)
	}
	if got := m.ActiveDeadlineSecondsOrDefault(); got != 600 {
		t.Errorf("ActiveDeadlineSecondsOrDefault() = %d, want 600", got)
	}

	set := RolloutStrategy{
		MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("10%")),
		MinReadySeconds: ptr.To(int32(5)), BakeSeconds: ptr.To(int32(0)), ProgressDeadlineSeconds: ptr.To(int32(30)),
		FailurePolicy: FailurePolicyHalt, RevisionHistoryLimit: ptr.To(int32(0)),
	}
	if set.MaxSurgeOrDefault() != intstr.FromInt32(0) || set.MaxUnavailableOrDefault() != intstr.FromString("10%") ||
		set.MinReadySecondsOrDefault() != 5 || set.Bake() != 0 || set.ProgressDeadlineSecondsOrDefault() != 30 ||
		set.FailurePolicyOrDefault() != FailurePolicyHalt || set.RevisionHistoryLimitOrDefault() != 0 {
		t.Errorf("a set strategy does not read back as set: %+v", set)
	}
	m = MigrationSpec{BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(1))}
	if m.BackoffLimitOrDefault() != 0 || m.ActiveDeadlineSecondsOrDefault() != 1 {
		t.Errorf("a set migration does not read back as set: %+v", m)
	}
}

// TestEmptyStrategyMarshalsWithoutZeros checks what a Go client sends for an empty strategy:
// nothing that would override a CRD default.
func TestEmptyStrategyMarshalsWithoutZeros(t *testing.T) {
	b, err := json.Marshal(RoutingServiceSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"strategy":{}`) {
		t.Errorf("empty spec marshals as %s, want \"strategy\":{}", b)
	}
	for _, field := range []string{"minReadySeconds", "bakeSeconds", "progressDeadlineSeconds", "revisionHistoryLimit", "failurePolicy", "backoffLimit", "activeDeadlineSeconds", "maxSurge", "maxUnavailable"} {
		if strings.Contains(string(b), `"`+field+`"`) {
			t.Errorf("empty spec marshals %s: %s", field, b)
		}
	}
}
