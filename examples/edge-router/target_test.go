package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemareport"
)

// The route target's type change (a text URL becomes a JSON document), the two ways of migrating
// it: naive (in place) and expand/contract. v1 is the text binary (--schema=1), v2 the JSON one.

// routerFor runs a router with cfg's read path (its refresh loop and an httptest server) until the
// test ends; the fields the other tests share are filled in.
func routerFor(t *testing.T, url string, cfg serveConfig) *httptest.Server {
	t.Helper()
	cfg.DatabaseURL, cfg.Refresh, cfg.CacheTTL, cfg.Region = url, 100*time.Millisecond, time.Second, "us-east"
	if cfg.CachePolicy == "" {
		cfg.CachePolicy = policyFailStatic
	}
	if cfg.TargetFormat == "" {
		cfg.TargetFormat = formatText
	}
	if cfg.TargetColumn == "" {
		cfg.TargetColumn = defaultTargetColumn[cfg.TargetFormat]
	}
	s := newServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.table.refresh(ctx) }()
	ts := httptest.NewServer(s.handler())
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	return ts
}

var (
	v1Text    = serveConfig{Schema: 1, CheckSchema: true, Revision: "v1"}
	v2JSON    = serveConfig{Schema: 2, CheckSchema: true, Revision: "v2", TargetFormat: formatJSON}
	v2InPlace = serveConfig{Schema: 2, CheckSchema: true, Revision: "v2", TargetFormat: formatJSON, TargetColumn: "upstream"}
)

func migrateSet(t *testing.T, url, set string, target uint) string {
	t.Helper()
	var out bytes.Buffer
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: target, Set: set}, &out); err != nil {
		t.Fatalf("migrate %s to %d: %v", set, target, err)
	}
	return out.String()
}

// allCodes returns the status codes of the 20 seeded domains, and how many were 200.
func allCodes(t *testing.T, ts *httptest.Server) (ok int, codes []int) {
	t.Helper()
	for i := range 20 {
		c := code(t, ts, seeded(i), "/")
		codes = append(codes, c)
		if c == 200 {
			ok++
		}
	}
	return ok, codes
}

func waitAllRoute(t *testing.T, what string, ts *httptest.Server) {
	t.Helper()
	eventually(t, what, func() bool { ok, _ := allCodes(t, ts); return ok == 20 })
}

// Every set starts from the same schema 1, so a database migrated to 1 by one set is at schema 1
// of the others.
func TestMigrationSetsShareSchema1(t *testing.T) {
	want, err := migrations.ReadFile("migrations/000001_routes.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for set, dir := range migrationSets {
		got, err := migrations.ReadFile(dir + "/000001_routes.up.sql")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("set %s: migration 1 differs from migrations/000001_routes.up.sql (%v)", set, err)
		}
	}
	if _, ok := migrationSets[setRegion]; !ok || len(migrationSets) != 3 {
		t.Errorf("migration sets %v", migrationSets)
	}
}

// The naive migration changes the type of the column v1 reads: v1 stays Ready (its load succeeds)
// and answers 404 for every domain — the outage moves to v1. v2 reads it as JSON.
func TestNaiveMigrationBreaksV1(t *testing.T) {
	url := newDatabase(t, pg)
	migrateSet(t, url, setNaive, 1)
	v1 := routerFor(t, url, v1Text)
	v2 := routerFor(t, url, v2InPlace)
	waitAllRoute(t, "v1 routes every domain on schema 1", v1)
	// v2 says why it is unready once it has read the schema ("not read yet" before, on a loaded
	// machine); it must never be ready on schema 1.
	eventually(t, "v2 reads schema 1 and stays unready", func() bool {
		c, body, _ := get(t, v2, "", "/ready")
		if c != 503 {
			t.Fatalf("v2 on schema 1: /ready %d %q", c, body)
		}
		return strings.Contains(body, "database schema is 1, this binary needs 2")
	})

	if out := migrateSet(t, url, setNaive, 2); out != "migrated schema from version 1 to 2\n" {
		t.Errorf("naive migration printed %q", out)
	}
	eventually(t, "v1 has no route left", func() bool { ok, _ := allCodes(t, v1); return ok == 0 })
	if _, codes := allCodes(t, v1); fmt.Sprint(codes) != fmt.Sprint(repeat(404, 20)) {
		t.Errorf("v1 on the naive schema 2 answered %v, want 404 for every domain", codes)
	}
	if c := code(t, v1, "", "/ready"); c != 200 {
		t.Errorf("v1 on the naive schema 2: /ready %d (its loads succeed; only its targets are unreadable)", c)
	}
	if n := metric(t, v1, "edge_router_invalid_routes"); n != 20 {
		t.Errorf("v1 counted %v invalid routes, want 20", n)
	}
	eventually(t, "v2 is ready on schema 2", func() bool { return code(t, v2, "", "/ready") == 200 })
	waitAllRoute(t, "v2 routes every domain", v2)
	if _, body, rev := get(t, v2, "d03.example", "/"); body != "d03.example -> http://upstream-03.internal:8080\n" || rev != "v2" {
		t.Errorf("v2 on the naive schema 2: %q X-Revision %q", body, rev)
	}

	// A rollback to v1 after the migration: a fresh v1 is Ready too, and routes nothing.
	again := routerFor(t, url, v1Text)
	eventually(t, "a fresh v1 is ready", func() bool { return code(t, again, "", "/ready") == 200 })
	if ok, codes := allCodes(t, again); ok != 0 {
		t.Errorf("a fresh v1 on the naive schema 2 answered %v", codes)
	}
}

