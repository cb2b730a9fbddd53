package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the database/sql driver "pgx" for goose
	"github.com/pressly/goose/v3"

	"github.com/schemagate/schemagate/pkg/schemareport"
)

// reportCase is a database in some state, set up by the tool itself (golang-migrate, goose) or
// by SQL in the tool's documented layout (Flyway, Atlas, Liquibase), and the report expected.
type reportCase struct {
	name  string // tool/state
	setup func(t *testing.T, url string)
	args  []string // flags besides --tool and --report-path
	// The report expected (exit code 0 or 3 by dirty), or, when wantErr is set, exit code 2 with
	// wantErr in stderr and no report anywhere.
	version string
	dirty   bool
	wantErr string
}

func TestReport(t *testing.T) {
	var cases []reportCase
	cases = append(cases, golangMigrateCases...)
	cases = append(cases, gooseCases...)
	cases = append(cases, flywayCases...)
	cases = append(cases, atlasCases...)
	cases = append(cases, liquibaseCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := newDatabase(t)
			if c.setup != nil {
				c.setup(t, url)
			}
			tool, _, _ := strings.Cut(c.name, "/")
			r := reportInProcess(t, url, append([]string{"--tool", tool}, c.args...)...)
			if c.wantErr != "" {
				if r.code != exitNoReport || !strings.Contains(r.stderr, c.wantErr) || r.stdout != "" || r.file != nil {
					t.Fatalf("got exit %d, stdout %q, report file %q, stderr %q; want exit 2, no report, and %q in stderr",
						r.code, r.stdout, r.file, r.stderr, c.wantErr)
				}
				return
			}
			wantCode := exitClean
			if c.dirty {
				wantCode = exitDirty
			}
			if r.code != wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, wantCode, r.stderr)
			}
			checkReport(t, r.file, c.version, c.dirty, tool)
			if r.stdout != string(r.file)+"\n" {
				t.Errorf("stdout %q is not the report file %q and a newline", r.stdout, r.file)
			}
		})
	}
}

// checkReport checks that b is exactly the report of version, dirty and tool, written just now.
func checkReport(t *testing.T, b []byte, version string, dirty bool, tool string) {
	t.Helper()
	got, err := schemareport.Parse(b)
	if err != nil {
		t.Fatalf("the report %q: %v", b, err)
	}
	if age := time.Since(got.Time); age < -time.Second || age > time.Minute {
		t.Errorf("the report's time %s is not now", got.Time)
	}
	want, err := schemareport.Encode(schemareport.Report{Version: version, Dirty: dirty, Tool: tool, Time: got.Time})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("report\n%s\nwant\n%s", b, want)
	}
}

// inProcessResult is what realMain did, and the report file (nil if none was written).
type inProcessResult struct {
	result
	file []byte
}

// reportInProcess runs `report` in this process against the database at url, writing to a
// report path of the test's.
func reportInProcess(t *testing.T, url string, args ...string) inProcessResult {
	t.Helper()
	path := filepath.Join(t.TempDir(), "termination-log")
	env := map[string]string{"DATABASE_URL": url}
	var stdout, stderr bytes.Buffer
	code := realMain(append([]string{"report", "--report-path", path}, args...), nil, &stdout, &stderr,
		func(k string) string { return env[k] })
	file, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return inProcessResult{result: result{code: code, stdout: stdout.String(), stderr: stderr.String()}, file: file}
}

// --- golang-migrate, used as a library ---

// withMigrate opens golang-migrate on testdata/golang-migrate/dir for the database at url, with
// each statement of a file run on its own, so a failing file stays half-applied.
func withMigrate(t *testing.T, url, dir string, do func(m *migrate.Migrate) error) error {
	t.Helper()
	src, err := iofs.New(os.DirFS(filepath.Join("testdata", "golang-migrate")), dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(url, "postgres://")+"&x-multi-statement=true")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return do(m)
}

func mustMigrate(dir string, do func(m *migrate.Migrate) error) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		if err := withMigrate(t, url, dir, do); err != nil {
			t.Fatal(err)
		}
	}
}

