// Package postgres starts a real PostgreSQL server (15 or later) for tests: initdb into a data
// directory, then postgres listening on 127.0.0.1 only, on a free port, with trust authentication
// for a superuser named schemagate. It is what the router, its migrations and the incident replays
// of issue 9 talk to; there is no mock database.
//
// The binaries come from the system (Debian's postgresql package; hack/install-postgres.sh installs
// it when missing): the directory `pg_config --bindir` names if it holds initdb and postgres, else
// the newest /usr/lib/postgresql/<version>/bin, else initdb's directory on $PATH.
//
// PostgreSQL refuses to run as root. When the test runs as root, initdb and postgres run as the
// unprivileged user postgres (or nobody if there is none), and the directory is chowned to it.
//
// Like the local cluster's processes, the server runs in its own process group and is killed if
// the process that started it dies (Pdeathsig); its backends notice their postmaster's death and
// exit on their own, and Stop kills any that are left after a forced shutdown.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the name of the superuser initdb creates; URL connects as it (no password).
const Superuser = "schemagate"

// MinMajorVersion is the oldest PostgreSQL major version Start accepts.
const MinMajorVersion = 15

const (
	initdbTimeout = 2 * time.Minute
	readyTimeout  = time.Minute
	stopTimeout   = 30 * time.Second
	tailBytes     = 2048
	// maxSocketPath is the longest Unix socket path Linux accepts (sun_path holds 108 bytes).
	maxSocketPath = 107
)

// Options configure a server.
type Options struct {
	// Dir receives the data directory (Dir/data), the server's Unix socket and its log
	// (Dir/postgres.log). If empty, a temporary directory is created, and Close removes it. If
	// Dir/data already holds a database cluster, it is reused instead of running initdb.
	Dir string
	// Log receives the output of initdb and the server's log as they are written (may be nil).
	Log io.Writer
	// Port is the port on 127.0.0.1 to listen on; 0 picks a free one. A fixed port stands for a
	// server a pod reaches on its own loopback (the migration probe's scratch database).
	Port int
	// User is the superuser initdb creates and URL connects as (default Superuser).
	User string
}

// Server is a PostgreSQL server started by Start. Its methods may be called from several
// goroutines.
type Server struct {
	binDir  string
	version string
	dir     string
	dataDir string
	sockDir string // "" when Dir is too long for a Unix socket path: TCP only
	logPath string
	log     io.Writer
	port    int
	user    string
	cred    *syscall.Credential // nil unless run as root
	ownDir  bool
	// stopTimeout bounds a fast shutdown before the server is killed (a field for tests).
	stopTimeout time.Duration

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start finds the PostgreSQL binaries, initialises a database cluster in opts.Dir (unless one is
// there already), starts the server on a free port of 127.0.0.1 and waits until it accepts
// connections. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	binDir, version, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{binDir: binDir, version: version, log: opts.Log, stopTimeout: stopTimeout, user: cmp.Or(opts.User, Superuser)}
	if opts.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "schemagate-pg-"); err != nil {
			return nil, fmt.Errorf("postgres: creating a temporary directory: %w", err)
		}
		s.ownDir = true
	} else {
		if s.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("postgres: creating %s: %w", s.dir, err)
		}
	}
	defer func() {
		if err != nil && s.ownDir {
			_ = os.RemoveAll(s.dir)
		}
	}()
	if d, err := filepath.EvalSymlinks(s.dir); err == nil {
		s.dir = d
	}
	s.dataDir = filepath.Join(s.dir, "data")
	s.logPath = filepath.Join(s.dir, "postgres.log")
	if len(s.dir)+len("/.s.PGSQL.65535.lock") <= maxSocketPath {
		s.sockDir = s.dir
	}

	if os.Geteuid() == 0 {
		if err := s.dropPrivileges(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "PG_VERSION")); err != nil {
		if err := s.initdb(ctx); err != nil {
			return nil, err
		}
	}

	// The port is free when chosen but may be taken before postgres binds it: try another.
	for attempt := 1; ; attempt++ {
		if opts.Port != 0 {
			s.port = opts.Port
			return s, s.Start(ctx)
		}
		if s.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("postgres: choosing a port: %w", err)
		}
		err = s.Start(ctx)
		if err == nil {
			return s, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return nil, err
		}
	}
}

// Port is the TCP port the server listens on (on 127.0.0.1), the same across Stop and Start.
func (s *Server) Port() int { return s.port }

// PID is the server's process (its postmaster), or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Version is the server's version as `postgres --version` prints it, e.g. "15.18".
func (s *Server) Version() string { return s.version }

// URL is a connection string for database as the superuser, e.g.
// postgres://schemagate@127.0.0.1:5432/postgres?sslmode=disable. The database "postgres" always
// exists.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable",
		s.user, s.port, url.PathEscape(database))
}

