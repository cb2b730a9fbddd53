package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/preview"
	"github.com/schemagate/schemagate/pkg/probe"
	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// planProbeFailed is plan's exit code when the migration probe finds what --fail-on names, or the
// migration fails on the scratch database.
const planProbeFailed = 4

// scratchEnv holds the scratch database's URL when --scratch-database is not given (a URL with a
// password stays out of the process list and the CI log).
const scratchEnv = "SCHEMAGATE_SCRATCH_DATABASE_URL"

// Values of --fail-on.
const (
	failOnBreaking = "breaking"
	failOnAssumed  = "assumed"
	failOnRollback = "rollback"
)

// probeOptions are plan's flags for the migration probe.
type probeOptions struct {
	migrations string
	tool       string
	scratch    string
	base       string
	from       string
	failOn     []string
}

func (o *probeOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.migrations, "migrations", "", "probe the migration: the directory of the migration files, run with --tool on a scratch database")
	cmd.Flags().StringVar(&o.tool, "tool", string(probe.GolangMigrate), "the migration tool of --migrations: golang-migrate or goose")
	cmd.Flags().StringVar(&o.scratch, "scratch-database", "", "a PostgreSQL database URL the probe may empty and write (never production); default $"+scratchEnv)
	cmd.Flags().StringVar(&o.base, "base", "", "with --migrations and no live object: the manifest as merged (the spec that serves now: its revision, range and schema version)")
	cmd.Flags().StringVar(&o.from, "from", "", "with --migrations: the version the database is at (default: the live status's, else --base's spec.schema.version)")
	cmd.Flags().StringSliceVar(&o.failOn, "fail-on", []string{failOnBreaking}, "what of the probe's findings exits 4: breaking (a revision it breaks), assumed (one that passes only on an assumed range), rollback (a way back it closes)")
}

// run probes the migration from the database's version to next's, and sets p.Probe. exit is
// planProbeFailed when a finding --fail-on names is there, or the migration failed; why says
// which.
func (o *probeOptions) run(ctx context.Context, p *preview.Preview, next *routingv1alpha1.RoutingService, live bool) (exit int, why, note string, err error) {
	for _, f := range o.failOn {
		if !slices.Contains([]string{failOnBreaking, failOnAssumed, failOnRollback}, f) {
			return 0, "", "", fmt.Errorf("--fail-on %q: want breaking, assumed or rollback", f)
		}
	}
	if err := o.checkMigrations(); err != nil {
		return 0, "", "", err
	}
	scratch := o.scratch
	if scratch == "" {
		scratch = os.Getenv(scratchEnv)
	}
	if scratch == "" {
		return 0, "", "", fmt.Errorf("--migrations needs a scratch database: --scratch-database or $%s", scratchEnv)
	}
	var revisions []preview.RevisionRange
	known, whose := "", ""
	switch {
	case live:
		revisions, known, whose = p.Lifecycle.Revisions, p.Lifecycle.Database, "the live status"
	case o.base != "":
		base, err := readBase(o.base)
		if err != nil {
			return 0, "", "", err
		}
		revisions, known, whose = []preview.RevisionRange{preview.BaseRevision(base)}, base.Spec.Schema.Version, "--base's spec.schema.version"
	}
	from := known
	switch {
	case o.from != "" && known != "" && o.from != known:
		return 0, "", "", fmt.Errorf("--from %s disagrees with %s (%s): leave --from out", o.from, whose, known)
	case from == "":
		from = o.from
	}
	if from == "" {
		return 0, "", "", fmt.Errorf("--migrations: the version the database is at is unknown: give --from (or --base)")
	}
	if !live && o.base == "" {
		// Nothing says which revision serves: the one that does runs on the database's version,
		// and nothing declares its range.
		revisions = []preview.RevisionRange{{Revision: "(the revision serving now)", Min: from, Assumed: true, Source: "unknown", Stable: true}}
		note = "no live object and no --base: the revision serving now is taken to run on schema " + from + " with its range assumed"
	}
	to := next.Spec.Schema.Version
	judged, rollbackOnly := slices.DeleteFunc(slices.Clone(revisions), func(r preview.RevisionRange) bool { return r.Revision == p.NextRevision }), []preview.RevisionRange(nil)
	if c := next.Spec.Schema.Contract; from == to && c != nil && c.Version != from {
		// The migration left is the contract: it runs once every shard serves the manifest's own
		// revision, which is judged; the others only lose their way back.
		to = c.Version
		judged, rollbackOnly = []preview.RevisionRange{p.Lifecycle.Next}, judged
	}
	if from == to {
		return 0, "", fmt.Sprintf("the database is at schema %s already: no migration to probe", to), nil
	}
	res, err := probe.Run(ctx, probe.Request{Tool: probe.Tool(o.tool), Migrations: os.DirFS(o.migrations), ScratchURL: scratch, From: from, To: to})
	if err != nil {
		return 0, "", "", fmt.Errorf("the migration probe could not run: %w", err)
	}
	outcome := preview.DecideProbe(res.Report, from, to, judged, rollbackOnly)
	p.Probe = &outcome
	failed := res.Report.Verdict == schemadiff.Failed ||
		(slices.Contains(o.failOn, failOnBreaking) && len(outcome.Broken) > 0) ||
		(slices.Contains(o.failOn, failOnAssumed) && len(outcome.Assumed) > 0) ||
		(slices.Contains(o.failOn, failOnRollback) && len(outcome.ClosesRollback) > 0)
	if failed {
		return planProbeFailed, outcome.Findings(), note, nil
	}
	return 0, "", note, nil
}

// checkMigrations says, before anything runs, when --migrations is not a directory of the tool's
// migration files.
func (o *probeOptions) checkMigrations() error {
	st, err := os.Stat(o.migrations)
	if err != nil {
		return fmt.Errorf("--migrations %s: %w", o.migrations, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--migrations %s is not a directory", o.migrations)
	}
	pattern := probe.Tool(o.tool).Pattern()
	if pattern == "" {
		return fmt.Errorf("--tool %q: the probe replays golang-migrate or goose migrations (for another tool, run schemagate-schema probe copy and report around it)", o.tool)
	}
	if found, _ := filepath.Glob(filepath.Join(o.migrations, pattern)); len(found) == 0 {
		return fmt.Errorf("--migrations %s holds no %s migration files (%s): give the directory that holds them", o.migrations, o.tool, pattern)
	}
	return nil
}

// readBase reads the RoutingService of the base manifest (the only one, or the one named as the
// manifest under review is).
func readBase(path string) (*routingv1alpha1.RoutingService, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	obj, err := pickRoutingService(f, path, "")
	if err != nil {
		return nil, err
	}
	base := &routingv1alpha1.RoutingService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, base); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if strings.TrimSpace(base.Spec.Schema.Version) == "" {
		return nil, fmt.Errorf("%s: no spec.schema.version", path)
	}
	return base, nil
}

// flagsNeedMigrations refuses the probe's flags without --migrations: they would do nothing.
func (o *probeOptions) flagsNeedMigrations() error {
	if o.migrations == "" && (o.base != "" || o.from != "" || o.scratch != "") {
		return fmt.Errorf("--base, --from and --scratch-database are for the migration probe: add --migrations DIR")
	}
	return nil
}
