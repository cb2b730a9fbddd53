package prometheus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// requireBinary skips the test when no Prometheus binary is built, unless
// SCHEMAGATE_REQUIRE_PROMETHEUS=1 (make test-e2e), when it fails.
func requireBinary(t *testing.T) {
	t.Helper()
	if _, err := Binary(); err != nil {
		if errors.Is(err, ErrNoBinary) && os.Getenv("SCHEMAGATE_REQUIRE_PROMETHEUS") != "1" {
			t.Skipf("%v (SCHEMAGATE_REQUIRE_PROMETHEUS=1 makes this a failure)", err)
		}
		t.Fatal(err)
	}
}

// startServer starts a server in a test directory and stops it when the test ends; on failure the
// end of its log is printed. Set SCHEMAGATE_TEST_LOG=1 to see all of it.
func startServer(ctx context.Context, t *testing.T, opts Options) *Server {
	t.Helper()
	requireBinary(t)
	opts.Dir = t.TempDir()
	began := time.Now()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop() // first: the log then ends with the shutdown
		if os.Getenv("SCHEMAGATE_TEST_LOG") != "" {
			t.Logf("%s:\n%s", s.LogPath(), s.LogTail(1<<20))
		} else if t.Failed() {
			t.Logf("the end of %s:\n%s", s.LogPath(), s.LogTail(tailBytes))
		}
	})
	t.Logf("prometheus ready at %s in %s", s.URL(), time.Since(began).Round(time.Millisecond))
	return s
}

// exporter serves a registry holding test_requests_total{code} on 127.0.0.1.
type exporter struct {
	srv      *httptest.Server
	requests *prometheus.CounterVec
}

func newExporter(t *testing.T) *exporter {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := &exporter{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "test_requests_total",
		Help: "Requests answered, by status code.",
	}, []string{"code"})}
	reg.MustRegister(e.requests)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	_ = e.srv.Listener.Close()
	e.srv.Listener = l
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

func (e *exporter) addr() string { return e.srv.Listener.Addr().String() }

// eventually polls f every 250ms until it returns nil or the timeout passes, then fails with its
// last error.
func eventually(ctx context.Context, t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	began := time.Now()
	deadline := time.After(timeout)
	for {
		err := f()
		if err == nil {
			t.Logf("%s after %s", what, time.Since(began).Round(time.Millisecond))
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func vectorOf(v model.Value) (model.Vector, error) {
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("a %s, not a vector: %v", v.Type(), v)
	}
	return vec, nil
}

func TestFileSDAndQuery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := startServer(ctx, t, Options{})

	east, west := newExporter(t), newExporter(t)
	if err := s.SetTargets([]Target{{Addr: east.addr(), Labels: map[string]string{"shard": "us-east"}}}); err != nil {
		t.Fatal(err)
	}

	// Traffic: three 200s for each 404, 80 requests a second.
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				east.requests.WithLabelValues("200").Add(3)
				east.requests.WithLabelValues("404").Inc()
				west.requests.WithLabelValues("200").Inc()
			}
		}
	}()

	const ratio = `sum(rate(test_requests_total{code="404"}[10s])) / sum(rate(test_requests_total[10s]))`
	eventually(ctx, t, 20*time.Second, "the 404 ratio is 0.25", func() error {
		v, err := s.Query(ctx, ratio)
		if err != nil {
			return err
		}
		vec, err := vectorOf(v)
		if err != nil {
			return err
		}
		if len(vec) != 1 {
			return fmt.Errorf("%d samples: %v", len(vec), vec)
		}
		if got := float64(vec[0].Value); math.IsNaN(got) || math.Abs(got-0.25) > 0.02 {
			return fmt.Errorf("ratio %v", got)
		}
		return nil
	})

	// The series carry the file_sd labels, one per code.
	v, err := s.Query(ctx, `test_requests_total{job="file",shard="us-east"}`)
	if err != nil {
		t.Fatal(err)
	}
	vec, err := vectorOf(v)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	for _, smp := range vec {
		codes[string(smp.Metric["code"])] = true
		if smp.Metric["instance"] != model.LabelValue(east.addr()) {
			t.Errorf("series %v: instance is not %s", smp.Metric, east.addr())
		}
	}
	if len(vec) != 2 || !codes["200"] || !codes["404"] {
		t.Errorf("test_requests_total: want the codes 200 and 404, got %v", vec)
	}

	// Rewriting the file adds a target.
	if err := s.SetTargets([]Target{
		{Addr: east.addr(), Labels: map[string]string{"shard": "us-east"}},
		{Addr: west.addr(), Labels: map[string]string{"shard": "eu-west"}},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 15*time.Second, "both targets are up", func() error {
		v, err := s.Query(ctx, `up{job="file"} == 1`)
		if err != nil {
			return err
		}
		vec, err := vectorOf(v)
		if err != nil {
			return err
		}
		shards := map[model.LabelValue]bool{}
		for _, smp := range vec {
			shards[smp.Metric["shard"]] = true
		}
		if len(vec) != 2 || !shards["us-east"] || !shards["eu-west"] {
			return fmt.Errorf("up: %v", vec)
		}
		return nil
	})

	// A query that does not parse: the error says why.
	_, err = s.Query(ctx, `sum(rate(test_requests_total[10s])`)
	if err == nil {
		t.Fatal("a query with an unclosed parenthesis: no error")
	}
	if !strings.Contains(err.Error(), "parse error") || !strings.Contains(err.Error(), "unclosed left parenthesis") {
		t.Errorf("a query with an unclosed parenthesis: the error does not name the parse problem: %v", err)
	} else {
		t.Logf("a bad query: %v", err)
	}

	// An unknown metric is an empty vector, not an error.
	if v, err := s.Query(ctx, `no_such_metric`); err != nil {
		t.Errorf("no_such_metric: %v", err)
	} else if vec, err := vectorOf(v); err != nil || len(vec) != 0 {
		t.Errorf("no_such_metric: want an empty vector, got %v (%v)", v, err)
	}
}

