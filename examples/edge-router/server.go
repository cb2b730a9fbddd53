package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// server answers HTTP: /healthz, /ready, /metrics, and every other path by the request's Host.
type server struct {
	cfg      serveConfig
	table    *table
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	draining atomic.Bool
	routed   atomic.Int64
	// ballast is what --memory-per-request kept.
	ballastMu sync.Mutex
	ballast   [][]byte
}

func newServer(cfg serveConfig) *server {
	if cfg.TargetFormat == "" {
		cfg.TargetFormat = formatText
	}
	if cfg.TargetColumn == "" {
		cfg.TargetColumn = defaultTargetColumn[cfg.TargetFormat]
	}
	s := &server{cfg: cfg, table: &table{cfg: cfg}, registry: prometheus.NewRegistry()}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_router_requests_total", Help: "Routed requests by HTTP status code.",
	}, []string{"code"})
	s.requests.WithLabelValues("200")
	s.requests.WithLabelValues("404")
	s.registry.MustRegister(s.requests,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_router_routes", Help: "Routes in the table being served.",
		}, func() float64 { n, _, _ := s.table.stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_router_route_table_age_seconds", Help: "Seconds since the last successful route load (+Inf before the first).",
		}, s.table.ageSeconds),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_router_route_load_errors_total", Help: "Failed route loads.",
		}, func() float64 { _, n, _ := s.table.stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_router_invalid_routes", Help: "Rows of the last successful load whose target is not an http(s) URL (they answer 404).",
		}, s.table.invalidRoutes),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_router_database_schema_version", Help: "schema_migrations.version as last read (0: none).",
		}, func() float64 { _, _, v := s.table.stats(); return float64(v) }),
	)
	return s
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if s.draining.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		if s.cfg.UnreadyInRegion != "" && s.cfg.UnreadyInRegion == s.cfg.Region {
			http.Error(w, "not ready: unready in region "+s.cfg.Region+", as --unready-in-region asks", http.StatusServiceUnavailable)
			return
		}
		if why := s.table.notReady(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/", s.route)
	return mux
}

// route answers by Host: 200 naming the upstream, or 404 when the table has no route for it.
func (s *server) route(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	if s.cfg.Revision != "" {
		w.Header().Set("X-Revision", s.cfg.Revision)
	}
	if s.cfg.Region != "" {
		w.Header().Set("X-Region", s.cfg.Region)
	}
	if s.cfg.CrashInRegion != "" && s.cfg.CrashInRegion == s.cfg.Region && s.routed.Add(1) > int64(s.cfg.CrashAfter) {
		log.Printf("crashing under load in region %s, as --crash-in-region asks", s.cfg.Region)
		os.Exit(1)
	}
	if n := s.cfg.MemoryPerRequest; n > 0 {
		s.keep(n)
	}
	rt, ok := s.table.lookup(host)
	if !ok {
		s.requests.WithLabelValues("404").Inc()
		http.Error(w, "no route for "+host, http.StatusNotFound)
		return
	}
	s.requests.WithLabelValues("200").Inc()
	if rt.Region != "" {
		fmt.Fprintf(w, "%s -> %s (region %s)\n", host, rt.Upstream, rt.Region)
	} else {
		fmt.Fprintf(w, "%s -> %s\n", host, rt.Upstream)
	}
}

// serve runs the refresh loop and the HTTP server until ctx ends (SIGTERM), then drains.
func serve(ctx context.Context, cfg serveConfig) error {
	s := newServer(cfg)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	go s.table.refresh(ctx)
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("edge-router serving on %s: revision %q, schema %d, targets %s from %s, check-schema %v, cache-policy %s, refresh %s, cache-ttl %s",
		ln.Addr(), cfg.Revision, cfg.Schema, cfg.TargetFormat, cfg.TargetColumn, cfg.CheckSchema, cfg.CachePolicy, cfg.Refresh, cfg.CacheTTL)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Drain: fail /ready and keep answering for ShutdownDelay, so the endpoints drop this pod
	// before its listener closes (as a production router behind Kubernetes endpoints should).
	s.draining.Store(true)
	time.Sleep(cfg.ShutdownDelay)
	drain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(drain)
}

// keep allocates n bytes, touches every page so that they count in the resident set, and keeps
// them for the life of the process (--memory-per-request).
func (s *server) keep(n int) {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	s.ballastMu.Lock()
	s.ballast = append(s.ballast, b)
	s.ballastMu.Unlock()
}
