package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/test/postgres"
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

// lockWaiters counts the sessions waiting for a lock on table.
func lockWaiters(t *testing.T, url, table string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_catalog.pg_locks WHERE NOT granted AND relation = $1::regclass", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A migration stopped while its DDL waits for a lock must not leave its session in the lock
// queue: neither when the command ignores SIGTERM (run ends its sessions after stopGrace), nor
// when it was killed and the server has not noticed (run ends them once it has exited).
func TestRunEndsSessionsLeftWaitingForALock(t *testing.T) {
	t.Parallel()
	bin, _, err := postgres.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	psql := filepath.Join(bin, "psql")
	alter := `"$0" -X -q "$DATABASE_URL" -c "ALTER TABLE held ADD COLUMN y int"`
	for _, c := range []struct {
		name, script string
		signal       bool
	}{
		// psql ignores SIGTERM here (an ignored signal is inherited), as a tool that does not
		// cancel its statement would.
		{"ignores_sigterm", `trap '' TERM; ` + alter, true},
		// psql is killed while it waits; the command itself exits 0.
		{"killed_client", alter + ` & p=$!; sleep 1; kill -9 $p; wait $p; exit 0`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := newDatabase(t)
			execSQL(t, db, "CREATE TABLE held (x int)")
			holdLock(t, db, "held", "ACCESS SHARE")
			path := filepath.Join(t.TempDir(), "termination-log")
			cmd := exec.CommandContext(t.Context(), binary(t), "run", "--tool", "golang-migrate", "--report-path", path, "--", "sh", "-c", c.script, psql)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + db}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); lockWaiters(t, db, "held") == 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("the ALTER TABLE never waited for the lock; stderr:\n%s", stderr.String())
				}
			}
			if c.signal {
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				t.Logf("run exited: %v", err) // the command's code: psql's, once its session was ended
			case <-time.After(stopGrace + 8*time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("run did not exit; stderr:\n%s", stderr.String())
			}
			if n := lockWaiters(t, db, "held"); n != 0 {
				t.Fatalf("%d sessions still wait for the lock after run exited; stderr:\n%s", n, stderr.String())
			}
			if !strings.Contains(stderr.String(), "ended 1 database session(s) it left behind") {
				t.Errorf("stderr does not say a session was ended:\n%s", stderr.String())
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("no report: %v", err)
			}
		})
	}
}
