package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// maxCatalogBytes bounds the catalog file probe report reads back.
const maxCatalogBytes = 64 << 20

// probeConfig is a parsed probe command line.
type probeConfig struct {
	step       string // copy or report
	scratchURL string
	sourceURL  string // copy only
	catalog    string
	reportPath string
	maxBytes   int
	timeout    time.Duration
	redact     *redactor
}

// runProbe runs `probe copy` or `probe report` (docs/schemagate-schema.md, "probe"): the steps
// of a migration probe's pod around the team's own migration container, which runs between them
// on the scratch database.
func runProbe(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cfg, err := parseProbeArgs(args, getenv)
	log := newLogger(stderr, cfg.redact)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, helpText)
		return exitClean
	}
	if err != nil {
		log.printf("%s probe: %v; see %s --help", progName, err, progName)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	switch cfg.step {
	case "install":
		err = probeInstall(cfg.catalog)
	case "copy":
		err = probeCopy(ctx, cfg, stderr)
	default:
		err = probeReport(ctx, cfg, stdout)
	}
	if err != nil {
		log.printf("%s probe %s: %v", progName, cfg.step, err)
		return exitNoReport
	}
	return exitClean
}

func parseProbeArgs(args []string, getenv func(string) string) (probeConfig, error) {
	cfg := probeConfig{redact: newRedactor("")}
	if len(args) > 0 && args[0] == "install" {
		return parseInstallArgs(args[1:])
	}
	if len(args) == 0 || (args[0] != "copy" && args[0] != "report") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return cfg, errHelp
		}
		return cfg, errors.New("probe needs a step: install, copy or report")
	}
	cfg.step = args[0]
	fs := flag.NewFlagSet(progName+" probe "+cfg.step, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	urlEnv := fs.String("database-url-env", "DATABASE_URL", "the environment variable holding the scratch database's URL")
	sourceEnv := fs.String("source-url-env", "SOURCE_DATABASE_URL", "copy: the environment variable holding the URL of the database to copy (read-only)")
	fs.StringVar(&cfg.catalog, "catalog", "", "the file the catalog before the migration is written to (copy) and read from (report)")
	fs.StringVar(&cfg.reportPath, "report-path", "", "report: where to write the probe report (default $TERMINATION_MESSAGE_PATH, else /dev/termination-log; - for stdout)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "bounds the step")
	fs.IntVar(&cfg.maxBytes, "max-bytes", schemadiff.MaxBytes, "report: the report's bound in bytes (the least severe changes are left out to fit; the verdict is kept)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, errHelp
		}
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("probe %s takes no arguments, got %q", cfg.step, fs.Args())
	case cfg.catalog == "":
		return cfg, errors.New("--catalog is required")
	case cfg.timeout <= 0:
		return cfg, fmt.Errorf("--timeout must be positive, got %s", cfg.timeout)
	case cfg.maxBytes < 256:
		return cfg, fmt.Errorf("--max-bytes must be at least 256, got %d", cfg.maxBytes)
	}
	cfg.scratchURL = getenv(*urlEnv)
	if cfg.step == "copy" {
		cfg.sourceURL = getenv(*sourceEnv)
	}
	cfg.redact = newRedactor(cfg.scratchURL, passwordOf(cfg.sourceURL), getenv("PGPASSWORD"))
	if cfg.scratchURL == "" {
		return cfg, fmt.Errorf("the environment variable %s is not set or empty: it must hold the scratch database's URL", *urlEnv)
	}
	if cfg.step == "copy" && cfg.sourceURL == "" {
		return cfg, fmt.Errorf("the environment variable %s is not set or empty: it must hold the URL of the database to copy", *sourceEnv)
	}
	switch {
	case cfg.reportPath != "":
	case getenv("TERMINATION_MESSAGE_PATH") != "":
		cfg.reportPath = getenv("TERMINATION_MESSAGE_PATH")
	default:
		cfg.reportPath = defaultReportPath
	}
	return cfg, nil
}

