package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// defaultReportPath is where the kubelet reads a container's termination message unless the pod
// says otherwise; it exists only inside a Kubernetes container.
const defaultReportPath = "/dev/termination-log"

// errHelp asks for the help text.
var errHelp = errors.New("help requested")

// config is a parsed command line.
type config struct {
	command string // report or run
	tool    tool
	// where is the table to read: the tool's defaults overridden by --table and --schema.
	where target
	// connConfig is the parsed database URL.
	connConfig *pgx.ConnConfig
	// reportPath is where the report goes; "-" for stdout only. defaultPath says it is
	// /dev/termination-log because neither --report-path nor $TERMINATION_MESSAGE_PATH is set.
	reportPath  string
	defaultPath bool
	timeout     time.Duration
	// require is --require: the version the database must be at or above (report only; "" when
	// not given).
	require string
	// limits bound what the read-only transaction waits for inside the database.
	limits sessionLimits
	// argv is the command run runs.
	argv []string
	// redact removes the database password from text printed to stderr.
	redact *redactor
	// toolError is the tail of the command's stderr when run's command failed (redacted); the
	// report carries it.
	toolError string
}

// newFlagSet defines the flags of report and run (they share all of them).
func newFlagSet(command string) (*flag.FlagSet, *flagValues) {
	fs := flag.NewFlagSet(progName+" "+command, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed by realMain, help is helpText
	v := &flagValues{}
	fs.StringVar(&v.tool, "tool", "", "the migration tool whose table to read: "+toolNames())
	fs.StringVar(&v.table, "table", "", "the tool's table (default: the tool's own)")
	fs.StringVar(&v.schema, "schema", "", "the PostgreSQL schema holding the table (default: the search_path; atlas: atlas_schema_revisions)")
	fs.StringVar(&v.lockTable, "lock-table", "", "liquibase only: its lock table (default databasechangeloglock)")
	fs.StringVar(&v.urlEnv, "database-url-env", "DATABASE_URL", "the environment variable holding the database URL")
	fs.StringVar(&v.reportPath, "report-path", "", "where to write the report (default $TERMINATION_MESSAGE_PATH, else /dev/termination-log; - for stdout only)")
	fs.DurationVar(&v.timeout, "timeout", 30*time.Second, "bounds connecting to the database and reading the version")
	fs.DurationVar(&v.lockTimeout, "lock-timeout", defaultLockTimeout, "the longest wait for a lock on the tool's table (PostgreSQL lock_timeout)")
	if command == "report" {
		fs.StringVar(&v.require, "require", "", "exit 4 when the database is below this version (a dotted numeric version)")
	}
	return fs, v
}

type flagValues struct {
	tool, table, schema, lockTable, urlEnv, reportPath, require string
	timeout, lockTimeout                                        time.Duration
}

// parseArgs parses the arguments of report or run, and the database URL from the environment.
// The returned config's redactor is usable even with an error.
func parseArgs(command string, args []string, getenv func(string) string) (config, error) {
	cfg := config{command: command, redact: newRedactor("")}
	fs, v := newFlagSet(command)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, errHelp
		}
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	switch {
	case v.tool == "":
		return cfg, fmt.Errorf("--tool is required: one of %s", toolNames())
	case command == "report" && fs.NArg() > 0:
		return cfg, fmt.Errorf("report takes no arguments, got %q", fs.Args())
	case command == "run" && fs.NArg() == 0:
		return cfg, errors.New("run needs the migration command after --, e.g. run --tool goose -- goose up")
	case v.timeout <= 0:
		return cfg, fmt.Errorf("--timeout must be positive, got %s", v.timeout)
	case v.lockTimeout <= 0:
		return cfg, fmt.Errorf("--lock-timeout must be positive, got %s", v.lockTimeout)
	case v.lockTimeout < time.Millisecond:
		// PostgreSQL counts it in milliseconds, and 0 would mean no limit at all.
		return cfg, fmt.Errorf("--lock-timeout must be at least 1ms, got %s", v.lockTimeout)
	case v.lockTimeout >= v.timeout && set["lock-timeout"]:
		return cfg, fmt.Errorf("--lock-timeout (%s) must be shorter than --timeout (%s)", v.lockTimeout, v.timeout)
	case v.lockTimeout >= v.timeout:
		// The default with a short --timeout: half of it, so the lock wait still ends first.
		v.lockTimeout = max(v.timeout/2, time.Millisecond)
	case set["table"] && v.table == "":
		return cfg, errors.New("--table must not be empty")
	case v.urlEnv == "":
		return cfg, errors.New("--database-url-env must not be empty")
	case set["require"] && !schemaversion.Valid(v.require):
		return cfg, fmt.Errorf("--require %q is not a version: want a dotted numeric version such as 9 or 2026.10.1", v.require)
	}
	cfg.require = v.require
	t, ok := tools[v.tool]
	if !ok {
		return cfg, fmt.Errorf("unknown tool %q: want one of %s", v.tool, toolNames())
	}
	if set["lock-table"] && t.name != "liquibase" {
		return cfg, fmt.Errorf("--lock-table is for --tool liquibase, not %s", t.name)
	}
	cfg.tool, cfg.timeout, cfg.argv = t, v.timeout, fs.Args()
	cfg.limits = sessionLimits{lock: v.lockTimeout, statement: v.timeout}
	cfg.where = target{schema: t.schema, table: t.table, lockTable: "databasechangeloglock"}
	if set["schema"] {
		cfg.where.schema = v.schema
	}
	if v.table != "" {
		cfg.where.table = v.table
	}
	if v.lockTable != "" {
		cfg.where.lockTable = v.lockTable
	}

	switch {
	case v.reportPath != "":
		cfg.reportPath = v.reportPath
	case getenv("TERMINATION_MESSAGE_PATH") != "":
		cfg.reportPath = getenv("TERMINATION_MESSAGE_PATH")
	default:
		cfg.reportPath, cfg.defaultPath = defaultReportPath, true
	}

	url := getenv(v.urlEnv)
	if url == "" {
		return cfg, fmt.Errorf("the environment variable %s is not set or empty: it must hold the database URL (in Kubernetes, from a Secret with valueFrom.secretKeyRef)", v.urlEnv)
	}
	// The redactor knows the password before pgx sees the URL, so that no message of pgx's, not
	// even one about a URL it cannot parse, prints it.
	cfg.redact = newRedactor(url, getenv("PGPASSWORD"))
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's parse errors quote pieces of the string ("invalid percent-encoded token:
		// \"Hunter2%\""), which can be part of a password the redactor cannot know the bounds
		// of: none of it is printed.
		return cfg, fmt.Errorf("the database URL in %s cannot be used: it does not parse (the parser's message is not shown, as it may quote part of the password); in a URL, escape the password's reserved characters (%% / @ : ? # and space) as %%XX, or use the key/value form with host, user, password and dbname keys", v.urlEnv)
	}
	// pgx may also have found a password in $PGPASSFILE or ~/.pgpass.
	cfg.redact = newRedactor(url, getenv("PGPASSWORD"), cc.Password)
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = progName
	}
	// No named prepared statements: they break behind a PgBouncer in transaction mode.
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.connConfig = cc
	return cfg, nil
}
