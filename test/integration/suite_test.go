// Package integration holds the user stories of schemagate, run against a real kube-apiserver
// and etcd (controller-runtime's envtest) with the real manager. Nothing in envtest creates pods,
// so fakeCluster plays the ReplicaSet and Job controllers by writing their status, and the
// invariant checker watches every event. Run with `make test` (KUBEBUILDER_ASSETS must name a
// folder with etcd, kube-apiserver and kubectl, which hack/build-binaries.sh builds).
package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/invariants"
	"github.com/schemagate/schemagate/test/story"
)

var (
	testEnv  *envtest.Environment
	cfg      *rest.Config
	k8s      client.Client
	fake     *fakeCluster
	checker  *invariants.Checker
	kit      story.Kit
	rootDir  string
	assetDir string
	// hubID is the suite's hub identity, as the manager resolves it with no --hub-id (the UID
	// of kube-system, read through the recorded client).
	hubID string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assetDir = os.Getenv("KUBEBUILDER_ASSETS")
	if assetDir == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, which builds etcd and kube-apiserver from source")
		return 1
	}
	if os.Getenv("SCHEMAGATE_TEST_LOG") != "" {
		logf.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		logf.SetLogger(zap.New(zap.WriteTo(devNull{})))
	}
	wd, _ := os.Getwd()
	rootDir = filepath.Join(wd, "..", "..")
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(rootDir, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetDir,
	}
	var err error
	if cfg, err = testEnv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		_ = testEnv.Stop() // a failed start (e.g. a CRD the API server rejects) leaves processes behind
		return 1
	}
	defer func() { _ = testEnv.Stop() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	opts := controllers.ManagerOptions("0", "0", false, "")
	mgr, err := ctrl.NewManager(managerVerbs.wrap(cfg), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	if hubID, err = controllers.ResolveHubID(ctx, mgr.GetAPIReader(), ""); err != nil {
		fmt.Fprintln(os.Stderr, "hub id:", err)
		return 1
	}
	if err := suiteReconciler(mgr).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()

	if k8s, err = client.New(cfg, client.Options{Scheme: opts.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	kit = story.Kit{C: k8s}
	fake = newFakeCluster(k8s)
	go fake.run(ctx)

	if checker, err = invariants.Start(ctx, cfg, opts.Scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	if checker.Report(os.Stdout) > 0 && code == 0 {
		code = 1
	}
	if checkVerbs() > 0 && code == 0 {
		code = 1
	}
	return code
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// loopbackOnly is an HTTP transport that dials IP literals on 127.0.0.0/8 or ::1 and refuses
// anything else, names included (no DNS lookup).
func loopbackOnly() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("the envtest suite dials loopback addresses only, not %s", addr)
		}
		return d.DialContext(ctx, network, addr)
	}
	return tr
}

// suiteReconciler is the reconciler every envtest manager runs. Checks measure loopback servers
// only: the sample's Prometheus address (a cluster DNS name) is refused without a lookup, so no
// test sends anything off this machine.
func suiteReconciler(mgr ctrl.Manager) *controllers.RoutingServiceReconciler {
	return &controllers.RoutingServiceReconciler{
		Client:    mgr.GetClient(),
		Recorder:  mgr.GetEventRecorder("schemagate"),
		Clock:     clock.RealClock{},
		APIReader: mgr.GetAPIReader(),
		Measurer:  &measure.Taker{Transport: loopbackOnly()},
		// Spoke clusters: the stories' spokes are namespaces of this same API server, reached
		// through a kubeconfig Secret like any other cluster (clusters_test.go).
		Spokes: &controllers.Spokes{Hub: hubID, Secrets: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
			ProbeInterval: time.Second, SecretRecheck: 2 * time.Second},
		SpokeCleanupTimeout: 20 * time.Second,
		// Migration probes run for the RoutingServices that name their scratch database's image
		// (spec.schema.probe.databaseImage); the fake cluster plays them (probe_test.go).
		Probe: &rollout.ProbeImages{Tools: "schemagate:test"},
	}
}
