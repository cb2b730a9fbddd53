package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/postgres"
	"github.com/schemagate/schemagate/test/realstack"
)

// The real stack beside the control plane: PostgreSQL, and the node agent that runs pods as local
// processes. Both die with the demo (their processes have Pdeathsig), and their stops are deferred.

// startPostgres starts a PostgreSQL server in a temporary directory (it runs as an unprivileged
// user when the demo runs as root, and that user cannot reach .state/), logging to logFile.
func startPostgres(ctx context.Context, logFile string) (*postgres.Server, func(), error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	srv, err := postgres.Start(ctx, postgres.Options{Log: f})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return srv, func() { _ = srv.Close(); f.Close() }, nil
}

// startAgent registers the process-backed Nodes, whose pods run routerBinary for every revision
// of the router image.
func startAgent(ctx context.Context, cfg *rest.Config, routerBinary, stateDir string) (*nodeagent.Agent, error) {
	return realstack.StartAgent(ctx, cfg, routerBinary, stateDir, "v1", "v2", "v3")
}

// routerBinaryPath checks that the router was built.
func routerBinaryPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no router binary at %s: `go build -o bin/edge-router ./examples/edge-router` (make demo does)", abs)
	}
	return abs, nil
}

// out serialises the demo's output: the watcher's event lines, the traffic lines and the
// multi-line blocks (summaries, tables) never interleave.
var out sync.Mutex

func printf(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format, args...)
}