// probeCopy brings the scratch database to the source's schema: its schema with no data
// (pg_dump --schema-only, no owners or privileges), then the rows of the migration tools' own
// tables (schemadiff.ToolTables), so the team's migration command sees the version the source is
// at and runs only what is newer. It then writes the scratch database's catalog to cfg.catalog.
// The source is only read: pg_dump needs SELECT on its tables (pg_read_all_data does).
func probeCopy(ctx context.Context, cfg probeConfig, stderr io.Writer) error {
	if err := waitForScratch(ctx, cfg.scratchURL); err != nil {
		return err
	}
	if err := pipeDump(ctx, cfg, []string{"--schema-only", "--no-owner", "--no-privileges", "--no-publications", "--no-subscriptions"}, stderr); err != nil {
		return fmt.Errorf("copying the schema: %w", err)
	}
	source, err := pgx.Connect(ctx, cfg.sourceURL)
	if err != nil {
		return fmt.Errorf("connecting to the source database: %w", err)
	}
	defer source.Close(context.Background())
	rows, err := source.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relname = ANY($1) AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`, schemadiff.ToolTables)
	if err != nil {
		return fmt.Errorf("finding the migration tools' tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("finding the migration tools' tables: %w", err)
	}
	for _, t := range tables {
		if err := pipeDump(ctx, cfg, []string{"--data-only", "--table=" + t}, stderr); err != nil {
			return fmt.Errorf("copying the rows of %s: %w", t, err)
		}
	}
	scratch, err := pgx.Connect(ctx, cfg.scratchURL)
	if err != nil {
		return fmt.Errorf("connecting to the scratch database: %w", err)
	}
	defer scratch.Close(context.Background())
	cat, err := schemadiff.Capture(ctx, scratch)
	if err != nil {
		return err
	}
	b, err := json.Marshal(cat)
	if err != nil {
		return err
	}
	// Readable by the report step, which may run as another user (the schemagate image's).
	return os.WriteFile(cfg.catalog, b, 0o644)
}

// pipeDump runs pg_dump with args on the source into psql on the scratch database, stopping at
// psql's first error. The URLs go in as --dbname (a connection string), and every line either
// prints is redacted.
func pipeDump(ctx context.Context, cfg probeConfig, args []string, stderr io.Writer) error {
	dump := exec.CommandContext(ctx, "pg_dump", append(args, "--dbname="+cfg.sourceURL)...)
	load := exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname="+cfg.scratchURL)
	var dumpErr, loadErr bytes.Buffer
	dump.Stderr, load.Stderr = &dumpErr, &loadErr
	load.Stdout = io.Discard
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return err
	}
	load.Stdin = pipe
	if err := load.Start(); err != nil {
		return fmt.Errorf("psql: %w", err)
	}
	if err := dump.Run(); err != nil {
		_ = load.Wait()
		return fmt.Errorf("pg_dump: %v: %s", err, cfg.redact.Redact(strings.TrimSpace(dumpErr.String())))
	}
	if err := load.Wait(); err != nil {
		return fmt.Errorf("psql: %v: %s", err, cfg.redact.Redact(strings.TrimSpace(loadErr.String())))
	}
	if s := strings.TrimSpace(loadErr.String()); s != "" {
		fmt.Fprintln(stderr, cfg.redact.Redact(s))
	}
	return nil
}

// probeReport captures the scratch database's catalog after the migration ran, compares it with
// the one probeCopy wrote, and writes the probe report (pkg/schemadiff's format) to the report
// path: the probe pod's termination message, which schemagate reads.
func probeReport(ctx context.Context, cfg probeConfig, stdout io.Writer) error {
	f, err := os.Open(cfg.catalog)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > maxCatalogBytes {
		return fmt.Errorf("%s is over %d bytes", cfg.catalog, maxCatalogBytes)
	}
	before := &schemadiff.Catalog{}
	if err := json.Unmarshal(raw, before); err != nil {
		return fmt.Errorf("reading %s: %w", cfg.catalog, err)
	}
	conn, err := pgx.Connect(ctx, cfg.scratchURL)
	if err != nil {
		return fmt.Errorf("connecting to the scratch database: %w", err)
	}
	defer conn.Close(context.Background())
	after, err := schemadiff.Capture(ctx, conn)
	if err != nil {
		return err
	}
	b, err := schemadiff.NewReport(schemadiff.Diff(before, after)).EncodeWithin(cfg.maxBytes)
	if err != nil {
		return err
	}
	if cfg.reportPath == "-" {
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	fmt.Fprintln(stdout, string(b))
	return os.WriteFile(cfg.reportPath, b, 0o644)
}

// passwordOf is the password of a database URL ("" for none, or a string that is not a URL).
func passwordOf(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	p, _ := parsed.User.Password()
	return p
}

// parseInstallArgs reads `probe install --to FILE`; the path is kept in cfg.catalog.
func parseInstallArgs(args []string) (probeConfig, error) {
	cfg := probeConfig{step: "install", redact: newRedactor(""), timeout: time.Minute}
	fs := flag.NewFlagSet(progName+" probe install", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.catalog, "to", "", "the file schemagate-schema copies itself to")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, errHelp
		}
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("probe install takes no arguments, got %q", fs.Args())
	case cfg.catalog == "":
		return cfg, errors.New("--to is required")
	}
	return cfg, nil
}

// probeInstall copies this executable to path (mode 0755): the probe pod's first step puts
// schemagate-schema into a volume the database image's steps run it from.
func probeInstall(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// waitForScratch waits, until ctx ends, for the scratch database to accept a connection: the
// probe pod's sidecar may still be starting when the copy step does.
func waitForScratch(ctx context.Context, scratchURL string) error {
	for {
		conn, err := pgx.Connect(ctx, scratchURL)
		if err == nil {
			return conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the scratch database does not answer: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
