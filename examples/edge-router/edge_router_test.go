package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/test/postgres"
	"path/filepath"

	"github.com/schemagate/schemagate/pkg/schemareport"
)

// pg is a real PostgreSQL server shared by the tests; each test works in a database of its own.
var pg *postgres.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var err error
	pg, err = postgres.Start(ctx, postgres.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = pg.Close()
	os.Exit(code)
}

var databases atomic.Int32

// newDatabase creates an empty database named after the test on srv and returns its URL.
func newDatabase(t *testing.T, srv *postgres.Server) string {
	t.Helper()
	name := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "_")
	name = fmt.Sprintf("%s_%d", name, databases.Add(1))
	if err := srv.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return srv.URL(name)
}

func migrateTo(t *testing.T, url string, target uint) string {
	t.Helper()
	var out bytes.Buffer
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: target}, &out); err != nil {
		t.Fatalf("migrate to %d: %v", target, err)
	}
	return out.String()
}

func query[T any](t *testing.T, url, sql string) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(t.Context(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// router runs a router (its refresh loop and an httptest server on 127.0.0.1) until the test ends.
func router(t *testing.T, url string, schema int, checkSchema bool, policy string) *httptest.Server {
	t.Helper()
	s := newServer(serveConfig{DatabaseURL: url, Schema: schema, CheckSchema: checkSchema, CachePolicy: policy,
		Refresh: 100 * time.Millisecond, CacheTTL: time.Second, Revision: fmt.Sprintf("v%d", schema), Region: "us-east"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.table.refresh(ctx) }()
	ts := httptest.NewServer(s.handler())
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	return ts
}

// get sends a request for host (with a port, in upper case, as clients may) and returns the
// status code, body and X-Revision header.
func get(t *testing.T, ts *httptest.Server, host, path string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("X-Revision")
}

func code(t *testing.T, ts *httptest.Server, host, path string) int {
	t.Helper()
	c, _, _ := get(t, ts, host, path)
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// metric returns the value of one sample of the router's /metrics, e.g. `edge_router_routes`.
func metric(t *testing.T, ts *httptest.Server, sample string) float64 {
	t.Helper()
	_, body, _ := get(t, ts, "", "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in /metrics:\n%s", sample, body)
	return 0
}

func seeded(i int) string { return fmt.Sprintf("d%02d.example", i) }

func TestMigrateUpOnlyAndIdempotent(t *testing.T) {
	url := newDatabase(t, pg)

	if out := migrateTo(t, url, 1); out != "migrated schema from version 0 to 1\n" {
		t.Errorf("first migration printed %q", out)
	}
	if n := query[int](t, url, `SELECT count(*) FROM routes`); n != 20 {
		t.Errorf("migration 1 seeded %d routes, want 20", n)
	}
	if out := migrateTo(t, url, 1); !strings.Contains(out, "nothing to do") {
		t.Errorf("migrating again to 1 printed %q", out)
	}

	start := time.Now()
	var out bytes.Buffer
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: 2, Delay: 500 * time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "migrated schema from version 1 to 2\n" || time.Since(start) < 500*time.Millisecond {
		t.Errorf("migration to 2 printed %q after %s (delay 500ms)", out.String(), time.Since(start))
	}
	if r := query[string](t, url, `SELECT region FROM routes WHERE domain = 'd04.example'`); r != "eu-west" {
		t.Errorf("d04.example's region is %q after migration 2", r)
	}

	// Never down: an older target leaves schema 2 and its column in place.
	if out := migrateTo(t, url, 1); !strings.Contains(out, "schema is at version 2, target 1: nothing to do") {
		t.Errorf("migrating to 1 on schema 2 printed %q", out)
	}
	if v := query[int64](t, url, `SELECT version FROM schema_migrations`); v != 2 {
		t.Errorf("schema version is %d after asking for 1, want 2", v)
	}

	err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: 3}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no migration 3") {
		t.Errorf("migrating to a version the binary does not have: %v", err)
	}

	// A dirty database needs a human: migrate refuses, whatever the target.
	if !query[bool](t, url, `UPDATE schema_migrations SET dirty = true RETURNING dirty`) {
		t.Fatal("could not mark the database dirty")
	}
	for _, target := range []uint{1, 2} {
		err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: target}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "dirty") {
			t.Errorf("migrating a dirty database to %d: %v", target, err)
		}
	}
}

