//go:build e2e

package nodeagent

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The test binary doubles as the containers' program: with NODEAGENT_HELPER set, TestMain runs
// helperMain instead of the tests. The image table maps test images to os.Args[0] with that
// variable in Executable.Env.
const helperEnv = "NODEAGENT_HELPER"

// helperMain is a container: `serve` (an HTTP server on $POD_IP), `exit` (write a termination
// message and some log lines, then exit with a code) or `sleep`.
func helperMain(mode string, args []string) int {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	port := fs.Int("port", 8080, "serve: port on $POD_IP")
	ready := fs.Bool("ready", true, "serve: /ready answers 200 from the start")
	ignoreTerm := fs.Bool("ignore-sigterm", false, "serve: log SIGTERM and keep running")
	child := fs.Bool("child", false, "serve: start a child process in the same process group")
	code := fs.Int("code", 0, "exit: exit code")
	after := fs.Duration("after", 0, "exit: wait this long first")
	message := fs.String("message", "", "exit: termination message")
	messageBytes := fs.Int("message-bytes", 0, "exit: a termination message of this many bytes (0-9 repeated, ending in END)")
	lines := fs.Int("lines", 0, "exit: log lines to print")
	failFirst := fs.Bool("fail-first", false, "exit: fail with --code the first run in this directory, exit 0 afterwards")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Printf("helper %s pid=%d args=%q\n", mode, os.Getpid(), args)
	switch mode {
	case "sleep": // the child of `serve --child`: it ignores SIGTERM, only the group's SIGKILL ends it
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		for range sig {
			fmt.Println("child: SIGTERM received")
		}
		return 0
	case "exit":
		time.Sleep(*after)
		for i := 1; i <= *lines; i++ {
			fmt.Printf("log line %d\n", i)
		}
		msg := *message
		if *messageBytes > 0 {
			var b strings.Builder
			for b.Len() < *messageBytes-3 {
				b.WriteByte('0' + byte(b.Len()%10))
			}
			msg = b.String() + "END"
		}
		if msg != "" {
			if err := os.WriteFile(os.Getenv("TERMINATION_MESSAGE_PATH"), []byte(msg), 0o600); err != nil {
				fmt.Println("writing the termination message:", err)
				return 99
			}
		}
		if *failFirst {
			if _, err := os.Stat("ran-once"); err == nil {
				return 0
			}
			_ = os.WriteFile("ran-once", nil, 0o600)
		}
		return *code
	case "serve":
		return serve(*port, *ready, *ignoreTerm, *child)
	}
	fmt.Println("unknown helper mode", mode)
	return 2
}

// ballast is what /grow allocated.
var ballast [][]byte

func serve(port int, ready, ignoreTerm, child bool) int {
	var isReady, isLive atomic.Bool
	isReady.Store(ready)
	isLive.Store(true)
	childPID := 0
	if child {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=sleep")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Println("child:", err)
			return 1
		}
		childPID = cmd.Process.Pid
	}
	flip := func(b *atomic.Bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { b.Store(r.URL.Query().Get("v") == "true") }
	}
	status := func(b *atomic.Bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if !b.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", status(&isReady))
	mux.HandleFunc("/healthz", status(&isLive))
	mux.HandleFunc("/set-ready", flip(&isReady))
	mux.HandleFunc("/set-live", flip(&isLive))
	mux.HandleFunc("/grow", func(w http.ResponseWriter, r *http.Request) {
		// Allocates and touches ?mb= MiB more, kept until the process ends (the memory limit test).
		mb, _ := strconv.Atoi(r.URL.Query().Get("mb"))
		for i := 0; i < mb; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			ballast = append(ballast, b)
		}
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"env": env, "args": os.Args[1:], "pid": os.Getpid(), "child": childPID})
	})
	// Listen on the pod's own address, as every container on a process-backed node must.
	l, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), strconv.Itoa(port)))
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	fmt.Println("listening on", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { _ = http.Serve(l, mux) }()
	for range sig {
		fmt.Println("SIGTERM received")
		if !ignoreTerm {
			return 0
		}
	}
	return 0
}