// CreateDatabase creates database name (it must not exist yet).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("postgres: creating database %q: connecting: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: creating database %q: %w", name, err)
	}
	return nil
}

// Start starts the server again after Stop, on the same port and data directory, and waits until
// it accepts connections. It does nothing if the server is running.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			return nil
		}
	}
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("postgres: opening its log: %w", err)
	}
	args := []string{
		"-D", s.dataDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(s.port),
		"-c", "unix_socket_directories=" + s.sockDir,
		"-c", "logging_collector=off",
		// A test database: durability is not wanted, speed and a small footprint are.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB",
		"-c", "huge_pages=off",
	}
	// Not tied to ctx: ctx bounds the start, not the server's life.
	cmd := s.command(context.Background(), filepath.Join(s.binDir, "postgres"), args...)
	var out io.Writer = f
	if s.log != nil {
		out = io.MultiWriter(f, s.log)
		// Backends inherit the output pipe; do not wait for them forever once postgres exits.
		cmd.WaitDelay = 5 * time.Second
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("postgres: starting %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	if err := s.waitReady(ctx, done); err != nil {
		s.kill(cmd, done)
		return err
	}
	return nil
}

// Stop shuts the server down (fast shutdown: SIGINT, which ends open sessions) and waits for it.
// If it has not exited within 30 s, its process group and backends are killed and Stop returns an
// error. Stop does nothing if the server is not running.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd, done := s.cmd, s.done
	if cmd == nil {
		return nil
	}
	s.cmd, s.done = nil, nil
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		return nil
	case <-time.After(s.stopTimeout):
	}
	s.kill(cmd, done)
	return fmt.Errorf("postgres: did not shut down within %s; killed it%s", s.stopTimeout, s.tail())
}

// Close stops the server and, if Start created its directory, removes it.
func (s *Server) Close() error {
	err := s.Stop()
	if s.ownDir {
		if rmErr := os.RemoveAll(s.dir); err == nil {
			err = rmErr
		}
	}
	return err
}

// kill kills postgres's process group and its backends (each of which is a session leader of its
// own) and waits until they are gone.
func (s *Server) kill(cmd *exec.Cmd, done chan struct{}) {
	pid := cmd.Process.Pid
	children := childPIDs(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range children {
		for alive(c) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitReady waits until the server accepts connections, it exits, or a minute has passed.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-exited:
			return fmt.Errorf("postgres: server exited while starting on 127.0.0.1:%d%s", s.port, s.tail())
		default:
		}
		lastErr = ping(ctx, s.URL("postgres"))
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: server on 127.0.0.1:%d not accepting connections: %v (%w)%s",
				s.port, lastErr, ctx.Err(), s.tail())
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, connString string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

func (s *Server) initdb(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, initdbTimeout)
	defer cancel()
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("postgres: opening its log: %w", err)
	}
	defer f.Close()
	cmd := s.command(ctx, filepath.Join(s.binDir, "initdb"),
		"-D", s.dataDir,
		"-U", s.user,
		"-E", "UTF8",
		"--locale=C",
		"--auth-local=trust",
		"--auth-host=trust",
		"--no-sync",
		"--no-instructions",
	)
	var out io.Writer = f
	if s.log != nil {
		out = io.MultiWriter(f, s.log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("postgres: initdb -D %s: %w%s", s.dataDir, err, s.tail())
	}
	return nil
}

// command prepares a PostgreSQL program: its own process group, killed with its parent, as the
// unprivileged user when run as root, without the PG* variables of the environment (PGDATA,
// PGPORT, … must not redirect it).
func (s *Server) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = s.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: s.cred,
	}
	return cmd
}

// dropPrivileges chooses the user postgres (or nobody) to run the server as, gives it the
// directory, and makes sure it can reach it: directories above Dir that are under the system's
// temporary directory and owned by root (such as the parent of testing.T.TempDir, mode 0700) get
// the search bit for others (o+x: no listing); any other unreachable ancestor is an error.
func (s *Server) dropPrivileges() error {
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: running as root, and neither user postgres nor nobody exists to run the server as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("postgres: user %s: %w", u.Username, err)
	}
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	tmp, _ := filepath.EvalSymlinks(os.TempDir())
	for p := filepath.Dir(s.dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if !searchable(st, s.cred.Uid, s.cred.Gid) {
			sys, _ := st.Sys().(*syscall.Stat_t)
			underTmp := tmp != "" && tmp != "/" && strings.HasPrefix(p, tmp+string(filepath.Separator))
			if !underTmp || sys == nil || sys.Uid != 0 {
				return fmt.Errorf("postgres: running as root, the server runs as user %s, which cannot reach %s (%s is mode %#o): choose a Dir under %s",
					u.Username, s.dir, p, st.Mode().Perm(), os.TempDir())
			}
			if err := os.Chmod(p, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("postgres: letting user %s reach %s: %w", u.Username, s.dir, err)
			}
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	// Dir itself, and anything a previous run left in it.
	err = filepath.Walk(s.dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(uid), int(gid))
	})
	if err != nil {
		return fmt.Errorf("postgres: giving %s to user %s: %w", s.dir, u.Username, err)
	}
	return nil
}

