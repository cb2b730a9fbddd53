package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) (*managerFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := bindManagerFlags(fs)
	return f, fs.Parse(args)
}

func TestFlagDefaults(t *testing.T) {
	f, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddr != ":8443" || !c.MetricsSecure || c.EnableHTTP2 || c.MetricsCertDir != "" {
		t.Errorf("metrics defaults: addr %q secure %v http2 %v certdir %q", c.MetricsAddr, c.MetricsSecure, c.EnableHTTP2, c.MetricsCertDir)
	}
	if c.ProbeAddr != ":8081" || !c.LeaderElect || c.WatchNamespaces != nil {
		t.Errorf("defaults: probe %q leader %v namespaces %v", c.ProbeAddr, c.LeaderElect, c.WatchNamespaces)
	}
	if f.probeImage != "auto" || f.probeDatabaseImage != "postgres:18" || f.probeImages("") != nil {
		t.Errorf("probe defaults: image %q database %q; with no image resolved %+v", f.probeImage, f.probeDatabaseImage, f.probeImages(""))
	}
	if c.MaxConcurrentReconciles != 4 || c.KubeAPIQPS != -1 || c.KubeAPIBurst != 0 {
		t.Errorf("client defaults: workers %d qps %v burst %d", c.MaxConcurrentReconciles, c.KubeAPIQPS, c.KubeAPIBurst)
	}
	opts := c.Options()
	if !opts.Metrics.SecureServing || opts.Metrics.FilterProvider == nil || len(opts.Metrics.TLSOpts) != 1 {
		t.Errorf("secure metrics options: %+v", opts.Metrics)
	}
	if opts.Cache.DefaultNamespaces != nil || opts.Controller.MaxConcurrentReconciles != 4 {
		t.Errorf("cache namespaces %v, workers %d", opts.Cache.DefaultNamespaces, opts.Controller.MaxConcurrentReconciles)
	}
}

func TestFlagValues(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, f *managerFlags)
		err   string
	}{
		{name: "plain metrics default to :8080", args: []string{"--metrics-secure=false"}, check: func(t *testing.T, f *managerFlags) {
			c, _ := f.resolve()
			if c.MetricsAddr != ":8080" || c.Options().Metrics.SecureServing || c.Options().Metrics.FilterProvider != nil {
				t.Errorf("addr %q, options %+v", c.MetricsAddr, c.Options().Metrics)
			}
		}},
		{name: "disabled metrics stay disabled", args: []string{"--metrics-bind-address=0"}, check: func(t *testing.T, f *managerFlags) {
			if c, _ := f.resolve(); c.MetricsAddr != "0" {
				t.Errorf("addr %q", c.MetricsAddr)
			}
		}},
		{name: "namespaces: blanks and repeats dropped", args: []string{"--watch-namespaces= a, b,,a "}, check: func(t *testing.T, f *managerFlags) {
			c, _ := f.resolve()
			if !reflect.DeepEqual(c.WatchNamespaces, []string{"a", "b"}) {
				t.Errorf("namespaces %v", c.WatchNamespaces)
			}
			got := c.Options().Cache.DefaultNamespaces
			if _, ok := got["a"]; !ok || len(got) != 2 {
				t.Errorf("cache namespaces %v", got)
			}
		}},
		{name: "http2 and cert dir", args: []string{"--enable-http2", "--metrics-cert-dir=" + dir}, check: func(t *testing.T, f *managerFlags) {
			c, _ := f.resolve()
			if m := c.Options().Metrics; m.CertDir != dir || len(m.TLSOpts) != 0 {
				t.Errorf("metrics options %+v", m)
			}
		}},
		{name: "rate limit", args: []string{"--kube-api-qps=50", "--kube-api-burst=100", "--max-concurrent-reconciles=8"}, check: func(t *testing.T, f *managerFlags) {
			c, _ := f.resolve()
			if c.KubeAPIQPS != 50 || c.KubeAPIBurst != 100 || c.Options().Controller.MaxConcurrentReconciles != 8 {
				t.Errorf("config %+v", c)
			}
		}},
		{name: "bad namespace", args: []string{"--watch-namespaces=a,B_b"}, err: "--watch-namespaces"},
		{name: "bad leader election namespace", args: []string{"--leader-election-namespace=Ops_NS"}, err: "--leader-election-namespace"},
		{name: "leader election namespace", args: []string{"--leader-election-namespace=sg-ops"}, check: func(t *testing.T, f *managerFlags) {
			if c, _ := f.resolve(); c.LeaderElectionNamespace != "sg-ops" {
				t.Errorf("leader election namespace %q", c.LeaderElectionNamespace)
			}
		}},
		{name: "qps 0", args: []string{"--kube-api-qps=0"}, err: "--kube-api-qps"},
		{name: "negative burst", args: []string{"--kube-api-burst=-1"}, err: "--kube-api-burst"},
		{name: "no workers", args: []string{"--max-concurrent-reconciles=0"}, err: "--max-concurrent-reconciles"},
		{name: "cert dir without secure", args: []string{"--metrics-secure=false", "--metrics-cert-dir=" + dir}, err: "--metrics-cert-dir"},
		{name: "cert dir without files", args: []string{"--metrics-cert-dir=" + t.TempDir()}, err: "tls.crt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.err != "" {
				if _, err := f.resolve(); err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if _, err := f.resolve(); err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
}
