//go:build e2e

// Package e2e runs schemagate's stories on a real local control plane (test/localcluster): the
// real ReplicaSet, Job and scheduler controllers act, kwok stands in for kubelets, and the manager
// runs as its own binary, as in production. An invariant checker watches every event. Run with
// `make test-e2e` (it builds what it needs).
//
// Scheduling: a test on the real stack (PostgreSQL, routers and migrations as processes, traffic)
// never calls t.Parallel, and its subtests run in turn, so go test runs it alone in its sequential
// phase; only the kwok stories, which start no processes, and the install and release tests,
// each on a control plane of its own, run beside each other afterwards (`make test-e2e` lets six
// run at once: they mostly wait). Two real-stack tests side by side on two cores slowed pods past
// their progress deadlines.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/invariants"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/realstack"
)

var (
	cluster *localcluster.Cluster
	cfg     *rest.Config
	k8s     client.Client
	checker *invariants.Checker
	binDir  string
	rootDir string
	// stateDir holds the suite's logs and the cluster's state.
	stateDir string
	// manager is the manager process; metricsURL its metrics endpoint on loopback.
	manager    *localcluster.Process
	metricsURL string
)

func TestMain(m *testing.M) {
	realstack.ServeScratchIfAsked()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	binDir = os.Getenv("SCHEMAGATE_BIN")
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "SCHEMAGATE_BIN is not set: run `make test-e2e`, which builds the binaries")
		return 1
	}
	wd, _ := os.Getwd()
	rootDir = filepath.Join(wd, "..", "..")
	state, err := os.MkdirTemp("", "schemagate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stateDir = state
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	fmt.Println("starting the local cluster in", state)
	cluster, err = localcluster.Start(ctx, localcluster.Options{BinDir: filepath.Join(binDir, "k8s"), StateDir: state, Log: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cluster:", err)
		return 1
	}
	defer cluster.Stop()
	cfg = cluster.Config
	if err := cluster.InstallCRDs(ctx, filepath.Join(binDir, "k8s", "kubectl"), filepath.Join(rootDir, "config", "crd"), routingv1alpha1.GroupVersion.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsPort, err := localcluster.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	manager, err = localcluster.StartProcess("manager", filepath.Join(binDir, "manager"), []string{
		"--kubeconfig=" + cluster.Kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false", "--health-probe-bind-address=0",
		// Migration probes, for the RoutingServices that name their scratch image (the R-4 probe
		// stories): no default scratch image, which the node agent could not run.
		"--probe-image=" + realstack.SchemaImage, "--probe-database-image=",
	}, filepath.Join(state, "logs", "manager.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	defer manager.Stop(10 * time.Second)

	if k8s, err = client.New(cfg, client.Options{Scheme: controllers.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if checker, err = invariants.Start(ctx, cfg, controllers.Scheme()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("cluster and manager up in %.1fs\n", time.Since(start).Seconds())

	code := m.Run()
	if fluxProcs != nil {
		fluxProcs.Stop()
	}
	if gitSrv != nil {
		gitSrv.Stop()
	}
	if agent != nil {
		agent.Stop()
	}
	if pg != nil {
		_ = pg.Close()
	}
	tablesMu.Lock()
	if len(tables) > 0 {
		fmt.Println("incident replays (requests per region over the whole change):")
		for _, tb := range tables {
			fmt.Print(tb)
		}
	}
	tablesMu.Unlock()
	if checker.Report(os.Stdout) > 0 && code == 0 {
		code = 1
	}
	if !manager.Running() {
		fmt.Println("the manager exited during the tests:", manager.Tail(3000))
		code = 1
	}
	if code != 0 || os.Getenv("SCHEMAGATE_KEEP_LOGS") != "" {
		fmt.Println("logs kept in", state)
	} else {
		cluster.Stop()
		_ = os.RemoveAll(state)
	}
	fmt.Printf("e2e wall time %.1fs\n", time.Since(start).Seconds())
	return code
}
