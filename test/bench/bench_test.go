//go:build bench

// Package bench measures schemagate at scale on the local cluster (test/localcluster: real
// kube-apiserver, kube-controller-manager with its ReplicaSet, Deployment and Job controllers at
// their default flags, kube-scheduler, kwok nodes in three regions) with the manager running as
// its own binary, and prints a Markdown table. For each N, one after the other on the same cluster:
// 3N Deployments v1 → v2; N RoutingServices × 3 shards v1 → v2 (same schema); the same
// RoutingServices to v3 with schema 2 (one migration Job each); after the last N, 60 s of idle (-bench.idle). Run it with
// `make bench-e2e` (BENCH_N=25,50 by default; `BENCH_N=100` or `-args -bench.n=200`). See
// docs/bench.md.
package bench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/localcluster"
)

var benchN = flag.String("bench.n", "", "comma-separated Ns (RoutingServices; 3N Deployments); default $BENCH_N or 25,50")

var (
	cluster *localcluster.Cluster
	k8s     client.Client
	manager *localcluster.Process
	// managerBinary is the manager's executable (pprof reads its symbols).
	managerBinary string
	rootDir       string
	stateDir      string
	ns            []int
	// managerTree says what tree the manager binary was built from (make builds it just before).
	managerTree string
	// Metrics endpoints: the manager's, kube-controller-manager's (maybe unreachable) and
	// kube-apiserver's.
	mgrMetrics, kcmMetrics, apiMetrics *source
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// parseN reads the Ns from -bench.n, else $BENCH_N, else 25,50.
func parseN() ([]int, error) {
	s := *benchN
	if s == "" {
		s = os.Getenv("BENCH_N")
	}
	if s == "" {
		s = "25,50"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 999 {
			return nil, fmt.Errorf("BENCH_N: %q is not a number from 1 to 999", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(m *testing.M) int {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	binDir := os.Getenv("SCHEMAGATE_BIN")
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "SCHEMAGATE_BIN is not set: run `make bench-e2e`, which builds the binaries")
		return 1
	}
	var err error
	if ns, err = parseN(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	maxN := 0
	for _, n := range ns {
		maxN = max(maxN, n)
	}
	wd, _ := os.Getwd()
	rootDir = filepath.Join(wd, "..", "..")
	if stateDir, err = os.MkdirTemp("", "schemagate-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The most pods a region holds at once: the Deployment phase's N Deployments of 3 with one
	// surge pod each, with room for the pods of a namespace still being deleted.
	const nodesPerRegion = 2
	podsPerNode := max(110, (8*maxN+40)/nodesPerRegion)
	start := time.Now()
	fmt.Printf("starting the local cluster in %s (%d nodes per region, %d pods each)\n", stateDir, nodesPerRegion, podsPerNode)
	cluster, err = localcluster.Start(ctx, localcluster.Options{BinDir: filepath.Join(binDir, "k8s"), StateDir: stateDir,
		Regions: regions, NodesPerRegion: nodesPerRegion, PodsPerNode: podsPerNode, Log: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cluster:", err)
		return 1
	}
	defer cluster.Stop()
	if err := cluster.InstallCRDs(ctx, filepath.Join(binDir, "k8s", "kubectl"), filepath.Join(rootDir, "config", "crd"), routingv1alpha1.GroupVersion.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsPort, err := localcluster.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgrMetrics = managerSource(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	pprofPort, err := localcluster.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pprofPort)
	managerBinary = filepath.Join(binDir, "manager")
	managerArgs := append([]string{
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort),
		"--kubeconfig=" + cluster.Kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false", "--health-probe-bind-address=0",
	}, strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))...)
	if extra := os.Getenv("BENCH_MANAGER_ARGS"); extra != "" {
		fmt.Println("manager flags added by BENCH_MANAGER_ARGS:", extra)
	}
	manager, err = localcluster.StartProcess("manager", managerBinary, managerArgs, filepath.Join(stateDir, "logs", "manager.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	defer manager.Stop(10 * time.Second)

	// The bench's own client is not the bottleneck: its updates go out within a second or two.
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	if k8s, err = client.New(cfg, client.Options{Scheme: controllers.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if apiMetrics, err = apiserverSource(cluster.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kcmMetrics = controllerManagerSource(ctx, stateDir)
	if kcmMetrics.unreachable != "" {
		fmt.Println("kube-controller-manager's metrics are not reachable:", kcmMetrics.unreachable)
	}
	if err := until(ctx, 30*time.Second, "the manager's metrics endpoint", func() (bool, string) {
		_, err := mgrMetrics.scrape(ctx)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		fmt.Fprintln(os.Stderr, err, manager.Tail(2000))
		return 1
	}
	managerTree = sourceOf(rootDir)
	fmt.Printf("cluster and manager up in %.1fs; manager built from %s\n", time.Since(start).Seconds(), managerTree)

	code := m.Run()
	if !manager.Running() {
		fmt.Println("the manager exited during the bench:", manager.Tail(3000))
		code = 1
	}
	if code != 0 || os.Getenv("SCHEMAGATE_KEEP_LOGS") != "" {
		fmt.Println("logs kept in", stateDir)
	} else {
		manager.Stop(10 * time.Second)
		cluster.Stop()
		_ = os.RemoveAll(stateDir)
	}
	fmt.Printf("bench wall time %.1fs\n", time.Since(start).Seconds())
	return code
}

func TestBench(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := startWatcher(ctx, cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{w: w, sampler: startSampler(ctx, manager.PID()), rawDir: filepath.Join(rootDir, ".state", "bench", "raw")}
	_ = os.RemoveAll(b.rawDir)
	if err := os.MkdirAll(b.rawDir, 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var results []phaseResult
	for i, n := range ns {
		if runs(t, "deployments") {
			results = append(results, b.deployments(ctx, t, n))
		}
		results = append(results, b.routingServices(ctx, t, n, i == len(ns)-1)...)
	}
	md := render(results, reportMeta{
		command: benchCommand(), date: began, took: time.Since(began), kcm: kcmMetrics, source: managerTree,
		nodes: fmt.Sprintf("%d regions × %d kwok nodes", len(regions), 2),
	})
	fmt.Print("\n" + md)
	out := filepath.Join(rootDir, ".state", "bench", "latest.md")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(out)
	fmt.Println("written to", abs)
	for _, m := range targets(results) {
		t.Error(m)
	}
}

// sourceOf describes the checkout the manager was built from: the commit, and the manager's
// packages with uncommitted changes (other people may be editing the tree).
func sourceOf(root string) string {
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	out := "commit " + strings.TrimSpace(string(head))
	dirty, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "cmd", "controllers", "pkg", "api").Output()
	if err == nil && len(strings.TrimSpace(string(dirty))) > 0 {
		var files []string
		for _, l := range strings.Split(strings.TrimSpace(string(dirty)), "\n") {
			files = append(files, strings.TrimSpace(l[min(3, len(l)):]))
		}
		out += " with uncommitted changes in " + strings.Join(files, ", ")
	}
	return out
}

// benchCommand is the command line the report names.
func benchCommand() string {
	list := make([]string, len(ns))
	for i, n := range ns {
		list[i] = strconv.Itoa(n)
	}
	cmd := "BENCH_N=" + strings.Join(list, ",")
	if p := cmp.Or(*benchPhases, os.Getenv("BENCH_PHASES")); p != "" {
		cmd += " BENCH_PHASES=" + p
	}
	if a := os.Getenv("BENCH_MANAGER_ARGS"); a != "" {
		cmd += " BENCH_MANAGER_ARGS='" + a + "'"
	}
	return cmd + " make bench-e2e"
}

// logf prints a timestamped progress line.
func logf(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05.0"), fmt.Sprintf(format, args...))
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
