package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// migrateExample brings the database at url to version with the example router's naive set
// (examples/edge-router/migrations-naive), as its migration container does.
func migrateExample(t testing.TB, url string, version uint) {
	t.Helper()
	src, err := iofs.New(os.DirFS(filepath.Join("..", "..", "examples", "edge-router")), "migrations-naive")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(url, "postgres://"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(version); err != nil && err != migrate.ErrNoChange {
		t.Fatal(err)
	}
}

// A probe's pod, step by step, with the real binary, pg_dump and psql: copy brings an empty
// scratch database to the schema of "production" (at version 1, read through a role that can only
// read) with golang-migrate's own row, so the unchanged migration command runs only migration 2
// there; report then names the incident's change as breaking. Production is left as it was.
func TestProbeCopyThenReport(t *testing.T) {
	production, scratch := newDatabase(t), newDatabase(t)
	migrateExample(t, production, 1)
	execSQL(t, production, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'probe_reader') THEN CREATE ROLE probe_reader LOGIN; END IF; END $$",
		"GRANT pg_read_all_data TO probe_reader")
	reader := strings.Replace(production, "://"+"schemagate@", "://probe_reader@", 1)
	if reader == production {
		t.Fatalf("cannot make a reader's URL of %s", production)
	}
	catalog := filepath.Join(t.TempDir(), "before.json")
	env := []string{"DATABASE_URL=" + scratch, "SOURCE_DATABASE_URL=" + reader}
	if r := runBinary(t, env, "probe", "copy", "--catalog", catalog); r.code != exitClean {
		t.Fatalf("probe copy: exit %d\n%s", r.code, r.stderr)
	}
	var version int
	conn, err := pgx.Connect(t.Context(), scratch)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT version FROM schema_migrations").Scan(&version); err != nil || version != 1 {
		t.Fatalf("the scratch database's golang-migrate version: %d, %v", version, err)
	}
	var rows int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM routes").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the scratch database holds %d routes (%v): the copy must carry no data", rows, err)
	}
	conn.Close(t.Context())

	migrateExample(t, scratch, 2) // the team's migration container, on the scratch database
	report := filepath.Join(t.TempDir(), "report.json")
	r := runBinary(t, []string{"DATABASE_URL=" + scratch}, "probe", "report", "--catalog", catalog, "--report-path", report)
	if r.code != exitClean {
		t.Fatalf("probe report: exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	got, err := schemadiff.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != schemadiff.Breaking || len(got.Changes) != 1 || got.Changes[0].Kind != schemadiff.ColumnType || got.Changes[0].To != "jsonb" {
		t.Fatalf("report: %s", strings.Join(got.Lines(), "\n"))
	}

	conn, err = pgx.Connect(t.Context(), production)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var typ string
	if err := conn.QueryRow(t.Context(), "SELECT data_type FROM information_schema.columns WHERE table_name = 'routes' AND column_name = 'upstream'").Scan(&typ); err != nil || typ != "text" {
		t.Fatalf("production's routes.upstream is %q (%v): the probe touched it", typ, err)
	}
}

// The probe's steps refuse what they cannot do, with the password never printed: no catalog
// flag, no URL, a source that refuses the login.
func TestProbeRefuses(t *testing.T) {
	scratch := newDatabase(t)
	for name, c := range map[string]struct {
		env  []string
		args []string
		code int
		want string
	}{
		"no step":         {nil, []string{"probe"}, exitUsage, "probe needs a step"},
		"no catalog":      {[]string{"DATABASE_URL=" + scratch}, []string{"probe", "report"}, exitUsage, "--catalog is required"},
		"no source":       {[]string{"DATABASE_URL=" + scratch}, []string{"probe", "copy", "--catalog", "x"}, exitUsage, "SOURCE_DATABASE_URL is not set"},
		"no catalog file": {[]string{"DATABASE_URL=" + scratch}, []string{"probe", "report", "--catalog", filepath.Join(t.TempDir(), "none")}, exitNoReport, "no such file"},
		"a wrong password": {[]string{"DATABASE_URL=" + scratch, "SOURCE_DATABASE_URL=postgres://" + pwUser + ":s3cret-wrong@127.0.0.1:" + strconv.Itoa(pg.Port()) + "/postgres?sslmode=disable"},
			[]string{"probe", "copy", "--catalog", filepath.Join(t.TempDir(), "c.json")}, exitNoReport, "password authentication failed"},
	} {
		r := runBinary(t, c.env, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "s3cret-wrong") {
			t.Errorf("%s: exit %d, stderr:\n%s", name, r.code, r.stderr)
		}
	}
}
