// Package prometheus starts a real Prometheus server for tests: the upstream server
// (github.com/prometheus/prometheus/cmd/prometheus, the version hack/prometheus pins), built from
// source through the Go module proxy by `make prometheus-binary` (hack/build-binaries.sh
// prometheus) into bin/k8s/prometheus. It listens on 127.0.0.1 only, on a free port, keeps its TSDB
// in a directory of its own, and is queried through its HTTP API (/api/v1) with client_golang's API
// client. There is no mock.
//
// The binary is built without the build tag builtinassets, so without the web UI's assets: the API
// is all tests use, and the server starts and serves it without them (the UI's pages answer 500).
// Of the service discoveries it has file, http and kubernetes only (hack/build-binaries.sh).
//
// A server scrapes up to three jobs, each only when configured:
//
//   - JobStatic: Options.StaticTargets;
//   - JobFile: the targets of a file_sd file, which SetTargets rewrites while the server runs
//     (always configured; the file starts empty);
//   - JobKubernetesPods: the pods of a namespace that carry the annotation prometheus.io/scrape:
//     "true", scraped at <pod IP>:<prometheus.io/port annotation>, with the labels shard and
//     revision copied from the pod labels schemagate.io/shard and schemagate.io/revision, and
//     namespace and pod.
//
// Like the local cluster's processes, the server runs in its own process group and is killed if
// the process that started it dies (Pdeathsig).
package prometheus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Job names of the scrape jobs a server may run; each is the job label of what it scrapes.
const (
	JobStatic         = "static"
	JobFile           = "file"
	JobKubernetesPods = "kubernetes-pods"
)

// EnvBinary names the Prometheus binary to run instead of bin/k8s/prometheus.
const EnvBinary = "SCHEMAGATE_PROMETHEUS"

// ErrNoBinary is returned (wrapped) by Binary and Start when no Prometheus binary is built.
var ErrNoBinary = errors.New("prometheus: no binary")

const (
	readyTimeout = time.Minute
	stopTimeout  = 10 * time.Second
	tailBytes    = 4096
	// retention bounds what a test server keeps; tests never look back further.
	retention = "1h"
	// discoveryReload bounds how long the scrape manager waits before acting on new targets
	// (Prometheus' default is 5s; a test wants SetTargets to take effect at once).
	discoveryReload = "500ms"
	// fileSDRefresh is how often file_sd re-reads its file in case a change notification is
	// missed (it also watches the file's directory).
	fileSDRefresh = "1s"
)

// Options configure a server.
type Options struct {
	// Dir receives the configuration, the TSDB (Dir/data), the file_sd file and the log
	// (Dir/prometheus.log). If empty, a temporary directory is created, and Stop removes it.
	Dir string
	// ScrapeInterval is how often every target is scraped (and rules evaluated); 1s if zero.
	// The scrape timeout is the same.
	ScrapeInterval time.Duration
	// StaticTargets are host:port addresses scraped by the job JobStatic.
	StaticTargets []string
	// FileSDPath is the file_sd file of the job JobFile, which SetTargets rewrites; Dir/targets.json
	// if empty. Start creates it empty unless it exists.
	FileSDPath string
	// KubeconfigPath, when set, adds the job JobKubernetesPods: the pods of Namespace (every
	// namespace if empty) annotated prometheus.io/scrape: "true", discovered through the API server
	// of this kubeconfig.
	KubeconfigPath string
	Namespace      string
	// Args are extra command-line flags for prometheus.
	Args []string
	// Web, when set, protects the server's HTTP endpoints as a production Prometheus behind
	// --web.config.file: HTTPS, optionally client certificates and basic auth.
	Web *WebSecurity
}