var golangMigrateCases = []reportCase{
	{name: "golang-migrate/empty", version: "0"},
	{name: "golang-migrate/at_3", setup: mustMigrate("good", (*migrate.Migrate).Up), version: "3"},
	{name: "golang-migrate/down_to_nothing", version: "0", // the table is there, without a row
		setup: mustMigrate("good", func(m *migrate.Migrate) error {
			if err := m.Up(); err != nil {
				return err
			}
			return m.Down()
		})},
	{name: "golang-migrate/dirty", version: "3", dirty: true,
		setup: func(t *testing.T, url string) {
			err := withMigrate(t, url, "fails", (*migrate.Migrate).Up)
			if err == nil || !strings.Contains(err.Error(), "no_such_table") {
				t.Fatalf("migration 3 did not fail half-way: %v", err)
			}
			// Half-way indeed: its first statement stayed.
			execSQL(t, url, "SELECT 1 FROM orders")
		}},
	{name: "golang-migrate/table_and_schema_flags", version: "2",
		args: []string{"--table", "app_versions", "--schema", "app"},
		setup: func(t *testing.T, url string) {
			execSQL(t, url, "CREATE SCHEMA app")
			err := withMigrate(t, url+"&search_path=app&x-migrations-table=app_versions", "good",
				func(m *migrate.Migrate) error { return m.Migrate(2) })
			if err != nil {
				t.Fatal(err)
			}
		}},
	{name: "golang-migrate/table_not_found", version: "0", args: []string{"--schema", "nowhere"},
		setup: mustMigrate("good", (*migrate.Migrate).Up)},
	{name: "golang-migrate/two_rows", wantErr: "more than one row",
		setup: func(t *testing.T, url string) {
			execSQL(t, url, "CREATE TABLE schema_migrations (version bigint NOT NULL, dirty boolean NOT NULL)",
				"INSERT INTO schema_migrations VALUES (1, false), (2, false)")
		}},
}

// --- goose, used as a library ---

// withGoose opens a goose provider on testdata/goose/dir for the database at url.
func withGoose(t *testing.T, url, dir string, do func(p *goose.Provider) error, opts ...goose.ProviderOption) error {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(filepath.Join("testdata", "goose", dir)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return do(p)
}

func gooseUp(p *goose.Provider) error {
	_, err := p.Up(context.Background())
	return err
}

func mustGoose(dir string, do func(p *goose.Provider) error, opts ...goose.ProviderOption) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		if err := withGoose(t, url, dir, do, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// gooseUpThen migrates up with goose, then runs statements (rows as older gooses wrote them).
func gooseUpThen(statements ...string) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		mustGoose("good", gooseUp)(t, url)
		execSQL(t, url, statements...)
	}
}

var gooseCases = []reportCase{
	{name: "goose/empty", version: "0"},
	{name: "goose/at_3", setup: mustGoose("good", gooseUp), version: "3"},
	// goose's Down deletes the row of the version it rolls back.
	{name: "goose/down", version: "2", setup: mustGoose("good", func(p *goose.Provider) error {
		if err := gooseUp(p); err != nil {
			return err
		}
		_, err := p.Down(context.Background())
		return err
	})},
	{name: "goose/down_to_0", version: "0", setup: mustGoose("good", func(p *goose.Provider) error {
		if err := gooseUp(p); err != nil {
			return err
		}
		_, err := p.DownTo(context.Background(), 0)
		return err
	})},
	// Older gooses rolled back by adding a row with is_applied = false.
	{name: "goose/rolled_back", version: "2",
		setup: gooseUpThen("INSERT INTO goose_db_version (version_id, is_applied) VALUES (3, false)")},
	{name: "goose/rolled_back_twice", version: "1",
		setup: gooseUpThen("INSERT INTO goose_db_version (version_id, is_applied) VALUES (3, false), (2, false)")},
	{name: "goose/rolled_back_then_reapplied", version: "3",
		setup: gooseUpThen("INSERT INTO goose_db_version (version_id, is_applied) VALUES (3, false), (3, true)")},
	// goose runs each migration in a transaction and has no dirty flag: the last good version.
	{name: "goose/failed", version: "2",
		setup: func(t *testing.T, url string) {
			err := withGoose(t, url, "fails", gooseUp)
			if err == nil || !strings.Contains(err.Error(), "no_such_table") {
				t.Fatalf("migration 3 did not fail: %v", err)
			}
		}},
	{name: "goose/table_flag", version: "3", args: []string{"--table", "app_goose"},
		setup: mustGoose("good", gooseUp, goose.WithTableName("app_goose"))},
	{name: "goose/not_a_version", wantErr: `"-5"`,
		setup: gooseUpThen("INSERT INTO goose_db_version (version_id, is_applied) VALUES (-5, true)")},
}