func TestSchema1Router(t *testing.T) {
	url := newDatabase(t, pg)
	ts := router(t, url, 1, true, policyFailStatic)

	// Before its migration the router is alive but not ready.
	eventually(t, "the schema is read", func() bool {
		_, body, _ := get(t, ts, "", "/ready")
		return strings.Contains(body, "database schema is 0, this binary needs 1")
	})
	if c := code(t, ts, "", "/healthz"); c != 200 {
		t.Errorf("/healthz: %d", c)
	}
	migrateTo(t, url, 1)
	eventually(t, "ready after migration 1", func() bool { return code(t, ts, "", "/ready") == 200 })

	c, body, rev := get(t, ts, "D03.Example:8080", "/")
	if c != 200 || body != "d03.example -> http://upstream-03.internal:8080\n" || rev != "v1" {
		t.Errorf("d03.example: %d %q X-Revision %q", c, body, rev)
	}
	if c, body, rev := get(t, ts, "unknown.example", "/"); c != 404 || rev != "v1" {
		t.Errorf("unknown.example: %d %q X-Revision %q", c, body, rev)
	}
	for sample, want := range map[string]float64{
		`edge_router_requests_total{code="200"}`: 1,
		`edge_router_requests_total{code="404"}`: 1,
		`edge_router_routes`:                     20,
		`edge_router_database_schema_version`:    1,
	} {
		if got := metric(t, ts, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
	if n := metric(t, ts, "edge_router_route_load_errors_total"); n < 1 {
		t.Errorf("%v load errors, want some (routes did not exist before migration 1)", n)
	}
	if age := metric(t, ts, "edge_router_route_table_age_seconds"); age < 0 || age > 1 {
		t.Errorf("route table age %vs with a 100ms refresh", age)
	}

	// Expand-only: the schema-1 router keeps routing on schema 2.
	migrateTo(t, url, 2)
	time.Sleep(300 * time.Millisecond)
	if c, body, _ := get(t, ts, "d03.example", "/"); c != 200 || code(t, ts, "", "/ready") != 200 {
		t.Errorf("schema-1 router on schema 2: %d %q", c, body)
	}
}

// TestSchema2RouterOnSchema1Database is the incident: the v2 binary reaches a database still on
// schema 1. The schema-aware binary is never ready (so it gets no traffic); the original one
// (--check-schema=false, --cache-policy=fail-empty) is ready and answers 404 for every domain.
func TestSchema2RouterOnSchema1Database(t *testing.T) {
	url := newDatabase(t, pg)
	migrateTo(t, url, 1)
	v1 := router(t, url, 1, true, policyFailStatic)
	gated := router(t, url, 2, true, policyFailStatic)
	original := router(t, url, 2, false, policyFailEmpty)

	eventually(t, "the v2 routers have tried to load", func() bool {
		return metric(t, gated, "edge_router_route_load_errors_total") >= 3 &&
			metric(t, original, "edge_router_route_load_errors_total") >= 3
	})
	if c, body, _ := get(t, gated, "", "/ready"); c != 503 || !strings.Contains(body, "database schema is 1, this binary needs 2") {
		t.Errorf("schema-aware v2 on schema 1: /ready %d %q", c, body)
	}
	if c := code(t, original, "", "/ready"); c != 200 {
		t.Errorf("original v2 on schema 1: /ready %d, want 200 (it does not check)", c)
	}
	for i := range 20 {
		if c := code(t, original, seeded(i), "/"); c != 404 {
			t.Errorf("original v2 on schema 1: %s answered %d, want the incident's 404", seeded(i), c)
		}
		if c := code(t, v1, seeded(i), "/"); c != 200 {
			t.Errorf("v1 on schema 1: %s answered %d", seeded(i), c)
		}
	}
	if n := metric(t, original, `edge_router_requests_total{code="404"}`); n != 20 {
		t.Errorf("original v2 counted %v 404s, want 20", n)
	}

	// The migration is the remediation: both v2 routers come good, and v1 never stopped.
	migrateTo(t, url, 2)
	eventually(t, "the schema-aware v2 router is ready", func() bool { return code(t, gated, "", "/ready") == 200 })
	for _, ts := range []*httptest.Server{gated, original, v1} {
		eventually(t, "d04.example routes", func() bool { return code(t, ts, "d04.example", "/") == 200 })
	}
	if _, body, rev := get(t, gated, "d04.example", "/"); body != "d04.example -> http://upstream-04.internal:8080 (region eu-west)\n" || rev != "v2" {
		t.Errorf("v2 on schema 2: %q X-Revision %q", body, rev)
	}
}

// TestDatabaseOutage stops PostgreSQL for longer than the cache TTL (1s): fail-static keeps
// answering 200 from its last good table, fail-empty turns to 404; both recover afterwards.
func TestDatabaseOutage(t *testing.T) {
	srv, err := postgres.Start(t.Context(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	url := newDatabase(t, srv)
	migrateTo(t, url, 2)
	static := router(t, url, 2, true, policyFailStatic)
	empty := router(t, url, 2, true, policyFailEmpty)
	for _, ts := range []*httptest.Server{static, empty} {
		eventually(t, "ready", func() bool { return code(t, ts, "", "/ready") == 200 })
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if c := code(t, static, "d07.example", "/"); c != 200 {
			t.Fatalf("fail-static answered %d during the outage", c)
		}
	}
	// Past the TTL: fail-empty has nothing left; both stay ready (an outage is not a reason to
	// leave the endpoints), and the metrics say how stale the table is.
	if c := code(t, empty, "d07.example", "/"); c != 404 {
		t.Errorf("fail-empty answered %d past the TTL, want 404", c)
	}
	for _, ts := range []*httptest.Server{static, empty} {
		if c := code(t, ts, "", "/ready"); c != 200 {
			t.Errorf("/ready %d during the outage", c)
		}
		if age := metric(t, ts, "edge_router_route_table_age_seconds"); age < 2 {
			t.Errorf("route table age %vs after 2.5s without the database", age)
		}
		if n := metric(t, ts, "edge_router_route_load_errors_total"); n < 5 {
			t.Errorf("%v load errors after 2.5s without the database", n)
		}
	}
	if n := metric(t, static, "edge_router_routes"); n != 20 {
		t.Errorf("fail-static serves %v routes during the outage, want 20", n)
	}
	if n := metric(t, empty, "edge_router_routes"); n != 0 {
		t.Errorf("fail-empty serves %v routes during the outage, want 0", n)
	}

	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fail-empty routes again", func() bool { return code(t, empty, "d07.example", "/") == 200 })
	// The two routers reload on their own timers: on a busy machine fail-static's next load may
	// come a moment after fail-empty's (CI saw 3.4 s), so its table is waited for too.
	eventually(t, "fail-static's table is fresh again", func() bool {
		return metric(t, static, "edge_router_route_table_age_seconds") <= 1
	})
}

func TestFlags(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://db/routes")
	t.Setenv("POD_IP", "127.0.0.7")
	t.Setenv("REVISION", "v9")
	t.Setenv("REGION", "ap-south")
	c, err := parseServeFlags(nil)
	if err != nil || c.Listen != "127.0.0.7:8080" || c.Schema != 1 || !c.CheckSchema || c.CachePolicy != policyFailStatic ||
		c.Refresh != time.Second || c.CacheTTL != 5*time.Second || c.Revision != "v9" || c.Region != "ap-south" {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	if _, err := parseServeFlags([]string{"--schema=3"}); err == nil {
		t.Error("--schema=3 accepted")
	}
	if _, err := parseServeFlags([]string{"--cache-policy=fail-open"}); err == nil {
		t.Error("--cache-policy=fail-open accepted")
	}
	t.Setenv("SCHEMAGATE_SCHEMA_VERSION", "2")
	if c, err := parseMigrateFlags([]string{"--delay=3s"}); err != nil || c.Target != 2 || c.Delay != 3*time.Second {
		t.Errorf("migrate flags: %+v, %v", c, err)
	}
	t.Setenv("SCHEMAGATE_SCHEMA_VERSION", "")
	if _, err := parseMigrateFlags(nil); err == nil {
		t.Error("migrate without SCHEMAGATE_SCHEMA_VERSION accepted")
	}
	if got := migrateURL("postgresql://u@h/db?sslmode=disable"); got != "pgx5://u@h/db?sslmode=disable" {
		t.Errorf("migrateURL: %s", got)
	}
}

// migrate writes a schema report (docs/schema-report.md) after each run: the version reached, and
// dirty when a migration failed half-way — also when the run itself fails.
func TestMigrateWritesASchemaReport(t *testing.T) {
	url := newDatabase(t, pg)
	path := filepath.Join(t.TempDir(), "termination-log")
	read := func() schemareport.Report {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := schemareport.Parse(b)
		if err != nil {
			t.Fatalf("the report does not parse: %v: %s", err, b)
		}
		return r
	}
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: 2, ReportPath: path}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.Version != "2" || r.Dirty || r.Tool != "golang-migrate" {
		t.Fatalf("after migrating to 2: %+v", r)
	}
	if !query[bool](t, url, `UPDATE schema_migrations SET dirty = true RETURNING dirty`) {
		t.Fatal("could not mark the database dirty")
	}
	if err := runMigrate(t.Context(), migrateConfig{DatabaseURL: url, Target: 2, ReportPath: path}, io.Discard); err == nil {
		t.Fatal("a dirty database was migrated")
	}
	if r := read(); r.Version != "2" || !r.Dirty {
		t.Fatalf("a dirty database must be reported dirty: %+v", r)
	}
}

// --lose-every-nth-route=4 drops d03, d07, d11, d15 and d19 of the 20 seeded domains: 25% of
// domains answer 404 while the router is Ready (issue 11's bad v2).
func TestLoseEveryNthRoute(t *testing.T) {
	routes := map[string]route{}
	for i := 0; i < 20; i++ {
		routes[fmt.Sprintf("d%02d.example", i)] = route{}
	}
	loseEveryNth(routes, 4)
	for _, lost := range []string{"d03.example", "d07.example", "d11.example", "d15.example", "d19.example"} {
		if _, ok := routes[lost]; ok {
			t.Errorf("%s kept", lost)
		}
	}
	if len(routes) != 15 {
		t.Errorf("%d routes left, want 15", len(routes))
	}
	if _, err := parseServeFlags([]string{"--database-url=postgres://x/y", "--lose-every-nth-route=-1"}); err == nil {
		t.Error("--lose-every-nth-route=-1 accepted")
	}
}

// --memory-per-request keeps that many bytes per routed request: the resident set grows with load.
func TestMemoryPerRequest(t *testing.T) {
	for _, bad := range []string{"-1", "99999999999"} {
		if _, err := parseServeFlags([]string{"--database-url=postgres://x/y", "--memory-per-request=" + bad}); err == nil {
			t.Errorf("--memory-per-request=%s accepted", bad)
		}
	}
	c, err := parseServeFlags([]string{"--database-url=postgres://x/y", "--memory-per-request=1048576"})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(c)
	h := s.handler()
	for i := 0; i < 8; i++ {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://a.example/", nil))
	}
	kept := 0
	for _, b := range s.ballast {
		kept += len(b)
	}
	if kept != 8<<20 {
		t.Fatalf("kept %d bytes after 8 requests, want %d", kept, 8<<20)
	}
}

// golang-migrate marks the database dirty at version n while migration n runs (and leaves it so
// if n fails half-way): every migration below n is complete. A binary that needs a schema below
// n keeps serving, so a migration that is slow, or waits for a lock, never takes the serving
// revision out of its endpoints; a binary that needs n or more is not ready.
func TestDirtyAboveTheNeededSchemaStaysReady(t *testing.T) {
	for _, c := range []struct {
		need, db int
		dirty    bool
		ready    bool
	}{
		{need: 1, db: 2, dirty: true, ready: true},
		{need: 2, db: 2, dirty: true, ready: false},
		{need: 3, db: 2, dirty: true, ready: false},
		{need: 1, db: 1, dirty: true, ready: false},
		{need: 1, db: 2, dirty: false, ready: true},
	} {
		tb := &table{cfg: serveConfig{Schema: c.need, CheckSchema: true}, dbSchema: c.db, dbDirty: c.dirty, schemaKnown: true, loadedAt: time.Now()}
		if why := tb.notReady(); (why == "") != c.ready {
			t.Errorf("needs %d, database at %d dirty %v: notReady %q, want ready %v", c.need, c.db, c.dirty, why, c.ready)
		}
	}
}
