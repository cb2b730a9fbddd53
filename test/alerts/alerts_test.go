//go:build e2e

// Package alerts checks the chart's PrometheusRule with promtool (the upstream
// github.com/prometheus/prometheus/cmd/promtool of the version hack/prometheus pins, built from
// source by `make prometheus-binary`): the rules as rendered pass `promtool check rules`, and
// testdata/rules_test.yaml, series written minute by minute, says when each alert fires and when
// it must not. Nothing listens and nothing is scraped: promtool evaluates the rules on its own.
package alerts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
	"github.com/schemagate/schemagate/test/install"
)

// EnvPromtool names the promtool binary to run instead of bin/k8s/promtool.
const EnvPromtool = "SCHEMAGATE_PROMTOOL"

// promtool finds the binary: $SCHEMAGATE_PROMTOOL, $SCHEMAGATE_BIN/k8s/promtool (make
// test-e2e), or bin/k8s/promtool in this checkout.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvPromtool); p != "" {
		return p
	}
	var tried []string
	if d := os.Getenv("SCHEMAGATE_BIN"); d != "" {
		tried = append(tried, filepath.Join(d, "k8s", "promtool"))
	}
	tried = append(tried, filepath.Join(install.RepoRoot(), "bin", "k8s", "promtool"))
	for _, p := range tried {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("no promtool at %s: run `make prometheus-binary` (hack/build-binaries.sh promtool), or set %s", strings.Join(tried, " nor "), EnvPromtool)
	return ""
}

// rulesFile renders the chart for release schemagate in schemagate-system with the
// PrometheusRule on and values (merged over that), and writes its spec (the groups) into dir as
// rules.yaml, a rules file as Prometheus reads one.
func rulesFile(t *testing.T, dir string, values map[string]any) string {
	t.Helper()
	rule := map[string]any{"enabled": true}
	for k, v := range values {
		rule[k] = v
	}
	r, err := install.RenderChart(install.ChartDir(), "schemagate", "schemagate-system", map[string]any{
		"image":      map[string]any{"repository": "registry.example/schemagate"},
		"monitoring": map[string]any{"prometheusRule": rule},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := installer.SplitDocuments([]byte(r.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	var spec any
	for _, o := range objs {
		if o.Kind == "PrometheusRule" {
			if spec != nil {
				t.Fatal("two PrometheusRules")
			}
			spec = o.Raw["spec"]
		}
	}
	if spec == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Fatal(err)
	}
	return string(out)
}

// The seven alerts as rendered are valid rules (their expressions parse, their annotations'
// templates too), and they behave as testdata/rules_test.yaml says: a stall longer than `for`
// fires and a shorter one does not; a migration past 80% of its deadline fires, one at 80% does
// not; a dirty schema fires; a shard's first rollback (its counter served at 0, then 1) fires
// for the window and then resolves; a shard whose autoscaler asks for its maximum for `for`
// fires, one below it or there briefly does not; a manager with no target up fires after `for`;
// reconciles that all fail fire, and requeues (with or without a few errors) do not.
func TestPrometheusRule(t *testing.T) {
	dir := t.TempDir()
	rulesFile(t, dir, nil)
	out := run(t, dir, "check", "rules", "rules.yaml")
	if !strings.Contains(out, "SUCCESS: 7 rules found") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(t, dir, "test", "rules", "rules_test.yaml")
	t.Logf("promtool test rules:\n%s", out)
}

// The values change the rules: a longer `for`, another ratio and job, an alert turned off; and
// the unit tests, written for the defaults, then fail, so they can fail.
func TestPrometheusRuleValues(t *testing.T) {
	dir := t.TempDir()
	rulesFile(t, dir, map[string]any{
		"managerJob": "manager",
		"alerts": map[string]any{
			"stalled":               map[string]any{"for": "1h"},
			"migrationNearDeadline": map[string]any{"deadlineRatio": 0.5},
			"schemaDirty":           map[string]any{"enabled": false},
		},
	})
	if out := run(t, dir, "check", "rules", "rules.yaml"); !strings.Contains(out, "SUCCESS: 6 rules found") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	for _, want := range []string{"for: 1h", "> 0.5", `up{job="manager"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("rules lack %q:\n%s", want, b)
		}
	}
	tests, _ := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	_ = os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644)
	cmd := exec.Command(promtool(t), "test", "rules", "rules_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("the default's unit tests pass against other values:\n%s", out)
	}
}