// WebSecurity is Prometheus' web configuration (--web.config.file): TLS with a certificate of
// its own, client certificates of a CA required when ClientCAPEM is set, and basic auth users.
// Start reaches the server with CAPEM, the client pair and the first user, as a client of it
// must.
type WebSecurity struct {
	// CertPEM and KeyPEM are the server's certificate (for 127.0.0.1) and key; CAPEM the CA
	// that signed it.
	CertPEM, KeyPEM, CAPEM []byte
	// ClientCAPEM, when set, makes the server require and verify a client certificate of that
	// CA; ClientCertPEM and ClientKeyPEM are the one Start presents.
	ClientCAPEM, ClientCertPEM, ClientKeyPEM []byte
	// Users maps basic auth users to passwords (stored as bcrypt hashes in the web config).
	Users map[string]string
}

// Target is a scrape target of the file_sd job.
type Target struct {
	// Addr is host:port.
	Addr string
	// Labels are added to every series scraped from the target.
	Labels map[string]string
}

// Server is a Prometheus server started by Start. Its methods may be called from several
// goroutines.
type Server struct {
	bin        string
	dir        string
	ownDir     bool
	configPath string
	fileSDPath string
	logPath    string
	port       int
	api        v1.API
	// scheme is http, or https with Options.Web; client reaches the server (with Web's CA,
	// client certificate and first user).
	scheme string
	client *http.Client

	sdMu sync.Mutex // serialises SetTargets

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit status, once done is closed
}

// Binary is the Prometheus binary tests run: $SCHEMAGATE_PROMETHEUS if set (it must exist), else
// $SCHEMAGATE_BIN/k8s/prometheus if SCHEMAGATE_BIN is set and it exists, else bin/k8s/prometheus in
// the checkout holding the working directory. The error wraps ErrNoBinary when none is built.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("prometheus: %s=%s: %w", EnvBinary, p, err)
		}
		return filepath.Abs(p)
	}
	var tried []string
	if d := os.Getenv("SCHEMAGATE_BIN"); d != "" {
		tried = append(tried, filepath.Join(d, "k8s", "prometheus"))
	}
	if root, err := moduleRoot(); err == nil {
		tried = append(tried, filepath.Join(root, "bin", "k8s", "prometheus"))
	}
	for _, p := range tried {
		if executable(p) == nil {
			return filepath.Abs(p)
		}
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("%w: not in the schemagate checkout and %s is not set", ErrNoBinary, EnvBinary)
	}
	return "", fmt.Errorf("%w: no %s: run `make prometheus-binary` (hack/build-binaries.sh prometheus), or set %s",
		ErrNoBinary, strings.Join(tried, " nor "), EnvBinary)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory whose go.mod declares the
// module github.com/schemagate/schemagate.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" &&
					strings.Trim(f[1], `"`) == "github.com/schemagate/schemagate" {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no schemagate go.mod above the working directory")
		}
		dir = parent
	}
}

// Start writes a configuration, starts Prometheus on a free port of 127.0.0.1 and waits until it
// is ready (/-/ready). On error nothing is left running; the error includes the end of the log.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if opts.ScrapeInterval == 0 {
		opts.ScrapeInterval = time.Second
	}
	if opts.ScrapeInterval < 0 {
		return nil, fmt.Errorf("prometheus: negative scrape interval %s", opts.ScrapeInterval)
	}
	s := &Server{bin: bin, scheme: "http", client: &http.Client{Transport: http.DefaultTransport}}
	if opts.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "schemagate-prometheus-"); err != nil {
			return nil, fmt.Errorf("prometheus: creating a temporary directory: %w", err)
		}
		s.ownDir = true
	} else {
		if s.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("prometheus: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("prometheus: creating %s: %w", s.dir, err)
		}
	}
	defer func() {
		if err != nil && s.ownDir {
			_ = os.RemoveAll(s.dir)
		}
	}()
	s.configPath = filepath.Join(s.dir, "prometheus.yml")
	s.logPath = filepath.Join(s.dir, "prometheus.log")
	s.fileSDPath = opts.FileSDPath
	if s.fileSDPath == "" {
		s.fileSDPath = filepath.Join(s.dir, "targets.json")
	}
	if s.fileSDPath, err = filepath.Abs(s.fileSDPath); err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	if _, err := os.Stat(s.fileSDPath); errors.Is(err, os.ErrNotExist) {
		if err := s.SetTargets(nil); err != nil {
			return nil, err
		}
	}
	if opts.KubeconfigPath != "" {
		if opts.KubeconfigPath, err = filepath.Abs(opts.KubeconfigPath); err != nil {
			return nil, fmt.Errorf("prometheus: %w", err)
		}
	}
	if err := os.WriteFile(s.configPath, []byte(config(opts, s.fileSDPath)), 0o644); err != nil {
		return nil, fmt.Errorf("prometheus: writing its configuration: %w", err)
	}
	args := opts.Args
	if opts.Web != nil {
		webArg, err := s.writeWebConfig(opts.Web)
		if err != nil {
			return nil, err
		}
		args = append(append([]string(nil), args...), webArg)
	}

	// The port is free when chosen but may be taken before prometheus binds it: try another.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("prometheus: choosing a port: %w", err)
		}
		err = s.start(ctx, args)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	client, err := api.NewClient(api.Config{Address: s.URL(), Client: s.client})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("prometheus: API client: %w", err)
	}
	s.api = v1.NewAPI(client)
	return s, nil
}

