package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"

	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/test/postgres"
)

// These tests run the built binary, so that flags, exit codes, files and signals are the real
// ones.

func TestHelp(t *testing.T) {
	var flags []string
	for _, command := range []string{"report", "run"} {
		fs, _ := newFlagSet(command)
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, "--"+f.Name) })
	}
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"report", "-h"}, {"report", "--help"}, {"run", "-h"}, {"run", "--tool", "goose", "-h"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			r := runBinary(t, nil, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
			}
			want := append([]string{
				"schemagate-schema report --tool TOOL", "schemagate-schema run --tool TOOL",
				"Exit codes:", "\n  0 ", "\n  1 ", "\n  2 ", "\n  3 ", "\n  4 ",
				"report (a check Job):", "run (a migration Job):", "secretKeyRef",
			}, flags...)
			for _, name := range toolOrder {
				want = append(want, "\n  "+name+" ")
			}
			for _, w := range want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("the help does not say %q", w)
				}
			}
		})
	}
}

// TestBadInput: usage errors exit 1 and write nothing; a version that is not a version exits 2.
func TestBadInput(t *testing.T) {
	url := "postgres://schemagate@127.0.0.1:1/x?sslmode=disable"
	withURL := []string{"DATABASE_URL=" + url}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no_command", withURL, nil, "a command is required"},
		{"unknown_command", withURL, []string{"status"}, `unknown command "status"`},
		{"no_tool", withURL, []string{"report"}, "--tool is required"},
		{"unknown_tool", withURL, []string{"report", "--tool", "sqitch"}, `unknown tool "sqitch"`},
		{"unknown_flag", withURL, []string{"report", "--tool", "goose", "--verbose"}, "flag provided but not defined: -verbose"},
		{"missing_env_var", nil, []string{"report", "--tool", "goose"}, "DATABASE_URL is not set or empty"},
		{"missing_custom_env_var", withURL, []string{"report", "--tool", "goose", "--database-url-env", "APP_DB"}, "APP_DB is not set or empty"},
		{"report_arguments", withURL, []string{"report", "--tool", "goose", "up"}, "report takes no arguments"},
		{"run_without_command", withURL, []string{"run", "--tool", "goose", "--"}, "run needs the migration command"},
		{"lock_table_not_liquibase", withURL, []string{"report", "--tool", "flyway", "--lock-table", "x"}, "--lock-table is for --tool liquibase"},
		{"bad_timeout", withURL, []string{"report", "--tool", "goose", "--timeout", "0s"}, "--timeout must be positive"},
		{"bad_url", []string{"DATABASE_URL=postgres://a b@/"}, []string{"report", "--tool", "goose"}, "cannot be used"},
		{"require_not_a_version", withURL, []string{"report", "--tool", "goose", "--require", "v2"}, `--require "v2" is not a version`},
		{"require_empty", withURL, []string{"report", "--tool", "goose", "--require", ""}, `--require "" is not a version`},
		{"require_with_run", withURL, []string{"run", "--tool", "goose", "--require", "2", "--", "true"}, "flag provided but not defined: -require"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			args := c.args
			if len(args) > 0 {
				args = append(args[:1:1], append([]string{"--report-path", path}, args[1:]...)...)
			}
			r := runBinary(t, c.env, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", r.code, r.stdout, r.stderr, c.want)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a report file was written: %v", err)
			}
		})
	}

	// Not a version: the read fails (exit 2), naming the value, and nothing is reported.
	t.Run("flyway_1.2-beta", func(t *testing.T) {
		db := newDatabase(t)
		flyway("", flywayRow{1, "1.2-beta", "SQL", true})(t, db)
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + db}, "report", "--tool", "flyway", "--report-path", path)
		if r.code != exitNoReport || !strings.Contains(r.stderr, `"1.2-beta" is not a dotted numeric version`) || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming 1.2-beta", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a report file was written: %v", err)
		}
	})
	t.Run("liquibase_release-x", func(t *testing.T) {
		db := newDatabase(t)
		liquibase(false, liquibaseRow{1, "EXECUTED", "release-x"})(t, db)
		r := runBinary(t, []string{"DATABASE_URL=" + db}, "report", "--tool", "liquibase", "--report-path", "-")
		if r.code != exitNoReport || !strings.Contains(r.stderr, `tag "release-x"`) || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming release-x", r.code, r.stdout, r.stderr)
		}
	})
}

// dirtyMigrateDB returns a database golang-migrate left dirty at version 3.
func dirtyMigrateDB(t *testing.T) string {
	url := newDatabase(t)
	if err := withMigrate(t, url, "fails", (*migrate.Migrate).Up); err == nil {
		t.Fatal("migration 3 did not fail")
	}
	return url
}

