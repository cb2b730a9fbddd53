package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitOpsDocShowsTheFluxSamples fails when docs/gitops.md does not show each Flux sample of
// config/samples/flux (the objects the e2e story TestFluxSyncsSchemaRollout creates) as it is,
// comments aside: the setup a reader copies is the one the tests run.
func TestGitOpsDocShowsTheFluxSamples(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(filepath.Join(root, "config", "samples", "flux", "*.yaml"))
	if err != nil || len(samples) < 2 {
		t.Fatalf("Flux samples: %v %v", samples, err)
	}
	for _, p := range samples {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(string(raw), "\n") {
			if trimmed := strings.TrimSpace(line); trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				kept = append(kept, line)
			}
		}
		if body := strings.Join(kept, "\n"); !strings.Contains(string(doc), body) {
			t.Errorf("docs/gitops.md does not show %s as it is (comments aside):\n%s", filepath.Base(p), body)
		}
	}
}
