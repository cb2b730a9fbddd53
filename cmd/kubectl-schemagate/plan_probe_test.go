package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/schemagate/schemagate/test/postgres"
)

// sampleAt writes the sample manifest at schema version, with image tag tag, and, when contract
// is not "", a contract to that version; compat, when not nil, declares the revision's range.
func sampleAt(t *testing.T, version, tag, contract string, compat map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	containers := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	containers[0].(map[string]any)["image"] = "registry.example/edge-router:" + tag
	s := spec["schema"].(map[string]any)
	s["version"] = version
	if compat != nil {
		s["compatibility"] = compat
	}
	if contract != "" {
		s["contract"] = map[string]any{"version": contract, "migration": s["migration"]}
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "edge-router.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// plan --migrations probes the example router's migrations for real (golang-migrate on a real
// PostgreSQL), offline against a base manifest, as the example CI job does: the naive in-place
// change breaks the base revision, whose range is assumed (exit 4, and the fixes); its expand
// passes on the assumption, which is said; its contract breaks the manifest's own revision unless
// that declares the contracted schema (then the declaration stands, with a warning).
func TestPlanProbesTheMigration(t *testing.T) {
	pg := scratchServer(t)
	example := filepath.Join("..", "..", "examples", "edge-router")
	v1 := sampleAt(t, "1", "v1", "", nil)
	v2 := sampleAt(t, "2", "v2", "", nil)
	v2Declared := sampleAt(t, "2", "v2", "", map[string]any{"min": "2", "max": "3"})
	for _, c := range []struct {
		name, base, next, migrations string
		exit                         int
		want                         []string
	}{
		{"the naive change", v1, v2, "migrations-naive", planProbeFailed, []string{
			"verdict: breaking", "breaking column-type routes.upstream: text → jsonb [rewrites the table]",
			"! breaks revision", "(serving us-east, eu-west, ap-south)", "narrows it to [1, 1]", "fix: declare the range", "! closes the way back to revision"}},
		{"its expand", v1, v2, "migrations-expand-contract", 0, []string{
			"verdict: conditional", "passes only on its assumed range [1, ∞)"}},
		{"its contract, nothing declared", v2, sampleAt(t, "2", "v2", "3", nil), "migrations-expand-contract", planProbeFailed, []string{
			"schema 2 → 3", "breaking column-dropped routes.upstream", "! breaks revision"}},
		{"its contract, the JSON binary declares [2, 3]", v2Declared, sampleAt(t, "2", "v2", "3", map[string]any{"min": "2", "max": "3"}), "migrations-expand-contract", 0, []string{
			"breaking column-dropped routes.upstream", "declares [2, 3], which contains 3, but the probe reports a breaking change"}},
		{"its contract, the range declared in the contract's own change", v2, sampleAt(t, "2", "v2", "3", map[string]any{"min": "2", "max": "3"}), "migrations-expand-contract", 0, []string{
			"(this manifest's revision) declares [2, 3]", "! closes the way back to revision"}},
	} {
		out, err := planOffline(t, planOptions{file: c.next, probe: probeOptions{
			migrations: filepath.Join(example, c.migrations), tool: "golang-migrate", scratch: pg.URL("scratch"), base: c.base, failOn: []string{failOnBreaking},
		}}, "", "")
		code := 0
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if code != c.exit {
			t.Errorf("%s: exit %d, want %d (%v)\n%s", c.name, code, c.exit, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the output lacks %q:\n%s", c.name, w, out)
			}
		}
	}
}

// The example CI job (examples/ci/schema-probe.yaml) runs plan with flags plan has.
func TestTheExampleCIJobUsesPlansFlags(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "ci", "schema-probe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	cmd := newPlanCommand(genericclioptions.NewConfigFlags(false), genericiooptions.IOStreams{}, nil)
	seen := 0
	for _, job := range wf.Jobs {
		for _, step := range job.Steps {
			if !strings.Contains(step.Run, "kubectl-schemagate plan") {
				continue
			}
			for _, f := range strings.Fields(strings.ReplaceAll(step.Run, "\\", " ")) {
				if name, ok := strings.CutPrefix(f, "--"); ok {
					seen++
					if cmd.Flags().Lookup(name) == nil {
						t.Errorf("the example runs plan with --%s, which plan does not have", name)
					}
				} else if n, ok := strings.CutPrefix(f, "-"); ok && cmd.Flags().ShorthandLookup(n) == nil {
					t.Errorf("the example runs plan with -%s, which plan does not have", n)
				}
			}
		}
	}
	if seen < 4 {
		t.Fatalf("the example runs plan with %d flags: it no longer probes", seen)
	}
}

// Against the live object, the probe starts from the version its status confirms and reads the
// report against the revisions that serve: v1 (its range assumed) serves every shard of the
// healthy state, and the naive change to 2 breaks it there (exit 4, with or without --exit-code).
func TestPlanProbesAgainstTheLiveObject(t *testing.T) {
	pg := scratchServer(t)
	w := newWorld(t, "healthy", "2026-12-02T03:10:00Z")
	goldenState(t, "healthy").build(w)
	file := manifestOf(t, w, func(spec, schema map[string]any) {
		spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "app:v2"
		schema["version"] = "2"
	})
	naive := filepath.Join("..", "..", "examples", "edge-router", "migrations-naive")
	for _, extra := range [][]string{nil, {"--exit-code"}} {
		args := append([]string{"-f", file, "--migrations", naive, "--scratch-database", pg.URL("scratch")}, extra...)
		res := planAt(w.clients(), w.now, args...)
		if res.code != planProbeFailed {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", extra, res.code, planProbeFailed, res.out, res.err)
		}
		for _, want := range []string{"compared with the live object", "Migration probe: schema 1 → 2 on a scratch database",
			"! breaks revision cc447w65w7 (serving us-east, eu-west, ap-south)"} {
			if !strings.Contains(res.out, want) {
				t.Errorf("%v: plan lacks %q:\n%s", extra, want, res.out)
			}
		}
	}
}

// What a newcomer gets wrong is refused before anything runs, naming the flag; and with neither a
// live object nor --base, a breaking change is read against the revision serving now, taken to run
// on --from with its range assumed: never a silent pass.
func TestPlanProbeRefusesMistakes(t *testing.T) {
	pg := scratchServer(t)
	example := filepath.Join("..", "..", "examples", "edge-router")
	naive := filepath.Join(example, "migrations-naive")
	v1, v2 := sampleAt(t, "1", "v1", "", nil), sampleAt(t, "2", "v2", "", nil)
	for _, c := range []struct {
		name string
		p    probeOptions
		exit int
		want string
	}{
		{"--from against --base", probeOptions{migrations: naive, base: v1, from: "0"}, 1, "--from 0 disagrees with --base's spec.schema.version (1)"},
		{"no such directory", probeOptions{migrations: filepath.Join(example, "nope"), base: v1}, 1, "no such file or directory"},
		{"the parent directory", probeOptions{migrations: example, base: v1}, 1, "holds no golang-migrate migration files (*.up.sql)"},
		{"another tool", probeOptions{migrations: naive, base: v1, tool: "flyway"}, 1, "the probe replays golang-migrate or goose migrations"},
		{"--base without --migrations", probeOptions{base: v1}, 1, "add --migrations DIR"},
		{"--from alone, a breaking change", probeOptions{migrations: naive, from: "1"}, planProbeFailed, "breaks revision (the revision serving now)"},
	} {
		c.p.scratch, c.p.failOn = pg.URL("scratch"), []string{failOnBreaking}
		if c.p.tool == "" {
			c.p.tool = "golang-migrate"
		}
		if c.p.migrations == "" && c.name == "--base without --migrations" {
			c.p.scratch = ""
		}
		out, err := planOffline(t, planOptions{file: v2, probe: c.p}, "", "")
		code := 0
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			code = ee.code
		case err != nil:
			code = 1
		}
		text := out
		if err != nil {
			text += "\nerror: " + err.Error()
		}
		if code != c.exit || !strings.Contains(text, c.want) {
			t.Errorf("%s: exit %d, want %d with %q:\n%s", c.name, code, c.exit, c.want, text)
		}
	}
}

// scratchServer starts a real PostgreSQL for one test, with an empty database named scratch.
func scratchServer(t *testing.T) *postgres.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, err := postgres.Start(ctx, postgres.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	if err := pg.CreateDatabase(ctx, "scratch"); err != nil {
		t.Fatal(err)
	}
	return pg
}
