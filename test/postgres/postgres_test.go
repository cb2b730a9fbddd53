package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startServer starts a server in a test directory and stops it when the test ends. Set
// SCHEMAGATE_TEST_LOG=1 to see the server's log.
func startServer(ctx context.Context, t *testing.T) *Server {
	t.Helper()
	var log io.Writer
	if os.Getenv("SCHEMAGATE_TEST_LOG") != "" {
		log = os.Stderr
	}
	began := time.Now()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("PostgreSQL %s from %s: initdb + start in %s, on 127.0.0.1:%d",
		s.Version(), s.binDir, time.Since(began).Round(time.Millisecond), s.Port())
	return s
}

func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startServer(ctx, t)
	logMemory(t, s)

	if err := s.CreateDatabase(ctx, "routes"); err != nil {
		t.Fatal(err)
	}
	url := s.URL("routes")
	if want := fmt.Sprintf("postgres://schemagate@127.0.0.1:%d/routes?sslmode=disable", s.Port()); url != want {
		t.Fatalf("URL = %s, want %s", url, want)
	}
	conn := connect(ctx, t, url)
	var user, encoding string
	var versionNum int
	if err := conn.QueryRow(ctx, `SELECT current_user, current_setting('server_encoding'),
		current_setting('server_version_num')::int`).Scan(&user, &encoding, &versionNum); err != nil {
		t.Fatal(err)
	}
	if user != Superuser || encoding != "UTF8" || versionNum < MinMajorVersion*10000 {
		t.Fatalf("user %s, encoding %s, version %d; want %s, UTF8, %d+", user, encoding, versionNum, Superuser, MinMajorVersion)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE routes (host text PRIMARY KEY, upstream text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO routes VALUES ($1, $2)`, "shop.example", "10.0.0.7:8080"); err != nil {
		t.Fatal(err)
	}
	readRoute := func(conn *pgx.Conn) {
		t.Helper()
		var upstream string
		if err := conn.QueryRow(ctx, `SELECT upstream FROM routes WHERE host = $1`, "shop.example").Scan(&upstream); err != nil {
			t.Fatal(err)
		}
		if upstream != "10.0.0.7:8080" {
			t.Fatalf("upstream = %q", upstream)
		}
	}
	readRoute(conn)

	t.Run("listens on 127.0.0.1 only", func(t *testing.T) {
		var listen string
		if err := conn.QueryRow(ctx, `SHOW listen_addresses`).Scan(&listen); err != nil {
			t.Fatal(err)
		}
		if listen != "127.0.0.1" {
			t.Errorf("listen_addresses = %q", listen)
		}
		// The kernel's view: every listening TCP socket on the port is bound to 127.0.0.1.
		for _, l := range listeners(t, s.Port()) {
			if l != "0100007F" {
				t.Errorf("a socket listens on port %d at %s (hex, /proc/net/tcp*), not 127.0.0.1", s.Port(), l)
			}
		}
		// And from outside loopback: connections to the machine's other addresses are refused.
		var others []string
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				others = append(others, ipn.IP.String())
			}
		}
		if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
			_ = ln.Close()
			others = append(others, "::1")
		}
		if len(others) == 0 {
			t.Log("no non-loopback address nor ::1 on this machine: only the socket table was checked")
		}
		for _, ip := range others {
			addr := net.JoinHostPort(ip, strconv.Itoa(s.Port()))
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = c.Close()
				t.Errorf("the server is reachable at %s", addr)
			} else {
				t.Logf("%s: %v (as it should be)", addr, err)
			}
		}
	})

	port := s.Port()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	if c, err := pgx.Connect(short, url); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected to a stopped server")
	} else {
		t.Logf("stopped: %v", err)
	}
	cancelShort()
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a connection opened before Stop still answers")
	}

	began := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("warm start in %s", time.Since(began).Round(time.Millisecond))
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start of a running server: %v", err)
	}
	if s.Port() != port {
		t.Fatalf("port %d after restart, was %d", s.Port(), port)
	}
	readRoute(connect(ctx, t, url))
}

// TestStopLeavesNothing checks that neither Stop's fast shutdown nor its forced kill leaves a
// process of the server running, and that a server killed that way starts again with its data.
func TestStopLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startServer(ctx, t)
	if err := s.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	conn := connect(ctx, t, s.URL("app"))
	if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (42)`); err != nil {
		t.Fatal(err)
	}

	stopAndCheck := func(forced bool) {
		t.Helper()
		// Open sessions, so that there are backends as well as the auxiliary processes.
		connect(ctx, t, s.URL("app"))
		connect(ctx, t, s.URL("postgres"))
		pid := s.cmd.Process.Pid
		if st, _ := procStat(pid); st.pgrp != pid {
			t.Errorf("postgres (pid %d) is in process group %d, not its own", pid, st.pgrp)
		}
		procs := append([]int{pid}, childPIDs(pid)...)
		if len(procs) < 4 {
			t.Fatalf("only %d postgres processes: %v", len(procs), procs)
		}
		err := s.Stop()
		if forced && (err == nil || !strings.Contains(err.Error(), "killed")) {
			t.Errorf("a forced Stop returned %v, want an error saying it killed the server", err)
		} else if !forced && err != nil {
			t.Error(err)
		}
		var left []int
		for _, p := range procs {
			if alive(p) {
				left = append(left, p)
			}
		}
		left = append(left, childPIDs(pid)...)
		if len(left) > 0 {
			t.Errorf("still running after Stop (forced %v): %v", forced, left)
		} else {
			t.Logf("Stop (forced %v) ended all %d processes", forced, len(procs))
		}
	}

	stopAndCheck(false)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.stopTimeout = 0 // kill at once: a crash, which the next start recovers from
	stopAndCheck(true)
	s.stopTimeout = stopTimeout
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := connect(ctx, t, s.URL("app")).QueryRow(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("after a crash and a restart: v = %d, %v", v, err)
	}
}

// listeners returns the local addresses (hex, as /proc/net/tcp{,6} print them) of the sockets
// listening on port.
func listeners(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			host, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				out = append(out, host)
			}
		}
		_ = f.Close()
	}
	if len(out) == 0 {
		t.Fatalf("no socket listens on port %d", port)
	}
	return out
}

// logMemory logs the resident memory of the server's processes: RSS summed (counts the shared
// buffers each process has touched once per process) and PSS summed (shares them out).
func logMemory(t *testing.T, s *Server) {
	pid := s.cmd.Process.Pid
	procs := append([]int{pid}, childPIDs(pid)...)
	var rss, pss int
	for _, p := range procs {
		rss += kB(fmt.Sprintf("/proc/%d/status", p), "VmRSS:")
		pss += kB(fmt.Sprintf("/proc/%d/smaps_rollup", p), "Pss:")
	}
	t.Logf("%d postgres processes after start: RSS %.1f MiB summed, PSS %.1f MiB summed",
		len(procs), float64(rss)/1024, float64(pss)/1024)
}

func kB(file, key string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
