package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemareport"
)

// The migrations come in sets, one directory each, selected by --migrations. All share schema 1
// (routes with a text target, upstream) and none has down files: migrate never goes down.
//
//   - region (migrations/): schema 2 adds a region column. Expand-only: the schema-1 binary keeps
//     working on schema 2, which is what lets schemagate migrate first and promote afterwards.
//   - naive (migrations-naive/): schema 2 retypes upstream to jsonb in place. The schema-1 binary
//     reads what it cannot use and routes nothing: it runs on [1, 1] only.
//   - expand-contract (migrations-expand-contract/): schema 2 (expand) adds a jsonb target beside
//     upstream and keeps the two in step; schema 3 (contract) drops upstream. The schema-1 binary
//     runs on [1, 2], the JSON one on [2, 3].
//
//go:embed migrations/*.sql migrations-naive/*.sql migrations-expand-contract/*.sql
var migrations embed.FS

const (
	setRegion         = "region"
	setNaive          = "naive"
	setExpandContract = "expand-contract"
)

// migrationSets maps each set to its directory in migrations.
var migrationSets = map[string]string{
	setRegion:         "migrations",
	setNaive:          "migrations-naive",
	setExpandContract: "migrations-expand-contract",
}

// migrateLock is a PostgreSQL advisory lock key held around "read the version, then migrate", so
// that two migrators never interleave and one with an older target never sees a newer database
// as "behind" (golang-migrate's Migrate(n) would go down to n).
const migrateLock = 7261001

// runMigrate brings the database up to cfg.Target and never down. It prints one line saying what
// it did. A dirty database (a migration that failed half-way) is an error: it needs a human.
func runMigrate(ctx context.Context, cfg migrateConfig, out io.Writer) error {
	if cfg.Delay > 0 {
		select {
		case <-time.After(cfg.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	lock, err := pgx.Connect(ctx, pgURL(cfg.DatabaseURL))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer lock.Close(context.Background())
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}

	set := cfg.Set
	if set == "" {
		set = setRegion
	}
	dir, ok := migrationSets[set]
	if !ok {
		return fmt.Errorf("no migration set %q", set)
	}
	src, err := iofs.New(migrations, dir)
	if err != nil {
		return err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, migrateURL(cfg.DatabaseURL))
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer m.Close()
	// Whatever happens next, say where the database ended up: schemagate reads this report from
	// the pod's termination message (docs/schema-report.md).
	defer writeReport(m, cfg.ReportPath, out)

	from, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		from, err = 0, nil
	}
	switch {
	case err != nil:
		return fmt.Errorf("read the schema version: %w", err)
	case dirty:
		return fmt.Errorf("database is dirty at version %d: a migration failed half-way; repair it by hand, then set schema_migrations.dirty = false", from)
	case from >= cfg.Target:
		fmt.Fprintf(out, "schema is at version %d, target %d: nothing to do (never migrating down)\n", from, cfg.Target)
		return nil
	}

	if err := m.Migrate(cfg.Target); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("migrate from %d to %d: no migration %d is embedded in this binary (set %s)", from, cfg.Target, cfg.Target, set)
		}
		return fmt.Errorf("migrate from %d to %d: %w", from, cfg.Target, err)
	}
	fmt.Fprintf(out, "migrated schema from version %d to %d\n", from, cfg.Target)
	return nil
}

// migrateURL gives golang-migrate's pgx/v5 driver its scheme; pgURL gives pgx the usual one.
func migrateURL(u string) string { return withScheme(u, "pgx5://") }
func pgURL(u string) string      { return withScheme(u, "postgres://") }

func withScheme(u, scheme string) string {
	for _, s := range []string{"postgres://", "postgresql://", "pgx5://"} {
		if rest, ok := strings.CutPrefix(u, s); ok {
			return scheme + rest
		}
	}
	return u
}

// writeReport writes the schema report of the database m points at to path (no report for "" or
// "-"). A failure to report is printed, not returned: the migration's own outcome is the exit code.
func writeReport(m *migrate.Migrate, path string, out io.Writer) {
	if path == "" || path == "-" {
		return
	}
	version, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		version, err = 0, nil
	}
	if err != nil {
		fmt.Fprintf(out, "no schema report: reading the version: %v\n", err)
		return
	}
	b, err := schemareport.Encode(schemareport.Report{Version: strconv.FormatUint(uint64(version), 10), Dirty: dirty, Tool: "golang-migrate"})
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(out, "no schema report: %v\n", err)
	}
}
