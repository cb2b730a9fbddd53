package probe

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schemagate/schemagate/test/postgres"
)

var update = flag.Bool("update", false, "rewrite testdata/probes.golden from what the probes report")

var pg *postgres.Server

func TestMain(m *testing.M) { os.Exit(postgres.RunTests(m, &pg)) }

// TestProbes runs each tool, for real, on migration sets: the example router's naive change and
// its expand/contract split (golang-migrate), a migration that fails and leaves golang-migrate's
// dirty flag, goose's NO TRANSACTION with CREATE INDEX CONCURRENTLY and a file with its own
// COMMITs. One scratch database serves them all, emptied by each probe. The reports are compared
// with testdata/probes.golden (go test -update rewrites it).
func TestProbes(t *testing.T) {
	ctx := context.Background()
	if err := pg.CreateDatabase(ctx, "scratch"); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "examples", "edge-router")
	cases := []struct {
		name     string
		tool     Tool
		dir      string
		from, to string
	}{
		{"the naive change: upstream to jsonb in place", GolangMigrate, filepath.Join(example, "migrations-naive"), "1", "2"},
		{"its expand", GolangMigrate, filepath.Join(example, "migrations-expand-contract"), "1", "2"},
		{"its contract", GolangMigrate, filepath.Join(example, "migrations-expand-contract"), "2", "3"},
		{"an expand-only migration", GolangMigrate, filepath.Join(example, "migrations"), "1", "2"},
		{"a migration that fails (golang-migrate is left dirty)", GolangMigrate, filepath.Join("testdata", "golang-migrate-failing"), "1", "2"},
		{"goose: CREATE INDEX CONCURRENTLY, NO TRANSACTION", Goose, filepath.Join("testdata", "goose"), "1", "2"},
		{"goose: a file with its own COMMITs", Goose, filepath.Join("testdata", "goose"), "2", "3"},
		{"goose: from an empty database", Goose, filepath.Join("testdata", "goose"), "0", "1"},
	}
	var got strings.Builder
	for _, c := range cases {
		res, err := Run(ctx, Request{Tool: c.tool, Migrations: os.DirFS(c.dir), ScratchURL: pg.URL("scratch"), From: c.from, To: c.to})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fmt.Fprintf(&got, "== %s (%s, %s → %s)\n%s\n\n", c.name, c.tool, c.from, c.to, strings.Join(res.Report.Lines(), "\n"))
		t.Logf("%s: replay %v, migration %v", c.name, res.Replay.Round(time.Millisecond), res.Migration.Round(time.Millisecond))
	}
	golden := filepath.Join("testdata", "probes.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("the probe reports differ from %s (go test -update rewrites it):\n%s", golden, got.String())
	}
}

// A probe that cannot say what the migration does is an error, not a verdict: a replay to the
// database's version that fails, a target not above it, a version the tools cannot number, a
// tool it does not know.
func TestProbeRefuses(t *testing.T) {
	ctx := context.Background()
	if err := pg.CreateDatabase(ctx, "refuses"); err != nil {
		t.Fatal(err)
	}
	failing := os.DirFS(filepath.Join("testdata", "golang-migrate-failing"))
	for name, r := range map[string]Request{
		"a replay that fails": {Tool: GolangMigrate, Migrations: failing, From: "2", To: "3"},
		"a target not above":  {Tool: GolangMigrate, Migrations: failing, From: "2", To: "2"},
		"a dotted version":    {Tool: GolangMigrate, Migrations: failing, From: "1", To: "2026.10.1"},
		"an unknown tool":     {Tool: "flyway", Migrations: failing, From: "1", To: "2"},
		"no such migration":   {Tool: Goose, Migrations: os.DirFS(filepath.Join("testdata", "goose")), From: "3", To: "4"},
	} {
		r.ScratchURL = pg.URL("refuses")
		if res, err := Run(ctx, r); err == nil && res.Report.Verdict != "failed" {
			t.Errorf("%s: accepted, %v", name, res.Report.Lines())
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