// config is the server's prometheus.yml. Every string in it is JSON-quoted, which YAML reads as
// the same string.
func config(opts Options, fileSDPath string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	interval := model.Duration(opts.ScrapeInterval).String()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n",
		interval, interval, interval)
	fmt.Fprintf(&b, "storage:\n  tsdb:\n    retention:\n      time: %s\n", retention)
	b.WriteString("scrape_configs:\n")
	if len(opts.StaticTargets) > 0 {
		fmt.Fprintf(&b, "  - job_name: %s\n    static_configs:\n      - targets:\n", q(JobStatic))
		for _, t := range opts.StaticTargets {
			fmt.Fprintf(&b, "          - %s\n", q(t))
		}
	}
	fmt.Fprintf(&b, "  - job_name: %s\n    file_sd_configs:\n      - files: [%s]\n        refresh_interval: %s\n",
		q(JobFile), q(fileSDPath), fileSDRefresh)
	if opts.KubeconfigPath != "" {
		fmt.Fprintf(&b, "  - job_name: %s\n    kubernetes_sd_configs:\n      - role: pod\n        kubeconfig_file: %s\n",
			q(JobKubernetesPods), q(opts.KubeconfigPath))
		if opts.Namespace != "" {
			fmt.Fprintf(&b, "        namespaces:\n          names: [%s]\n", q(opts.Namespace))
		}
		b.WriteString(podRelabeling)
	}
	return b.String()
}

// podRelabeling keeps the running pods annotated prometheus.io/scrape: "true" that have an IP and
// a prometheus.io/port annotation, scrapes them at <pod IP>:<port> (one target per pod, whatever
// container ports they declare), and labels their series with shard, revision, namespace and pod.
const podRelabeling = `    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
        regex: "true"
        action: keep
      - source_labels: [__meta_kubernetes_pod_phase]
        regex: "Succeeded|Failed"
        action: drop
      - source_labels: [__meta_kubernetes_pod_ip, __meta_kubernetes_pod_annotation_prometheus_io_port]
        regex: '.+;\d+'
        action: keep
      - source_labels: [__meta_kubernetes_pod_ip, __meta_kubernetes_pod_annotation_prometheus_io_port]
        regex: '([^:]+);(\d+)'
        replacement: '$1:$2'
        target_label: __address__
      - source_labels: [__meta_kubernetes_pod_ip, __meta_kubernetes_pod_annotation_prometheus_io_port]
        regex: '(.*:.*);(\d+)'
        replacement: '[$1]:$2'
        target_label: __address__
      - source_labels: [__meta_kubernetes_pod_label_schemagate_io_shard]
        target_label: shard
      - source_labels: [__meta_kubernetes_pod_label_schemagate_io_revision]
        target_label: revision
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
`

