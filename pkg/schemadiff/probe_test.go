package schemadiff

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/test/postgres"
)

var update = flag.Bool("update", false, "rewrite testdata/probe.golden from what the probes report")

// v1 is the schema every case starts from: the routes table of the incident, with a row.
const v1 = `
CREATE TYPE route_kind AS ENUM ('static', 'proxy');
CREATE TABLE routes (
  id serial PRIMARY KEY,
  host varchar(10) NOT NULL,
  target text,
  weight integer,
  kind route_kind
);
CREATE INDEX routes_weight ON routes (weight);
INSERT INTO routes (host, target, weight, kind) VALUES ('a.example', '{"upstream": "x"}', 1, 'static');
CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
INSERT INTO schema_migrations VALUES (1, false);
`

// probeCases are the change kinds the probe must tell apart, each a migration run on v1.
var probeCases = []struct{ name, migration string }{
	{"the incident: text to json with USING", `ALTER TABLE routes ALTER COLUMN target TYPE json USING target::json`},
	{"a column renamed", `ALTER TABLE routes RENAME COLUMN host TO hostname`},
	{"a column dropped and added again", `ALTER TABLE routes DROP COLUMN target; ALTER TABLE routes ADD COLUMN target text`},
	{"varchar(10) to text", `ALTER TABLE routes ALTER COLUMN host TYPE text`},
	{"varchar(10) to varchar(9)", `ALTER TABLE routes ALTER COLUMN host TYPE varchar(9)`},
	{"integer to bigint", `ALTER TABLE routes ALTER COLUMN weight TYPE bigint`},
	{"enum ADD VALUE", `ALTER TYPE route_kind ADD VALUE 'redirect'`},
	{"a NOT NULL column without a default", `ALTER TABLE routes ADD COLUMN region text NOT NULL DEFAULT 'eu'; ALTER TABLE routes ALTER COLUMN region DROP DEFAULT`},
	{"a NOT NULL column without a default that a trigger fills", `ALTER TABLE routes ADD COLUMN region text;
CREATE FUNCTION routes_region() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.region := coalesce(NEW.region, 'eu'); RETURN NEW; END $$;
CREATE TRIGGER routes_region BEFORE INSERT ON routes FOR EACH ROW EXECUTE FUNCTION routes_region();
UPDATE routes SET region = 'eu'; ALTER TABLE routes ALTER COLUMN region SET NOT NULL`},
	{"a NOT NULL column with a default", `ALTER TABLE routes ADD COLUMN region text NOT NULL DEFAULT 'eu'`},
	{"an expand: a table, a nullable column, an index", `CREATE TABLE certificates (host text PRIMARY KEY, pem text); ALTER TABLE routes ADD COLUMN tls boolean; CREATE INDEX routes_tls ON routes (tls)`},
	{"a contract: a column dropped", `ALTER TABLE routes DROP COLUMN weight`},
	{"a table renamed", `ALTER TABLE routes RENAME TO edge_routes`},
	{"NOT NULL set, a check and a unique index added", `ALTER TABLE routes ALTER COLUMN target SET NOT NULL; ALTER TABLE routes ADD CONSTRAINT weight_positive CHECK (weight > 0); CREATE UNIQUE INDEX routes_host ON routes (host)`},
	{"a migration that fails", `ALTER TABLE routes ALTER COLUMN host TYPE integer USING host::integer`},
	{"nothing but the tool's own table", `INSERT INTO schema_migrations VALUES (2, false)`},
	{"the tool's own table, one row changed", `UPDATE schema_migrations SET dirty = true`},
	{"nothing at all (a migration that ran on another database)", `UPDATE routes SET weight = 2`},
}

var pg *postgres.Server

func TestMain(m *testing.M) { os.Exit(postgres.RunTests(m, &pg)) }

// TestProbeReports runs each case's migration on a real PostgreSQL at v1 and compares the reports
// with testdata/probe.golden (go test -update rewrites it).
func TestProbeReports(t *testing.T) {
	ctx := context.Background()
	var got strings.Builder
	for i, c := range probeCases {
		db := fmt.Sprintf("case%d", i)
		if err := pg.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, pg.URL(db))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, v1); err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, conn, func(ctx context.Context) error {
			_, err := conn.Exec(ctx, c.migration)
			return err
		})
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fmt.Fprintf(&got, "== %s\n-- %s\n", c.name, c.migration)
		for _, l := range r.Lines() {
			fmt.Fprintf(&got, "%s\n", l)
		}
		got.WriteString("\n")
		b, err := r.Encode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		back, err := Parse(b)
		if err != nil || strings.Join(back.Lines(), "\n") != strings.Join(r.Lines(), "\n") {
			t.Fatalf("%s: the encoded report does not read back (%v):\n%s", c.name, err, b)
		}
	}
	golden := filepath.Join("testdata", "probe.golden")
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