func searchable(st os.FileInfo, uid, gid uint32) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := st.Mode().Perm()
	switch {
	case sys.Uid == uid:
		return perm&0o100 != 0
	case sys.Gid == gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// FindBinDir returns the directory holding PostgreSQL's initdb and postgres (version 15 or later)
// and the version: the directory `pg_config --bindir` names, else the newest
// /usr/lib/postgresql/<version>/bin, else initdb's directory on $PATH (symbolic links resolved, so
// that /usr/local/bin/initdb → /usr/lib/postgresql/15/bin/initdb gives the real directory).
func FindBinDir() (dir, version string, err error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.SliceStable(versioned, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(versioned[j])), filepath.Base(filepath.Dir(versioned[i])))
	})
	candidates = append(candidates, versioned...)
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	var rejected []string
	for _, d := range candidates {
		if !executable(filepath.Join(d, "initdb")) || !executable(filepath.Join(d, "postgres")) {
			continue
		}
		v, major, err := serverVersion(filepath.Join(d, "postgres"))
		if err != nil {
			rejected = append(rejected, err.Error())
			continue
		}
		if major < MinMajorVersion {
			rejected = append(rejected, fmt.Sprintf("%s is PostgreSQL %s", d, v))
			continue
		}
		return d, v, nil
	}
	msg := fmt.Sprintf("postgres: no PostgreSQL %d+ initdb and postgres found (pg_config --bindir, /usr/lib/postgresql/*/bin, $PATH): run hack/install-postgres.sh", MinMajorVersion)
	if len(rejected) > 0 {
		msg += " (" + strings.Join(rejected, "; ") + ")"
	}
	return "", "", errors.New(msg)
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(\.\d+)?`)

func serverVersion(postgres string) (string, int, error) {
	out, err := exec.Command(postgres, "--version").Output()
	if err != nil {
		return "", 0, fmt.Errorf("%s --version: %w", postgres, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", 0, fmt.Errorf("%s --version: unexpected output %q", postgres, out)
	}
	major, _ := strconv.Atoi(m[1])
	return m[1] + m[2], major, nil
}

// versionLess orders directory names such as "9.6", "15", "16" numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, errX := strconv.Atoi(pa[i])
		y, errY := strconv.Atoi(pb[i])
		if errX != nil || errY != nil {
			return a < b
		}
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of the server's log, prefixed for an error message.
func (s *Server) tail() string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > tailBytes {
		_, _ = f.Seek(st.Size()-tailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", s.logPath, strings.TrimRight(string(b), "\n"))
}

// childPIDs lists the processes whose parent is pid (postgres's backends and auxiliary processes).
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(c); ok && st.ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

type procInfo struct {
	state byte
	ppid  int
	pgrp  int
}

// procStat reads /proc/<pid>/stat.
func procStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procInfo{state: f[0][0], ppid: ppid, pgrp: pgrp}, true
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// RunTests is a test binary's TestMain around one server: it starts it in a temporary directory
// (within 3 minutes), sets *srv, runs m, stops the server and returns m's exit code (1, with the
// reason on stderr, when the server did not start).
func RunTests(m interface{ Run() int }, srv **Server) int {
	dir, err := os.MkdirTemp("", "pg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		return 1
	}
	defer s.Close()
	*srv = s
	return m.Run()
}

// ScratchEnv, set to "1" in a process's environment, makes ServeScratch's caller serve a scratch
// database instead of running tests (a test binary that stands for the postgres image).
const ScratchEnv = "SCHEMAGATE_SCRATCH_POSTGRES"

// ScratchPort is the port a migration probe's scratch database listens on (the probe Job's
// -c port=, pkg/rollout).
const ScratchPort = 55432

// ServeScratch stands for the official postgres image as a migration probe's sidecar runs it
// (docs/schema-lifecycle.md): a fresh server on 127.0.0.1:ScratchPort whose superuser is
// postgres, with trust authentication, until SIGTERM or SIGINT; it returns the process's exit
// code.
func ServeScratch() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := Start(ctx, Options{Port: ScratchPort, User: "postgres", Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scratch PostgreSQL:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "scratch PostgreSQL", s.Version(), "listening on 127.0.0.1:", ScratchPort)
	<-ctx.Done()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "scratch PostgreSQL:", err)
		return 1
	}
	return 0
}
