package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/schemagate/schemagate/pkg/schemareport"
)

// Exit codes of a command that could not be started, as shells use them.
const (
	exitNotFound      = 127
	exitNotExecutable = 126
)

// runAndReport runs the user's migration command, then reports whatever it did. The command's
// non-zero exit code wins; when it succeeded, the report's exit code is returned, so that a
// missing report (exitNoReport) never looks like success.
func runAndReport(cfg config, stdin io.Reader, stdout, stderr io.Writer, log *logger) int {
	// SIGTERM and SIGINT are caught from before the command starts, so that none is lost, until
	// the report is written: the command gets them, and the report of a stopped migration is
	// the one that matters most (--timeout bounds it).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	tail := &tailWriter{max: 4 * schemareport.MaxErrorBytes}
	sessions := newSessionTag(cfg, log)
	code := runCommand(cfg.argv, sessions.env(), sigs, sessions.endAfter, stdin, stdout, io.MultiWriter(stderr, tail), log)
	// Sessions the command left behind (it was killed while a statement waited for a lock, and
	// the server has not noticed): they would keep their place in the lock queue, and every
	// query on that table behind them, after this pod is gone.
	sessions.end("the command has exited")
	if code != 0 {
		log.printf("%s exited with code %d; reporting the database's state anyway", cfg.argv[0], code)
		// The end of what the tool said on stderr goes into the report, so that the cause
		// reaches the RoutingService's condition, with the database password redacted.
		cfg.toolError = schemareport.ErrorTail(cfg.redact.Redact(string(tail.buf)))
	}
	rc := report(context.Background(), cfg, stdout, log)
	if code != 0 {
		return code
	}
	return rc
}

// runCommand runs argv with stdin, stdout and stderr passed through, forwards the signals
// arriving on sigs to it, and returns its exit code: 128+N when a signal N killed it, 127 when
// it was not found, 126 when it could not be executed. Signals that arrive while no command runs
// are dropped.
// On the first signal, onSignal is called (in its own goroutine) with a channel closed when the
// command exits.
func runCommand(argv, env []string, sigs <-chan os.Signal, onSignal func(exited <-chan struct{}), stdin io.Reader, stdout, stderr io.Writer, log *logger) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		log.printf("cannot run %s: %v", strings.Join(argv, " "), err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitNotExecutable
	}
	done := make(chan struct{})
	go func() {
		signalled := false
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
				if !signalled && onSignal != nil {
					signalled = true
					go onSignal(done)
				}
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		log.printf("running %s: %v", argv[0], err)
		return exitNoReport
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}
