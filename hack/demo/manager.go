package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/schemagate/schemagate/test/localcluster"
)

type managerProcess struct {
	*localcluster.Process
	log string
}

func (m *managerProcess) stop() { m.Stop(10 * time.Second) }

// startManager runs the manager binary against kubeconfig, its metrics and health endpoints on
// free loopback ports, and waits for /readyz.
func startManager(ctx context.Context, path, kubeconfig, logFile string) (*managerProcess, error) {
	metrics, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	probes, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	p, err := localcluster.StartProcess("manager", path, []string{
		"--kubeconfig=" + kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), "--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes),
	}, logFile)
	if err != nil {
		return nil, err
	}
	m := &managerProcess{Process: p, log: logFile}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !p.Running() {
			return nil, fmt.Errorf("the manager exited: %s", p.Tail(2000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", probes), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("the manager was not ready within 30s: %s", p.Tail(2000))
}
