// Package probe dry-runs a migration before it reaches the database: on a scratch PostgreSQL it
// brings an empty database to the version production is at, with the team's own migrations and
// their own tool (replay), captures the catalog, runs the migration to the target version,
// captures it again, and reports the classified differences (pkg/schemadiff). Production is never
// connected to.
//
// The tools run in-process through their Go libraries, so what runs is what the tool does:
// golang-migrate (its dirty flag stops a replay, as it stops the tool) and goose (its NO
// TRANSACTION files and files with their own COMMIT run as goose runs them).
package probe

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// Tool names a migration tool Run can replay.
type Tool string

const (
	GolangMigrate Tool = "golang-migrate"
	Goose         Tool = "goose"
)

// Tools are the tools Run replays, in the order --help lists them.
var Tools = []Tool{GolangMigrate, Goose}

// Pattern is the file name pattern (path.Match) of the tool's migration files; "" for a tool
// Run does not replay.
func (t Tool) Pattern() string {
	switch t {
	case GolangMigrate:
		return "*.up.sql"
	case Goose:
		return "*.sql"
	}
	return ""
}

// Request is one probe.
type Request struct {
	Tool Tool
	// Migrations holds the tool's migration files (the directory itself, not a parent).
	Migrations fs.FS
	// ScratchURL is a PostgreSQL database that the probe may empty and write: never production.
	ScratchURL string
	// From is the version the database is at (the replay stops there; "0" for an empty
	// database), To the migration's target. Both are whole numbers, as the tools number
	// migrations.
	From, To string
	// Timeout bounds the whole probe (zero: 5 minutes).
	Timeout time.Duration
}

// Result is a probe's outcome.
type Result struct {
	Report *schemadiff.Report
	// Duration is how long the replay to From took, and the migration to To.
	Replay, Migration time.Duration
}

// Run probes r. The report is Failed when the migration to To fails (its error is in the report);
// err is for what kept the probe from running: a bad request, a scratch database that cannot be
// reached or emptied, a replay to From that fails (the migrations up to From do not run on an
// empty database: the probe cannot say what the migration does).
func Run(ctx context.Context, r Request) (*Result, error) {
	from, err := wholeVersion("from", r.From)
	if err != nil {
		return nil, err
	}
	to, err := wholeVersion("to", r.To)
	if err != nil {
		return nil, err
	}
	if to <= from {
		return nil, fmt.Errorf("the target version %d is not above the version the database is at (%d): there is no migration to probe", to, from)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.ScratchURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to the scratch database: %w", err)
	}
	defer conn.Close(context.Background())
	if err := empty(ctx, conn); err != nil {
		return nil, err
	}
	// Opened on the emptied database: a tool records its own state there as it opens.
	var m migrator
	switch r.Tool {
	case GolangMigrate:
		m, err = newGolangMigrate(r.Migrations, r.ScratchURL)
	case Goose:
		m, err = newGoose(r.Migrations, r.ScratchURL)
	default:
		return nil, fmt.Errorf("tool %q: want one of %v", r.Tool, Tools)
	}
	if err != nil {
		return nil, err
	}
	defer m.close()
	res := &Result{}
	start := time.Now()
	if from > 0 {
		if err := m.upTo(ctx, from); err != nil {
			return nil, fmt.Errorf("replaying the migrations up to version %d on the scratch database: %w", from, err)
		}
	}
	res.Replay = time.Since(start)
	start = time.Now()
	res.Report, err = schemadiff.Run(ctx, conn, func(ctx context.Context) error { return m.upTo(ctx, to) })
	res.Migration = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("reading the scratch database's catalog: %w", err)
	}
	return res, nil
}

// migrator is a tool, opened on the scratch database.
type migrator interface {
	// upTo migrates up to version v exactly (an error if there is no migration v).
	upTo(ctx context.Context, v int64) error
	close()
}

func wholeVersion(what, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s version %q: the tools number migrations with whole numbers", what, v)
	}
	return n, nil
}

// empty drops every user schema of the scratch database and creates public again, so that the
// replay starts from nothing (a probe run before leaves nothing behind).
func empty(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\_%'`)
	if err != nil {
		return fmt.Errorf("emptying the scratch database: %w", err)
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("emptying the scratch database: %w", err)
	}
	for _, s := range schemas {
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("emptying the scratch database: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA public"); err != nil {
		return fmt.Errorf("emptying the scratch database: %w", err)
	}
	return nil
}