// --- Flyway: its schema history table, by SQL ---

// flywayRow is a row of flyway_schema_history; version "" is NULL (a repeatable migration).
type flywayRow struct {
	rank    int
	version string
	typ     string
	success bool
}

// flyway creates Flyway's schema history table in schema (the search_path's first if "") with
// rows.
func flyway(schema string, rows ...flywayRow) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		table := "flyway_schema_history"
		stmts := []string{}
		if schema != "" {
			stmts = append(stmts, "CREATE SCHEMA "+schema)
			table = schema + "." + table
		}
		stmts = append(stmts, `CREATE TABLE `+table+` (
			installed_rank integer NOT NULL PRIMARY KEY,
			version varchar(50),
			description varchar(200) NOT NULL,
			type varchar(20) NOT NULL,
			script varchar(1000) NOT NULL,
			checksum integer,
			installed_by varchar(100) NOT NULL,
			installed_on timestamp NOT NULL DEFAULT now(),
			execution_time integer NOT NULL,
			success boolean NOT NULL)`)
		for _, r := range rows {
			version, script := "NULL", "R__views.sql"
			if r.version != "" {
				version, script = "'"+r.version+"'", "V"+r.version+"__step.sql"
			}
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO %s (installed_rank, version, description, type, script,
				checksum, installed_by, execution_time, success) VALUES (%d, %s, 'step', '%s', '%s', 12345, 'app', 7, %t)`,
				table, r.rank, version, r.typ, script, r.success))
		}
		execSQL(t, url, stmts...)
	}
}

var flywayCases = []reportCase{
	{name: "flyway/empty", version: "0"},
	{name: "flyway/empty_table", version: "0", setup: flyway("")},
	{name: "flyway/at_2.1", version: "2.1", setup: flyway("",
		flywayRow{1, "1", "BASELINE", true},
		flywayRow{2, "1.1", "SQL", true},
		flywayRow{3, "", "SQL", true},      // repeatable
		flywayRow{4, "2_1", "SQL", true},   // 2.1
		flywayRow{5, "1.10", "JDBC", true}, // out of order, and 1.10 < 2.1
	)},
	{name: "flyway/trailing_zero", version: "3", setup: flyway("",
		flywayRow{1, "1", "SQL", true},
		flywayRow{2, "3.0", "SQL", true},
	)},
	{name: "flyway/dirty", version: "2", dirty: true, setup: flyway("",
		flywayRow{1, "1", "SQL", true},
		flywayRow{2, "2", "SQL", true},
		flywayRow{3, "3", "SQL", false},
	)},
	{name: "flyway/failed_repeatable", version: "2", dirty: true, setup: flyway("",
		flywayRow{1, "2", "SQL", true},
		flywayRow{2, "", "SQL", false},
	)},
	// flyway repair marked migration 3 deleted; an undo migration took 2.5 back.
	{name: "flyway/deleted_and_undone", version: "2", setup: flyway("",
		flywayRow{1, "1", "SQL", true},
		flywayRow{2, "2", "SQL", true},
		flywayRow{3, "2.5", "SQL", true},
		flywayRow{4, "3", "SQL", true},
		flywayRow{5, "3", "DELETE", true},
		flywayRow{6, "2.5", "UNDO_SQL", true},
	)},
	{name: "flyway/schema_flag", version: "4", args: []string{"--schema", "app"}, setup: flyway("app",
		flywayRow{1, "4", "SQL", true},
	)},
	{name: "flyway/not_a_version", wantErr: `"1.2-beta"`, setup: flyway("",
		flywayRow{1, "1", "SQL", true},
		flywayRow{2, "1.2-beta", "SQL", true},
	)},
}

// --- Atlas: its revisions table, by SQL ---

// atlasRow is a row of atlas_schema_revisions.
type atlasRow struct {
	version        string
	typ            int
	applied, total int
	error          string // "" is NULL
}

// atlas creates Atlas's revisions table in schema with rows.
func atlas(schema string, rows ...atlasRow) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		table := schema + ".atlas_schema_revisions"
		stmts := []string{"CREATE SCHEMA IF NOT EXISTS " + schema, `CREATE TABLE ` + table + ` (
			version varchar NOT NULL PRIMARY KEY,
			description varchar NOT NULL,
			type integer NOT NULL DEFAULT 2,
			applied integer NOT NULL DEFAULT 0,
			total integer NOT NULL DEFAULT 0,
			executed_at timestamptz NOT NULL,
			execution_time bigint NOT NULL,
			error text,
			error_stmt text,
			hash text NOT NULL,
			partial_hashes json,
			operator_version text NOT NULL)`}
		for _, r := range rows {
			errText, errStmt := "NULL", "NULL"
			if r.error != "" {
				errText, errStmt = "'"+r.error+"'", "'INSERT INTO no_such_table VALUES (1)'"
			}
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO %s VALUES ('%s', 'step', %d, %d, %d, now(), 1000,
				%s, %s, 'aGFzaA==', '["aA=="]', 'Atlas CLI v0.30.0')`,
				table, r.version, r.typ, r.applied, r.total, errText, errStmt))
		}
		execSQL(t, url, stmts...)
	}
}