func (s *Server) start(ctx context.Context, extra []string) error {
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("prometheus: opening its log: %w", err)
	}
	args := append([]string{
		"--config.file=" + s.configPath,
		"--storage.tsdb.path=" + filepath.Join(s.dir, "data"),
		"--web.listen-address=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		"--scrape.discovery-reload-interval=" + discoveryReload,
	}, extra...)
	cmd := exec.Command(s.bin, args...)
	// The working directory matters: without built-in assets, the UI looks for its files relative
	// to it, and the directory must exist.
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("prometheus: starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: s.client.Transport}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/-/ready", nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			return fmt.Errorf("prometheus exited before it was ready (%v); the end of %s:\n%s", err, s.logPath, s.LogTail(tailBytes))
		case <-ctx.Done():
			tail := s.LogTail(tailBytes)
			s.kill()
			return fmt.Errorf("prometheus not ready after %s (%w); the end of %s:\n%s", readyTimeout, ctx.Err(), s.logPath, tail)
		case <-tick.C:
		}
	}
}

// URL is the server's base URL, e.g. http://127.0.0.1:39417 (https with Options.Web).
func (s *Server) URL() string { return fmt.Sprintf("%s://127.0.0.1:%d", s.scheme, s.port) }

// Port is the TCP port the server listens on (on 127.0.0.1).
func (s *Server) Port() int { return s.port }

// Dir is the directory holding the configuration, the TSDB and the log.
func (s *Server) Dir() string { return s.dir }

// LogPath is the server's log file (its standard output and error).
func (s *Server) LogPath() string { return s.logPath }

// ConfigPath is the prometheus.yml the server runs with.
func (s *Server) ConfigPath() string { return s.configPath }

// FileSDPath is the file_sd file of the job JobFile.
func (s *Server) FileSDPath() string { return s.fileSDPath }

// LogTail is the last n bytes of the server's log (for test failures).
func (s *Server) LogTail(n int) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(n) {
		_, _ = f.Seek(fi.Size()-int64(n), io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// API is a client of the server's HTTP API (/api/v1).
func (s *Server) API() v1.API { return s.api }

// Query evaluates an instant PromQL query now. A query Prometheus rejects (e.g. one that does not
// parse) returns an error holding Prometheus' message; warnings are dropped.
func (s *Server) Query(ctx context.Context, promql string) (model.Value, error) {
	v, _, err := s.api.Query(ctx, promql, time.Now())
	if err != nil {
		return nil, fmt.Errorf("prometheus: query %q: %w", promql, err)
	}
	return v, nil
}

// SetTargets replaces the targets of the job JobFile. The file is replaced atomically (written
// beside it, then renamed), so Prometheus never reads half of it; file_sd notices the change within
// about a second, and the scrape manager acts on it within another.
func (s *Server) SetTargets(targets []Target) error {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	groups := make([]group, 0, len(targets))
	for _, t := range targets {
		if _, _, err := net.SplitHostPort(t.Addr); err != nil {
			return fmt.Errorf("prometheus: target %q: %w", t.Addr, err)
		}
		groups = append(groups, group{Targets: []string{t.Addr}, Labels: t.Labels})
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return fmt.Errorf("prometheus: encoding targets: %w", err)
	}
	s.sdMu.Lock()
	defer s.sdMu.Unlock()
	// The temporary name does not match the file_sd pattern (the file's own path), so Prometheus
	// ignores it.
	tmp, err := os.CreateTemp(filepath.Dir(s.fileSDPath), "."+filepath.Base(s.fileSDPath)+".tmp*")
	if err != nil {
		return fmt.Errorf("prometheus: writing targets: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("prometheus: writing targets: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("prometheus: writing targets: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("prometheus: writing targets: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.fileSDPath); err != nil {
		return fmt.Errorf("prometheus: writing targets: %w", err)
	}
	return nil
}

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it to exit. If Start
// created the directory, Stop removes it. Stop may be called more than once.
func (s *Server) Stop() {
	s.kill()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// kill stops the process, if it runs, and waits for it to exit.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd != nil {
		select {
		case <-done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(stopTimeout):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
