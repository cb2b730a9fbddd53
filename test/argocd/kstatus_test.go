package argocd

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// kstatus (what Flux and Helm 4 --wait read) agrees with the Argo CD health check on every object
// of health_test.yaml: Healthy is Current, Degraded is Failed, Progressing is InProgress. Suspended
// has no kstatus of its own; a paused or held RoutingService is InProgress (Flux waits, it does
// not fail). So a contract that waits for its window is Current (the apply is done: the app
// serves), and a refused rollback is Failed.
func TestKstatusAgreesWithHealth(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases testCases
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	want := map[string]status.Status{
		"Healthy":     status.CurrentStatus,
		"Degraded":    status.FailedStatus,
		"Progressing": status.InProgressStatus,
		"Suspended":   status.InProgressStatus,
	}
	seen := map[string]bool{}
	for _, c := range cases.Tests {
		t.Run(c.InputPath, func(t *testing.T) {
			input, err := os.ReadFile(filepath.Join(dir, c.InputPath))
			if err != nil {
				t.Fatal(err)
			}
			j, err := yaml.YAMLToJSON(input)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
			// The captures are typed round trips, which drop an observedGeneration of 0; the API
			// server stores the CRD's default (0) before any reconcile, which is what kstatus reads
			// (test/e2e's gitops test checks that on a real server).
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration"); !found {
				if err := unstructured.SetNestedField(u.Object, int64(0), "status", "observedGeneration"); err != nil {
					t.Fatal(err)
				}
			}
			res, err := status.Compute(u)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[c.HealthStatus.Status]
			if !ok {
				t.Fatalf("no kstatus for health %s", c.HealthStatus.Status)
			}
			if res.Status != w {
				t.Fatalf("kstatus %s (%s), Argo CD health %s: want %s", res.Status, res.Message, c.HealthStatus.Status, w)
			}
			seen[filepath.Base(c.InputPath)] = true
		})
	}
	for _, f := range []string{"contract-pending.yaml", "rollback-refused.yaml"} {
		if !seen[f] {
			t.Errorf("health_test.yaml has no case for %s", f)
		}
	}
}