const (
	atlasExecute  = 2
	atlasResolved = 4
)

var atlasCases = []reportCase{
	{name: "atlas/empty", version: "0"},
	{name: "atlas/empty_table", version: "0", setup: atlas("atlas_schema_revisions")},
	{name: "atlas/at_20260301120000", version: "20260301120000", setup: atlas("atlas_schema_revisions",
		atlasRow{"20260101000000", atlasBaseline, 0, 0, ""},
		atlasRow{"20260201120000", atlasExecute, 3, 3, ""},
		atlasRow{"20260301120000", atlasExecute | atlasResolved, 2, 2, ""},
	)},
	{name: "atlas/baseline_only", version: "20260101000000", setup: atlas("atlas_schema_revisions",
		atlasRow{"20260101000000", atlasBaseline, 0, 5, ""},
	)},
	{name: "atlas/dirty", version: "20260201120000", dirty: true, setup: atlas("atlas_schema_revisions",
		atlasRow{"20260101000000", atlasBaseline, 0, 0, ""},
		atlasRow{"20260201120000", atlasExecute, 3, 3, ""},
		atlasRow{"20260301120000", atlasExecute, 1, 3, `pq: relation "no_such_table" does not exist`},
	)},
	{name: "atlas/dirty_partial_without_error", version: "20260201120000", dirty: true, setup: atlas("atlas_schema_revisions",
		atlasRow{"20260201120000", atlasExecute, 3, 3, ""},
		atlasRow{"20260301120000", atlasExecute, 1, 3, ""},
	)},
	{name: "atlas/dirty_error_only", version: "20260201120000", dirty: true, setup: atlas("atlas_schema_revisions",
		atlasRow{"20260201120000", atlasExecute, 3, 3, ""},
		atlasRow{"20260301120000", atlasExecute, 3, 3, "checksum mismatch"},
	)},
	{name: "atlas/schema_flag", version: "5", args: []string{"--schema", "public"}, setup: atlas("public",
		atlasRow{"5", atlasExecute, 1, 1, ""},
	)},
	{name: "atlas/not_a_version", wantErr: `"2026-03-01"`, setup: atlas("atlas_schema_revisions",
		atlasRow{"2026-03-01", atlasExecute, 1, 1, ""},
	)},
}

