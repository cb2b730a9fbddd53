package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/test/postgres"
)

// pg is the real PostgreSQL server of this test binary; each test works in a database of its
// own. Its pg_hba.conf also makes pwUser log in with a password (pwUserPassword), so that a
// wrong password really fails, for the redaction tests.
var (
	pg     *postgres.Server
	tmpDir string // the server's directory and the built binary
)

const (
	pwUser         = "pwuser"
	pwUserPassword = "the-right-one"
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if tmpDir, err = os.MkdirTemp("", "sgs-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmpDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if pg, err = postgres.Start(ctx, postgres.Options{Dir: filepath.Join(tmpDir, "pg")}); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		return 1
	}
	defer pg.Close()
	if err := requirePassword(ctx, filepath.Join(tmpDir, "pg", "data", "pg_hba.conf")); err != nil {
		fmt.Fprintln(os.Stderr, "setting up a user with a password:", err)
		return 1
	}
	return m.Run()
}

// requirePassword creates pwUser and makes the server ask it for its password (the harness trusts
// everyone), then waits until the reloaded configuration is in force.
func requirePassword(ctx context.Context, hbaPath string) error {
	old, err := os.ReadFile(hbaPath)
	if err != nil {
		return err
	}
	rule := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", pwUser)
	if err := os.WriteFile(hbaPath, append([]byte(rule), old...), 0o600); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pwUser, pwUserPassword)); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:wrong@127.0.0.1:%d/postgres?sslmode=disable", pwUser, pg.Port()))
		if err != nil {
			if strings.Contains(err.Error(), "password authentication failed") {
				return nil
			}
			return err
		}
		_ = c.Close(ctx)
		if time.Now().After(deadline) {
			return errors.New("the server still accepts a wrong password after reloading pg_hba.conf")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var databases atomic.Int32

// newDatabase creates an empty database named after the test and returns its URL.
func newDatabase(t testing.TB) string {
	t.Helper()
	name := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 50 {
		name = name[len(name)-50:]
	}
	name = fmt.Sprintf("d%d_%s", databases.Add(1), name)
	if err := pg.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return pg.URL(name)
}

// execSQL runs statements in the database at url.
func execSQL(t testing.TB, url string, statements ...string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range statements {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// closedPort returns a loopback port nothing listens on (free when asked, and nothing here
// binds it).
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds schemagate-schema once per test binary and returns its path, so that the CLI
// tests run the real program: flags, exit codes, signals.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(tmpDir, "bin", progName)
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is what a run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// runBinary runs the built binary with args and only the environment env (plus PATH and HOME),
// so that nothing of the test's environment (TERMINATION_MESSAGE_PATH, PG*) leaks in.
func runBinary(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running %s: %v", progName, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}
