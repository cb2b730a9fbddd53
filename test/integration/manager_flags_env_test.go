package integration

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/story"
)

// flagsEnv is an API server and etcd of one test's own, for tests of the manager's command-line
// configuration (manager_flags_test.go). The suite's shared manager watches every namespace of
// the shared API server, so a test of a manager that must leave some namespaces alone, or must
// be the only one acting, needs a server the shared manager does not see. A fakeCluster plays the
// ReplicaSet and Job controllers there as it does for the suite.
type flagsEnv struct {
	cfg *rest.Config  // the admin's (system:masters)
	c   client.Client // the admin's
	kit story.Kit
}

// startFlagsEnv starts the API server (4–5 s) and stops it when the test ends.
func startFlagsEnv(t *testing.T) *flagsEnv {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(rootDir, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetDir,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatal("starting a second envtest:", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: controllers.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go newFakeCluster(c).run(ctx)
	return &flagsEnv{cfg: cfg, c: c, kit: story.Kit{C: c}}
}

// managerLog records the manager's log lines (logr's funcr format: prefix, then "key"=value
// pairs, the message as "msg").
type managerLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *managerLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// matching returns the lines that contain every one of parts.
func (l *managerLog) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// reconcileErrors are the controller's "Reconciler error" lines: the errors Reconcile returned
// (controller-runtime requeues them with backoff).
func (l *managerLog) reconcileErrors() []string { return l.matching(`"Reconciler error"`) }

// startFlagsManager runs the manager that cmd/manager/main.go builds from mc, against cfg, with the
// RoutingService reconciler, until the test ends. Its controller skips the name check, since the
// suite's manager in this process has a controller of the same name. log, if not nil, records
// the manager's log.
func startFlagsManager(t *testing.T, cfg *rest.Config, mc controllers.ManagerConfig, log *managerLog) {
	t.Helper()
	opts := mc.Options()
	opts.Controller.SkipNameValidation = ptr.To(true)
	if log != nil {
		opts.Logger = log.logger()
	}
	mgr, err := ctrl.NewManager(mc.RESTConfig(cfg), opts)
	if err != nil {
		t.Fatal("manager:", err)
	}
	if err := suiteReconciler(mgr).SetupWithManager(mgr); err != nil {
		t.Fatal("controller:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30 s")
		}
	})
}

// freeLoopbackPort is a port on 127.0.0.1 that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