// --- Liquibase: its changelog and lock tables, by SQL ---

// liquibaseRow is a row of databasechangelog; tag "" is NULL.
type liquibaseRow struct {
	order    int
	exectype string
	tag      string
}

const liquibaseLockTable = `CREATE TABLE databasechangeloglock (
	id integer NOT NULL PRIMARY KEY,
	locked boolean NOT NULL,
	lockgranted timestamp,
	lockedby varchar(255))`

// liquibase creates Liquibase's tables with rows, the lock held if locked.
func liquibase(locked bool, rows ...liquibaseRow) func(t *testing.T, url string) {
	return func(t *testing.T, url string) {
		stmts := []string{`CREATE TABLE databasechangelog (
			id varchar(255) NOT NULL,
			author varchar(255) NOT NULL,
			filename varchar(255) NOT NULL,
			dateexecuted timestamp NOT NULL,
			orderexecuted integer NOT NULL,
			exectype varchar(10) NOT NULL,
			md5sum varchar(35),
			description varchar(255),
			comments varchar(255),
			tag varchar(255),
			liquibase varchar(20),
			contexts varchar(255),
			labels varchar(255),
			deployment_id varchar(10))`, liquibaseLockTable, liquibaseLock(locked)}
		for _, r := range rows {
			tag := "NULL"
			if r.tag != "" {
				tag = "'" + r.tag + "'"
			}
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO databasechangelog VALUES ('%d', 'app', 'changelog.xml',
				now(), %d, '%s', '9:abc', 'step', '', %s, '4.31.0', NULL, NULL, '1234567890')`,
				r.order, r.order, r.exectype, tag))
		}
		execSQL(t, url, stmts...)
	}
}

func liquibaseLock(locked bool) string {
	if locked {
		return "INSERT INTO databasechangeloglock VALUES (1, true, now(), 'migrate-7d9f (10.0.0.7)')"
	}
	return "INSERT INTO databasechangeloglock VALUES (1, false, NULL, NULL)"
}

var liquibaseCases = []reportCase{
	{name: "liquibase/empty", version: "0"},
	{name: "liquibase/untagged", version: "0", setup: liquibase(false,
		liquibaseRow{1, "EXECUTED", ""},
		liquibaseRow{2, "EXECUTED", ""},
	)},
	{name: "liquibase/at_1.2", version: "1.2", setup: liquibase(false,
		liquibaseRow{1, "EXECUTED", ""},
		liquibaseRow{2, "EXECUTED", "v1"},
		liquibaseRow{3, "MARK_RAN", ""},
		liquibaseRow{4, "EXECUTED", "V1.2"},
		liquibaseRow{5, "EXECUTED", ""}, // applied after the tag: not a version of its own
	)},
	{name: "liquibase/dirty_locked", version: "1.2", dirty: true, setup: liquibase(true,
		liquibaseRow{1, "EXECUTED", "1.2"},
	)},
	{name: "liquibase/dirty_failed", version: "1", dirty: true, setup: liquibase(false,
		liquibaseRow{1, "EXECUTED", "1"},
		liquibaseRow{2, "FAILED", ""},
	)},
	// A Liquibase that died on its first update: the lock is there, the changelog is not.
	{name: "liquibase/dirty_lock_only", version: "0", dirty: true,
		setup: func(t *testing.T, url string) { execSQL(t, url, liquibaseLockTable, liquibaseLock(true)) }},
	{name: "liquibase/not_a_version", wantErr: `"release-x"`, setup: liquibase(false,
		liquibaseRow{1, "EXECUTED", "v1"},
		liquibaseRow{2, "EXECUTED", "release-x"},
	)},
}