// exec runs one statement against url.
func exec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Expand/contract: on schema 2 both binaries route every domain, whichever column a writer sets;
// on schema 3 v2 routes and v1's loads fail (fail-static keeps its last table; a new v1 is never
// ready), which is why the contract waits until no v1 pod exists.
func TestExpandContract(t *testing.T) {
	url := newDatabase(t, pg)
	migrateSet(t, url, setExpandContract, 1)
	v1 := routerFor(t, url, v1Text)
	waitAllRoute(t, "v1 on schema 1", v1)

	migrateSet(t, url, setExpandContract, 2)
	v2 := routerFor(t, url, v2JSON)
	eventually(t, "v2 is ready on schema 2", func() bool { return code(t, v2, "", "/ready") == 200 })
	for _, ts := range []*httptest.Server{v1, v2} {
		waitAllRoute(t, "both route on schema 2", ts)
	}
	if n := metric(t, v1, "edge_router_invalid_routes"); n != 0 {
		t.Errorf("v1 on the expanded schema counted %v invalid routes", n)
	}

	// A writer of either binary's era: the trigger keeps the other column in step.
	for _, sql := range []string{
		`INSERT INTO routes (domain, upstream) VALUES ('old.example', 'http://old.internal:8080')`,
		`INSERT INTO routes (domain, target) VALUES ('new.example', '{"url": "http://new.internal:8080"}')`,
		`UPDATE routes SET upstream = 'http://moved-03.internal:8080' WHERE domain = 'd03.example'`,
		`UPDATE routes SET target = '{"url": "http://moved-04.internal:8080"}' WHERE domain = 'd04.example'`,
	} {
		exec(t, url, sql)
	}
	want := map[string]string{
		"old.example": "http://old.internal:8080", "new.example": "http://new.internal:8080",
		"d03.example": "http://moved-03.internal:8080", "d04.example": "http://moved-04.internal:8080",
	}
	for _, ts := range []*httptest.Server{v1, v2} {
		for host, upstream := range want {
			line := host + " -> " + upstream + "\n"
			eventually(t, host+" routes to "+upstream, func() bool { _, body, _ := get(t, ts, host, "/"); return body == line })
		}
	}

	migrateSet(t, url, setExpandContract, 3)
	if n := query[int](t, url, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'routes' AND column_name = 'upstream'`); n != 0 {
		t.Errorf("the contract left the text column")
	}
	errs := metric(t, v1, "edge_router_route_load_errors_total")
	eventually(t, "v1's loads fail on schema 3", func() bool { return metric(t, v1, "edge_router_route_load_errors_total") >= errs+3 })
	if ok, codes := allCodes(t, v1); ok != 20 {
		t.Errorf("fail-static v1 on schema 3 answered %v, want its last table", codes)
	}
	time.Sleep(300 * time.Millisecond)
	if ok, codes := allCodes(t, v2); ok != 20 || code(t, v2, "new.example", "/") != 200 {
		t.Errorf("v2 on schema 3 answered %v", codes)
	}
	fresh := routerFor(t, url, v1Text)
	eventually(t, "a fresh v1 has tried to load", func() bool { return metric(t, fresh, "edge_router_route_load_errors_total") >= 3 })
	if c, body, _ := get(t, fresh, "", "/ready"); c != 503 || !strings.Contains(body, "no route load has succeeded") {
		t.Errorf("a fresh v1 on schema 3: /ready %d %q", c, body)
	}
}

// The contract's report says 3: schemagate confirms the contract from it.
func TestContractWritesASchemaReport(t *testing.T) {
	url := newDatabase(t, pg)
	path := filepath.Join(t.TempDir(), "termination-log")
	for _, v := range []uint{2, 3} {
		if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: v, Set: setExpandContract, ReportPath: path}, io.Discard); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		if r, err := schemareport.Parse(b); err != nil || r.Version != fmt.Sprint(v) || r.Dirty {
			t.Errorf("report after migrating to %d: %+v %v", v, r, err)
		}
	}
	// The naive set has no 3; the region set's 2 is another schema 2 (a database keeps one set).
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: newDatabase(t, pg), Target: 3, Set: setNaive}, io.Discard); err == nil || !strings.Contains(err.Error(), "no migration 3") {
		t.Errorf("naive set to 3: %v", err)
	}
}

func TestTargetFlags(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://db/routes")
	if c, err := parseServeFlags(nil); err != nil || c.TargetFormat != formatText || c.TargetColumn != "upstream" {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if c, err := parseServeFlags([]string{"--target-format=json", "--schema=2"}); err != nil || c.TargetColumn != "target" {
		t.Errorf("json defaults: %+v %v", c, err)
	}
	for _, bad := range [][]string{{"--target-format=yaml"}, {"--target-column=x;drop"}, {"--schema=3"}} {
		if _, err := parseServeFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if c, err := parseServeFlags([]string{"--target-format=json", "--schema=3"}); err != nil || c.Schema != 3 {
		t.Errorf("json on schema 3: %+v %v", c, err)
	}
	t.Setenv("SCHEMAGATE_SCHEMA_VERSION", "3")
	if c, err := parseMigrateFlags([]string{"--migrations=expand-contract"}); err != nil || c.Set != setExpandContract {
		t.Errorf("migrate --migrations: %+v %v", c, err)
	}
	t.Setenv("EDGE_ROUTER_MIGRATIONS", "naive")
	if c, err := parseMigrateFlags(nil); err != nil || c.Set != setNaive {
		t.Errorf("EDGE_ROUTER_MIGRATIONS: %+v %v", c, err)
	}
	if _, err := parseMigrateFlags([]string{"--migrations=bogus"}); err == nil {
		t.Error("--migrations=bogus accepted")
	}
}

// validTarget is what a router accepts as an upstream.
func TestValidTarget(t *testing.T) {
	for target, want := range map[string]bool{
		"http://upstream-03.internal:8080": true, "https://a.example": true,
		`{"url": "http://upstream-03.internal:8080"}`: false, "": false, "upstream:8080": false, "ftp://x": false,
	} {
		if got := validTarget(target); got != want {
			t.Errorf("validTarget(%q) = %v", target, got)
		}
	}
}

// --unready-in-region is a revision that never becomes ready in one region (a failure in one
// shard that no client sees: unready pods get no traffic).
func TestUnreadyInRegion(t *testing.T) {
	url := newDatabase(t, pg)
	migrateTo(t, url, 1)
	there := routerFor(t, url, serveConfig{Schema: 1, CheckSchema: true, UnreadyInRegion: "us-east"})
	elsewhere := routerFor(t, url, serveConfig{Schema: 1, CheckSchema: true, UnreadyInRegion: "eu-west"})
	eventually(t, "ready where it may be", func() bool { return code(t, elsewhere, "", "/ready") == 200 })
	if c, body, _ := get(t, there, "", "/ready"); c != 503 || !strings.Contains(body, "unready in region us-east") {
		t.Errorf("/ready in the unready region: %d %q", c, body)
	}
	// It routes once its first load is done (each router loads on its own; only /ready fails).
	eventually(t, "routing in the unready region", func() bool { return code(t, there, "d01.example", "/") == 200 })
}
