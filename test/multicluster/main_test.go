//go:build e2e

// Package multicluster runs schemagate with its shards in clusters of their own: a hub (the
// RoutingService, the manager, the migration Job) and three region clusters (spokes), each a real
// control plane (test/fleet) with a process node agent, so routers really run; one PostgreSQL.
// The invariant checker watches the hub and every region.
package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/fleet"
	"github.com/schemagate/schemagate/test/invariants"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/postgres"
	"github.com/schemagate/schemagate/test/realstack"
)

var (
	binDir, rootDir, stateDir string
	f                         *fleet.Fleet
	hub                       client.Client
	regions                   = map[string]client.Client{}
	checkers                  []*invariants.Checker
	pg                        *postgres.Server
	manager                   *localcluster.Process
	hubAgent                  *nodeagent.Agent
)

// hubID is the manager's --hub-id.
const hubID = "hub-a"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	binDir = os.Getenv("SCHEMAGATE_BIN")
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "SCHEMAGATE_BIN is not set: run `make test-e2e`")
		return 1
	}
	wd, _ := os.Getwd()
	rootDir = filepath.Join(wd, "..", "..")
	var err error
	if stateDir, err = os.MkdirTemp("", "schemagate-multicluster-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err, "(logs in "+stateDir+")")
		return 1
	}
	router := filepath.Join(binDir, "edge-router")
	if f, err = fleet.Start(ctx, fleet.Options{BinDir: filepath.Join(binDir, "k8s"), StateDir: stateDir, Log: os.Stdout,
		RouterBinary: router, Revisions: []string{"v1", "v2"}}); err != nil {
		return fail("fleet", err)
	}
	defer f.Stop()
	if pg, err = postgres.Start(ctx, postgres.Options{}); err != nil {
		return fail("postgres", err)
	}
	defer pg.Close()
	// The migration and check Jobs run in the hub: it gets a process Node of its own.
	if hubAgent, err = realstack.StartAgentForRegions(ctx, f.Hub.Config, realstack.OwnPodCIDR(), router, filepath.Join(stateDir, "hub-agent"), []string{"hub"}, "v1", "v2"); err != nil {
		return fail("hub node agent", err)
	}
	defer hubAgent.Stop()
	// The regions get the CRD only for the invariant checker, which watches RoutingServices
	// everywhere; schemagate never writes one there.
	for _, c := range append([]*localcluster.Cluster{f.Hub.Cluster}, regionClusters()...) {
		if err := c.InstallCRDs(ctx, filepath.Join(binDir, "k8s", "kubectl"), filepath.Join(rootDir, "config", "crd"), routingv1alpha1.GroupVersion.String()); err != nil {
			return fail("CRDs", err)
		}
	}
	if err := startManager(); err != nil {
		return fail("manager", err)
	}
	defer func() { manager.Stop(10 * time.Second) }()
	if hub, err = client.New(f.Hub.Config, client.Options{Scheme: controllers.Scheme()}); err != nil {
		return fail("hub client", err)
	}
	for _, r := range append([]*fleet.Region{nil}, f.Regions...) {
		cfg := f.Hub.Config
		if r != nil {
			cfg = r.Config
			if regions[r.Name], err = client.New(cfg, client.Options{Scheme: controllers.Scheme()}); err != nil {
				return fail("region client", err)
			}
		}
		var hubChecker *invariants.Checker
		if r != nil {
			hubChecker = checkers[0] // the hub's, started first
		}
		k, err := invariants.StartFollowing(ctx, cfg, controllers.Scheme(), hubChecker)
		if err != nil {
			return fail("invariant checker", err)
		}
		checkers = append(checkers, k)
	}
	fmt.Printf("fleet, database and manager up in %.1fs\n", time.Since(start).Seconds())
	fmt.Print(f.Measure())
	code := m.Run()
	for _, k := range checkers {
		if k.Report(os.Stdout) > 0 && code == 0 {
			code = 1
		}
	}
	if !manager.Running() {
		fmt.Println("the manager exited during the tests:", manager.Tail(3000))
		code = 1
	}
	if code != 0 || os.Getenv("SCHEMAGATE_KEEP_LOGS") != "" {
		fmt.Println("logs kept in", stateDir)
	} else {
		_ = os.RemoveAll(stateDir)
	}
	fmt.Printf("multicluster wall time %.1fs\n", time.Since(start).Seconds())
	return code
}

// startManager starts (or starts again) the manager against the hub.
func startManager() error {
	if err := os.MkdirAll(filepath.Join(stateDir, "logs"), 0o755); err != nil {
		return err
	}
	var err error
	manager, err = localcluster.StartProcess("manager", filepath.Join(binDir, "manager"), []string{
		"--kubeconfig=" + f.Hub.Kubeconfig, "--leader-elect=false", "--hub-id=" + hubID, "--spoke-cleanup-timeout=25s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, filepath.Join(stateDir, "logs", fmt.Sprintf("manager-%d.log", time.Now().UnixNano())))
	return err
}

func regionClusters() []*localcluster.Cluster {
	var out []*localcluster.Cluster
	for _, r := range f.Regions {
		out = append(out, r.Cluster)
	}
	return out
}
