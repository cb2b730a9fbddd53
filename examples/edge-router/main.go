// Command edge-router is schemagate's reference routing binary: a small HTTP router whose route
// table lives in PostgreSQL, and the migrations that table needs.
//
//	edge-router serve   [flags]   answer requests by Host from the route table
//	edge-router migrate [flags]   bring the database up to $SCHEMAGATE_SCHEMA_VERSION
//
// It documents how a schema-aware router should behave: it is not ready until the schema it needs
// is in place, and it keeps serving its last good table when the database goes away. The flags
// --check-schema=false and --cache-policy=fail-empty reproduce the binary of the original incident.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

const usage = `usage: edge-router serve|migrate [flags]   (edge-router <command> -h lists the flags)`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch os.Args[1] {
	case "serve":
		var cfg serveConfig
		if cfg, err = parseServeFlags(os.Args[2:]); err == nil {
			err = serve(ctx, cfg)
		}
	case "migrate":
		var cfg migrateConfig
		if cfg, err = parseMigrateFlags(os.Args[2:]); err == nil {
			err = runMigrate(ctx, cfg, os.Stdout)
		}
	default:
		err = fmt.Errorf("unknown command %q\n%s", os.Args[1], usage)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "edge-router %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// serveConfig is everything `serve` needs; tests build one directly.
type serveConfig struct {
	Listen      string
	DatabaseURL string
	Schema      int // the oldest schema version this binary reads: 1 or 2 (text), any from 1 (json)
	// TargetFormat is how the binary reads each route's target: formatText (a URL in a text
	// column, v1) or formatJSON (a JSON document {"url": …} in a jsonb column, v2). TargetColumn
	// is the column it reads it from (defaultTargetColumn).
	TargetFormat string
	TargetColumn string
	CheckSchema  bool   // /ready waits for that schema and a first load
	CachePolicy  string // policyFailEmpty or policyFailStatic
	Refresh      time.Duration
	CacheTTL     time.Duration
	Revision     string
	Region       string
	// ShutdownDelay is how long the router keeps serving after SIGTERM while /ready fails, so
	// that clients stop sending before it stops listening (endpoints are updated asynchronously).
	ShutdownDelay time.Duration
	// CrashInRegion and CrashAfter reproduce a binary that fails under load in one region only
	// (scenario R-3): when REGION equals CrashInRegion, the process exits 1 after CrashAfter
	// routed requests. Empty: never.
	CrashInRegion string
	CrashAfter    int
	// UnreadyInRegion reproduces a binary that never becomes ready in one region: when REGION
	// equals it, /ready answers 503. Empty: never.
	UnreadyInRegion string
	// LoseRoutes reproduces a binary that is up and Ready but has lost part of its route table
	// (issue 11's bad v2): every Nth domain of the table, in sorted order, is dropped after each
	// load, so those domains answer 404. 0: none.
	LoseRoutes int
	// MemoryPerRequest reproduces a binary whose memory grows with load (scenario R-7): each
	// routed request keeps this many bytes, touched, for the life of the process, so under a
	// memory limit the process is OOM-killed after limit/MemoryPerRequest requests. 0: none.
	MemoryPerRequest int
}

const (
	policyFailEmpty  = "fail-empty"
	policyFailStatic = "fail-static"
)

const (
	formatText = "text"
	formatJSON = "json"
)

// defaultTargetColumn is where each format's binary reads the target unless --target-column says
// otherwise: v1 reads the text column upstream; v2 reads the jsonb column target that the
// expand/contract migrations add (the naive migration retypes upstream instead: v2 then runs
// with --target-column=upstream).
var defaultTargetColumn = map[string]string{formatText: "upstream", formatJSON: "target"}

var columnName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func parseServeFlags(args []string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	fs.StringVar(&c.Listen, "listen", "", "address to serve on (default $POD_IP:8080, else 127.0.0.1:8080)")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL (default $DATABASE_URL)")
	fs.IntVar(&c.Schema, "schema", 1, "schema version this binary needs: 1 or 2 (text), 1 or more (json)")
	fs.StringVar(&c.TargetFormat, "target-format", formatText, "how route targets are read: text (a URL) or json (a document {\"url\": …})")
	fs.StringVar(&c.TargetColumn, "target-column", "", "the column targets are read from (default upstream for text, target for json)")
	fs.BoolVar(&c.CheckSchema, "check-schema", true, "/ready waits for the schema and a first route load; false reproduces the original binary")
	fs.StringVar(&c.CachePolicy, "cache-policy", policyFailStatic, "on a failed or expired load: fail-empty (drop the table) or fail-static (keep the last good one)")
	fs.DurationVar(&c.Refresh, "refresh", time.Second, "how often the route table is reloaded")
	fs.DurationVar(&c.CacheTTL, "cache-ttl", 5*time.Second, "age after which fail-empty drops the table")
	fs.StringVar(&c.Revision, "revision", "", "sent as X-Revision (default $REVISION)")
	fs.StringVar(&c.CrashInRegion, "crash-in-region", "", "test aid: exit 1 under load when $REGION is this region")
	fs.StringVar(&c.UnreadyInRegion, "unready-in-region", "", "test aid: /ready answers 503 when $REGION is this region")
	fs.IntVar(&c.CrashAfter, "crash-after", 20, "with --crash-in-region: routed requests before the exit")
	fs.IntVar(&c.LoseRoutes, "lose-every-nth-route", 0, "test aid: drop every Nth domain of the loaded table (sorted), which then answers 404 while /ready stays 200")
	fs.IntVar(&c.MemoryPerRequest, "memory-per-request", 0, "test aid: bytes each routed request keeps for the life of the process (memory that grows with load)")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", 2*time.Second, "after SIGTERM, keep serving this long with /ready failing before closing the listener")
	_ = fs.Parse(args)
	c.Listen = orEnv(c.Listen, "POD_IP", ":8080", "127.0.0.1:8080")
	c.DatabaseURL = orEnv(c.DatabaseURL, "DATABASE_URL", "", "")
	c.Revision = orEnv(c.Revision, "REVISION", "", "")
	c.Region = os.Getenv("REGION")
	if c.TargetColumn == "" {
		c.TargetColumn = defaultTargetColumn[c.TargetFormat]
	}

	switch {
	case c.DatabaseURL == "":
		return c, fmt.Errorf("--database-url or DATABASE_URL is required")
	case c.TargetFormat != formatText && c.TargetFormat != formatJSON:
		return c, fmt.Errorf("--target-format must be %s or %s, not %q", formatText, formatJSON, c.TargetFormat)
	case c.TargetFormat == formatText && c.Schema != 1 && c.Schema != 2:
		return c, fmt.Errorf("--schema must be 1 or 2, not %d", c.Schema)
	case c.Schema < 1:
		return c, fmt.Errorf("--schema must be 1 or more, not %d", c.Schema)
	case c.CachePolicy != policyFailEmpty && c.CachePolicy != policyFailStatic:
		return c, fmt.Errorf("--cache-policy must be %s or %s, not %q", policyFailEmpty, policyFailStatic, c.CachePolicy)
	case !columnName.MatchString(c.TargetColumn):
		return c, fmt.Errorf("--target-column must be a lower-case column name, not %q", c.TargetColumn)
	case c.LoseRoutes < 0:
		return c, fmt.Errorf("--lose-every-nth-route must be 0 or more, not %d", c.LoseRoutes)
	case c.MemoryPerRequest < 0 || c.MemoryPerRequest > 64<<20:
		return c, fmt.Errorf("--memory-per-request must be 0 to %d bytes, not %d", 64<<20, c.MemoryPerRequest)
	case c.Refresh <= 0 || c.CacheTTL <= 0:
		return c, fmt.Errorf("--refresh and --cache-ttl must be positive")
	}
	return c, nil
}

// migrateConfig is everything `migrate` needs; tests build one directly.
type migrateConfig struct {
	DatabaseURL string
	Target      uint // from SCHEMAGATE_SCHEMA_VERSION, set by schemagate on the migration Job
	Delay       time.Duration
	// Set names the migrations applied (migrationSets): --migrations, else $EDGE_ROUTER_MIGRATIONS,
	// else setRegion.
	Set string
	// ReportPath receives the schema report (docs/schema-report.md) after the migration, whatever
	// its outcome: --report-path, else $TERMINATION_MESSAGE_PATH, else /dev/termination-log when it
	// exists; "-" or none: no report.
	ReportPath string
}

func parseMigrateFlags(args []string) (migrateConfig, error) {
	var c migrateConfig
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL (default $DATABASE_URL)")
	fs.StringVar(&c.Set, "migrations", "", "the migrations to apply: region (the default), naive or expand-contract (default $EDGE_ROUTER_MIGRATIONS)")
	fs.DurationVar(&c.Delay, "delay", 0, "sleep this long before migrating (to make a migration slow in tests)")
	fs.StringVar(&c.ReportPath, "report-path", "", "where to write the schema report (default $TERMINATION_MESSAGE_PATH, else /dev/termination-log if it exists; - for none)")
	_ = fs.Parse(args)
	if c.ReportPath == "" {
		c.ReportPath = os.Getenv("TERMINATION_MESSAGE_PATH")
	}
	if _, err := os.Stat("/dev/termination-log"); c.ReportPath == "" && err == nil {
		c.ReportPath = "/dev/termination-log"
	}
	c.DatabaseURL = orEnv(c.DatabaseURL, "DATABASE_URL", "", "")
	c.Set = orEnv(c.Set, "EDGE_ROUTER_MIGRATIONS", "", setRegion)

	if c.DatabaseURL == "" {
		return c, fmt.Errorf("--database-url or DATABASE_URL is required")
	}
	if _, ok := migrationSets[c.Set]; !ok {
		return c, fmt.Errorf("--migrations must be %s, %s or %s, not %q", setRegion, setNaive, setExpandContract, c.Set)
	}
	v := os.Getenv("SCHEMAGATE_SCHEMA_VERSION")
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return c, fmt.Errorf("SCHEMAGATE_SCHEMA_VERSION must be a whole number, got %q", v)
	}
	c.Target = uint(n)
	return c, nil
}

// orEnv returns flag if it was set, else $env followed by suffix if env is set, else def. (Env
// values are not flag defaults so that -h never prints a database password.)
func orEnv(flag, env, suffix, def string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(env); v != "" {
		return v + suffix
	}
	return def
}