func TestStaticTargets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newExporter(t)
	e.requests.WithLabelValues("200").Add(5)
	s := startServer(ctx, t, Options{StaticTargets: []string{e.addr()}, ScrapeInterval: 500 * time.Millisecond})
	eventually(ctx, t, 15*time.Second, "the static target is scraped", func() error {
		v, err := s.Query(ctx, `test_requests_total{job="static",code="200"}`)
		if err != nil {
			return err
		}
		vec, err := vectorOf(v)
		if err != nil {
			return err
		}
		if len(vec) != 1 || vec[0].Value != 5 {
			return fmt.Errorf("got %v", vec)
		}
		return nil
	})
	// The UI's assets are not built in; the API and the health endpoints do not need them.
	resp, err := http.Get(s.URL() + "/-/healthy")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/-/healthy: %s", resp.Status)
	}
	if info, err := s.API().Buildinfo(ctx); err != nil {
		t.Error(err)
	} else {
		t.Logf("prometheus %s (%s)", info.Version, info.GoVersion)
	}
}

// envtestAssets is the directory holding etcd and kube-apiserver: $KUBEBUILDER_ASSETS, else
// $SCHEMAGATE_BIN/k8s, else bin/k8s of the checkout; "" if none has them.
func envtestAssets() string {
	var dirs []string
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("SCHEMAGATE_BIN"); d != "" {
		dirs = append(dirs, filepath.Join(d, "k8s"))
	}
	if root, err := moduleRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "bin", "k8s"))
	}
	for _, d := range dirs {
		if executable(filepath.Join(d, "etcd")) == nil && executable(filepath.Join(d, "kube-apiserver")) == nil {
			return d
		}
	}
	return ""
}

// TestKubernetesPods runs the job kubernetes-pods against a real API server (envtest: etcd and
// kube-apiserver, no kubelet): the pods' statuses are written by the test, with loopback pod IPs as
// in the local cluster.
func TestKubernetesPods(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	requireBinary(t)
	assets := envtestAssets()
	if assets == "" {
		t.Skip("no etcd and kube-apiserver (KUBEBUILDER_ASSETS, or bin/k8s: make envtest-assets)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "prometheus", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	e := newExporter(t)
	e.requests.WithLabelValues("200").Add(7)
	_, port, _ := net.SplitHostPort(e.addr())
	const ns = "routers"
	for _, name := range []string{ns, "elsewhere"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Only router-0 is scraped: router-1 lacks the annotation, router-2 is in another namespace,
	// router-3 has finished.
	pod := func(namespace, name string, scrape bool, phase corev1.PodPhase) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: namespace,
				Labels:      map[string]string{"schemagate.io/shard": "us-east", "schemagate.io/revision": "r2"},
				Annotations: map[string]string{"prometheus.io/port": port},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "router", Image: "edge-router",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}}},
		}
		if scrape {
			p.Annotations["prometheus.io/scrape"] = "true"
		}
		p, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: phase, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
		if _, err := cs.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod(ns, "router-0", true, corev1.PodRunning)
	pod(ns, "router-1", false, corev1.PodRunning)
	pod("elsewhere", "router-2", true, corev1.PodRunning)
	pod(ns, "router-3", true, corev1.PodSucceeded)

	s := startServer(ctx, t, Options{KubeconfigPath: kubeconfigPath, Namespace: ns})
	eventually(ctx, t, 20*time.Second, "router-0 is scraped", func() error {
		v, err := s.Query(ctx, `test_requests_total{job="kubernetes-pods"}`)
		if err != nil {
			return err
		}
		vec, err := vectorOf(v)
		if err != nil {
			return err
		}
		if len(vec) != 1 {
			return fmt.Errorf("%d series: %v", len(vec), vec)
		}
		want := model.LabelSet{
			"__name__": "test_requests_total", "code": "200", "job": JobKubernetesPods,
			"instance": model.LabelValue(net.JoinHostPort("127.0.0.1", port)),
			"shard":    "us-east", "revision": "r2", "namespace": ns, "pod": "router-0",
		}
		if got := model.LabelSet(vec[0].Metric); !got.Equal(want) || vec[0].Value != 7 {
			return fmt.Errorf("got %v = %v, want %v = 7", got, vec[0].Value, want)
		}
		return nil
	})
	targets, err := s.API().Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var active []string
	for _, tg := range targets.Active {
		if tg.ScrapePool == JobKubernetesPods {
			active = append(active, string(tg.Labels["pod"]))
		}
	}
	if len(active) != 1 {
		t.Errorf("active targets of %s: want router-0 only, got %v", JobKubernetesPods, active)
	}
}
