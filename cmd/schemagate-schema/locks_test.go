package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"
)

// holdLock opens a transaction on url that takes lock on table and keeps it until the test ends,
// as a nightly dump, a long transaction or a migration's DDL would.
func holdLock(t *testing.T, url, table, mode string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+table+" IN "+mode+" MODE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
}

// The read-only check takes no lock that could queue: while another session holds a lock that
// conflicts with a read of the tool's table (a migration's ALTER TABLE waiting or running, a
// TRUNCATE in an open transaction), report gives up after --lock-timeout, long before --timeout,
// and says why; it never waits in the lock queue where every later query would wait behind it.
func TestReportLockTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		args    []string
		maxWait time.Duration
		want    string
	}{
		{"default_2s", nil, 6 * time.Second, "lock_timeout 2s"},
		{"flag_500ms", []string{"--lock-timeout", "500ms"}, 3 * time.Second, "lock_timeout 500ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := newDatabase(t)
			mustMigrate("good", (*migrate.Migrate).Up)(t, url)
			holdLock(t, url, "schema_migrations", "ACCESS EXCLUSIVE")
			began := time.Now()
			r := reportInProcess(t, url, append([]string{"--tool", "golang-migrate", "--timeout", "20s"}, c.args...)...)
			took := time.Since(began)
			if r.code != exitNoReport || r.file != nil || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "locked by another session") {
				t.Fatalf("exit %d, report %q, stderr %q; want exit 2, no report, and a message naming the lock and %q", r.code, r.file, r.stderr, c.want)
			}
			if took > c.maxWait {
				t.Errorf("report waited %s for the lock (want at most %s, far below --timeout 20s)", took, c.maxWait)
			}
		})
	}
	// A lock that does not conflict with a read (the one a long reader or a dump holds) does
	// not stop the check.
	t.Run("access_share_held", func(t *testing.T) {
		t.Parallel()
		url := newDatabase(t)
		mustMigrate("good", (*migrate.Migrate).Up)(t, url)
		holdLock(t, url, "schema_migrations", "ACCESS SHARE")
		r := reportInProcess(t, url, "--tool", "golang-migrate")
		if r.code != exitClean {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		checkReport(t, r.file, "3", false, "golang-migrate")
	})
}

// The session limits the report's transaction sets: lock_timeout from --lock-timeout and
// statement_timeout from --timeout, both local to the read-only transaction.
func TestReportSessionLimits(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	cfg, err := parseArgs("report", []string{"--tool", "goose", "--lock-timeout", "1500ms", "--timeout", "7s"}, func(k string) string {
		if k == "DATABASE_URL" {
			return url
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var lockTimeout, statementTimeout string
	probe := tool{name: "probe", read: func(ctx context.Context, q querier, _ target) (state, error) {
		if err := q.QueryRow(ctx, "SHOW lock_timeout").Scan(&lockTimeout); err != nil {
			return state{}, err
		}
		if err := q.QueryRow(ctx, "SHOW statement_timeout").Scan(&statementTimeout); err != nil {
			return state{}, err
		}
		return state{Version: "1"}, nil
	}}
	if _, err := readState(t.Context(), cfg.connConfig, probe, cfg.where, cfg.limits); err != nil {
		t.Fatal(err)
	}
	if lockTimeout != "1500ms" || statementTimeout != "7s" {
		t.Errorf("lock_timeout %q, statement_timeout %q; want 1500ms and 7s", lockTimeout, statementTimeout)
	}
}

func TestLockTimeoutFlag(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "DATABASE_URL" {
			return "postgres://schemagate@127.0.0.1:1/x?sslmode=disable"
		}
		return ""
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lock-timeout", "0s"}, "--lock-timeout must be positive"},
		{[]string{"--lock-timeout", "-1s"}, "--lock-timeout must be positive"},
		{[]string{"--lock-timeout", "40s", "--timeout", "30s"}, "--lock-timeout (40s) must be shorter than --timeout (30s)"},
		{[]string{"--lock-timeout", "1us"}, "--lock-timeout must be at least 1ms"},
	} {
		if _, err := parseArgs("report", append([]string{"--tool", "goose"}, c.args...), env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args            []string
		lock, statement time.Duration
	}{
		{nil, 2 * time.Second, 30 * time.Second},
		{[]string{"--timeout", "300ms"}, 150 * time.Millisecond, 300 * time.Millisecond}, // the default, halved
		{[]string{"--lock-timeout", "5s", "--timeout", "1m"}, 5 * time.Second, time.Minute},
	} {
		cfg, err := parseArgs("run", append(append([]string{"--tool", "goose"}, c.args...), "--", "true"), env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.limits.lock != c.lock || cfg.limits.statement != c.statement {
			t.Errorf("%v: limits %+v; want lock_timeout %s, statement_timeout %s (--timeout)", c.args, cfg.limits, c.lock, c.statement)
		}
	}
}