func TestReportCommand(t *testing.T) {
	clean := newDatabase(t)
	mustMigrate("good", (*migrate.Migrate).Up)(t, clean)
	dirty := dirtyMigrateDB(t)

	t.Run("clean_exit_0", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + clean}, "report", "--tool", "golang-migrate", "--report-path", path)
		if r.code != exitClean {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, path, r, "3", false)
	})
	t.Run("dirty_exit_3", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + dirty}, "report", "--tool", "golang-migrate", "--report-path", path)
		if r.code != exitDirty || !strings.Contains(r.stderr, "dirty at version 3") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, path, r, "3", true)
	})
	// --require: a clean database below the version exits 4, with its report written all the same
	// (the gate reads it); at or above it, 0; a dirty one is 3 whatever --require says.
	for _, c := range []struct {
		url, require string
		code         int
	}{{clean, "3", exitClean}, {clean, "2.9", exitClean}, {clean, "3.0.1", exitBelow}, {clean, "10", exitBelow}, {dirty, "10", exitDirty}} {
		t.Run("require_"+c.require+"_exit_"+strconv.Itoa(c.code), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			r := runBinary(t, []string{"DATABASE_URL=" + c.url}, "report", "--tool", "golang-migrate", "--require", c.require, "--report-path", path)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			if below := strings.Contains(r.stderr, "below --require "+c.require); below != (c.code == exitBelow) {
				t.Fatalf("stderr %q: says below %v, want %v", r.stderr, below, c.code == exitBelow)
			}
			checkFileAndStdout(t, path, r, "3", c.url == dirty)
		})
	}
	t.Run("termination_message_path_env", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"APP_DB=" + clean, "TERMINATION_MESSAGE_PATH=" + path},
			"report", "--tool", "golang-migrate", "--database-url-env", "APP_DB")
		if r.code != exitClean {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, path, r, "3", false)
	})
	t.Run("report_path_flag_wins_over_env", func(t *testing.T) {
		dir := t.TempDir()
		flagPath, envPath := filepath.Join(dir, "flag"), filepath.Join(dir, "env")
		r := runBinary(t, []string{"DATABASE_URL=" + clean, "TERMINATION_MESSAGE_PATH=" + envPath},
			"report", "--tool", "golang-migrate", "--report-path", flagPath)
		if r.code != exitClean {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, flagPath, r, "3", false)
		if _, err := os.Stat(envPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("$TERMINATION_MESSAGE_PATH was written too: %v", err)
		}
	})
	t.Run("default_path_missing", func(t *testing.T) {
		if _, err := os.Stat(defaultReportPath); err == nil {
			t.Skipf("%s exists here", defaultReportPath)
		}
		r := runBinary(t, []string{"DATABASE_URL=" + clean}, "report", "--tool", "golang-migrate")
		if r.code != exitClean || !strings.Contains(r.stderr, "/dev/termination-log does not exist") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkReport(t, []byte(strings.TrimSuffix(r.stdout, "\n")), "3", false, "golang-migrate")
		if _, err := os.Stat(defaultReportPath); err == nil {
			t.Errorf("%s was created", defaultReportPath)
		}
	})
	t.Run("explicit_path_missing_exit_2", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no-such-dir", "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + clean}, "report", "--tool", "golang-migrate", "--report-path", path)
		if r.code != exitNoReport || !strings.Contains(r.stderr, "no schema report at "+path) {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("unreachable_exit_2", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		url := fmt.Sprintf("postgres://schemagate@127.0.0.1:%d/x?sslmode=disable", closedPort(t))
		r := runBinary(t, []string{"DATABASE_URL=" + url}, "report", "--tool", "golang-migrate", "--report-path", path)
		if r.code != exitNoReport || r.stdout != "" || !strings.Contains(r.stderr, "connection refused") {
			t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a report file was written: %v", err)
		}
	})
	t.Run("timeout_exit_2", func(t *testing.T) {
		// A server that accepts the connection and says nothing: only --timeout ends the wait.
		l := silentListener(t)
		url := fmt.Sprintf("postgres://schemagate@%s/x?sslmode=disable", l)
		start := time.Now()
		r := runBinary(t, []string{"DATABASE_URL=" + url}, "report", "--tool", "goose", "--report-path", "-", "--timeout", "300ms")
		if r.code != exitNoReport || !strings.Contains(r.stderr, "--timeout 300ms") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s with --timeout 300ms", d)
		}
	})
}

// checkFileAndStdout checks that the report at path is the one expected and that stdout is the
// same report on one line.
func checkFileAndStdout(t *testing.T, path string, r result, version string, dirty bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no report file: %v; stderr:\n%s", err, r.stderr)
	}
	checkReport(t, b, version, dirty, "golang-migrate")
	if !strings.HasSuffix(r.stdout, string(b)+"\n") {
		t.Errorf("stdout %q does not end with the report %q on a line", r.stdout, b)
	}
}

func TestRun(t *testing.T) {
	bin, _, err := postgres.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	psql := filepath.Join(bin, "psql")

	t.Run("command_fails_exit_7_still_reports", func(t *testing.T) {
		db := dirtyMigrateDB(t)
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + db},
			"run", "--tool", "golang-migrate", "--report-path", path, "--", "sh", "-c", "echo migrating; exit 7")
		if r.code != 7 || !strings.Contains(r.stderr, "exited with code 7") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "migrating\n") {
			t.Errorf("the command's stdout was not passed through: %q", r.stdout)
		}
		checkFileAndStdout(t, path, r, "3", true)
	})
	t.Run("command_fails_report_carries_its_error_tail", func(t *testing.T) {
		db := dirtyMigrateDB(t)
		u, err := url.Parse(db)
		if err != nil {
			t.Fatal(err)
		}
		password, _ := u.User.Password()
		path := filepath.Join(t.TempDir(), "termination-log")
		script := "for i in $(seq 1 300); do echo applying step $i >&2; done; echo \"connecting to $DATABASE_URL\" >&2; echo 'ERROR: relation \"users\" already exists (SQLSTATE 42P07)' >&2; exit 1"
		r := runBinary(t, []string{"DATABASE_URL=" + db}, "run", "--tool", "golang-migrate", "--report-path", path, "--", "sh", "-c", script)
		if r.code != 1 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := schemareport.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(rep.Error, `ERROR: relation "users" already exists (SQLSTATE 42P07)`) || len(rep.Error) > schemareport.MaxErrorBytes ||
			(password != "" && strings.Contains(rep.Error, password)) || strings.Contains(rep.Error, "applying step 1\n") {
			t.Fatalf("report error (%d bytes): %q", len(rep.Error), rep.Error)
		}
	})
	t.Run("command_migrates_exit_0", func(t *testing.T) {
		db := newDatabase(t)
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + db, "TERMINATION_MESSAGE_PATH=" + path},
			"run", "--tool", "golang-migrate", "--", psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", db, "-c",
			"CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL); INSERT INTO schema_migrations VALUES (5, false)")
		if r.code != exitClean {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, path, r, "5", false)
	})
	t.Run("command_leaves_dirty_exit_3", func(t *testing.T) {
		db := newDatabase(t)
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + db},
			"run", "--tool", "golang-migrate", "--report-path", path, "--", "sh", "-c",
			`"$0" -X -q "$DATABASE_URL" -c "CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL); INSERT INTO schema_migrations VALUES (6, true)"`, psql)
		if r.code != exitDirty {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		checkFileAndStdout(t, path, r, "6", true)
	})
	t.Run("unreachable_after_success_exit_2", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		url := fmt.Sprintf("postgres://schemagate@127.0.0.1:%d/x?sslmode=disable", closedPort(t))
		r := runBinary(t, []string{"DATABASE_URL=" + url},
			"run", "--tool", "golang-migrate", "--report-path", path, "--", "true")
		if r.code != exitNoReport || r.stdout != "" || !strings.Contains(r.stderr, "no schema report") {
			t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a report file was written: %v", err)
		}
	})
	t.Run("unreachable_after_failure_keeps_its_code", func(t *testing.T) {
		url := fmt.Sprintf("postgres://schemagate@127.0.0.1:%d/x?sslmode=disable", closedPort(t))
		r := runBinary(t, []string{"DATABASE_URL=" + url},
			"run", "--tool", "golang-migrate", "--report-path", "-", "--", "sh", "-c", "exit 5")
		if r.code != 5 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("command_not_found_exit_127", func(t *testing.T) {
		db := newDatabase(t)
		path := filepath.Join(t.TempDir(), "termination-log")
		r := runBinary(t, []string{"DATABASE_URL=" + db},
			"run", "--tool", "goose", "--report-path", path, "--", "no-such-migrate-tool", "up")
		if r.code != exitNotFound || !strings.Contains(r.stderr, "cannot run no-such-migrate-tool") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, b, "0", false, "goose")
	})
	t.Run("stdin_passed_through", func(t *testing.T) {
		db := newDatabase(t)
		cmd := exec.CommandContext(t.Context(), binary(t), "run", "--tool", "goose", "--report-path", "-", "--", "cat")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + db}
		cmd.Stdin = strings.NewReader("from stdin\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(out), "from stdin\n{") {
			t.Errorf("stdout %q", out)
		}
	})
	t.Run("sigterm_forwarded", func(t *testing.T) {
		db := newDatabase(t)
		dir := t.TempDir()
		path, ready := filepath.Join(dir, "termination-log"), filepath.Join(dir, "ready")
		script := `trap 'kill $p; exit 42' TERM; sleep 30 >/dev/null 2>&1 & p=$!; : > "$READY"; wait`
		cmd := exec.CommandContext(t.Context(), binary(t), "run", "--tool", "goose", "--report-path", path, "--", "sh", "-c", script)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + db, "READY=" + ready}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatal("the command did not start")
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if cmd.ProcessState.ExitCode() != 42 {
			t.Fatalf("exit %v (want 42: the command's, after its TERM trap ran); stderr:\n%s", err, stderr.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no report after SIGTERM: %v", err)
		}
		checkReport(t, b, "0", false, "goose")
	})
}

// silentListener accepts connections on loopback and never answers, until the test ends; it
// returns its address.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}
