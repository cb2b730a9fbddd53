package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Defaults of the manager's flags (docs/manager.md says why each is what it is).
const (
	// defaultSecureMetricsAddr and defaultPlainMetricsAddr are --metrics-bind-address's default
	// with --metrics-secure true and false: the ports kubebuilder's scaffolds use for each.
	defaultSecureMetricsAddr = ":8443"
	defaultPlainMetricsAddr  = ":8080"
	// defaultKubeAPIQPS < 0: no client-side rate limit, as controller-runtime's GetConfig sets.
	defaultKubeAPIQPS = -1
	// defaultProbeDatabaseImage is the official postgres image of the newest major version
	// released: its pg_dump reads a database of any older one (a newer database than the image
	// makes the probe's copy step fail: the probe is Unavailable).
	defaultProbeDatabaseImage = "postgres:18"
)

// managerFlags binds the manager's own flags (not --kubeconfig or the zap flags, which
// controller-runtime binds) on fs; call resolve after fs.Parse.
type managerFlags struct {
	cfg             controllers.ManagerConfig
	watchNamespaces string
	kubeAPIQPS      float64
	// hubID and spokeCleanupTimeout configure shards in other clusters (docs/clusters.md).
	hubID               string
	spokeCleanupTimeout time.Duration
	// probeImage and probeDatabaseImage are the migration probe's images (docs/manager.md).
	probeImage, probeDatabaseImage string
}

func bindManagerFlags(fs *flag.FlagSet) *managerFlags {
	f := &managerFlags{}
	c := &f.cfg
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", "",
		"Address (host:port) of the metrics endpoint; \"0\" disables it. Default "+defaultSecureMetricsAddr+" with --metrics-secure, "+defaultPlainMetricsAddr+" without.")
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to callers whose bearer token the API server authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview). False serves plain HTTP to anyone who reaches the address: for local runs and tests.")
	fs.StringVar(&c.MetricsCertDir, "metrics-cert-dir", "",
		"Directory with tls.crt and tls.key for the HTTPS metrics endpoint, reloaded when they change. Empty: a self-signed certificate made at start.")
	fs.BoolVar(&c.EnableHTTP2, "enable-http2", false,
		"Let the HTTPS metrics endpoint negotiate HTTP/2. Off by default: HTTP/1.1 only, out of reach of HTTP/2 stream-reset floods (CVE-2023-44487).")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints (\"0\" disables them).")
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", "0", "Address of Go's /debug/pprof/ profiles, for a profile of the manager (\"0\", the default, disables them; they are unauthenticated: bind them to loopback).")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "Elect a leader so that only one manager acts at a time.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: the manager's own, or "+outOfClusterLeaderElectionNamespace+" out of cluster). Independent of --watch-namespaces.")
	fs.StringVar(&f.watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces whose RoutingServices the manager reconciles; it then reads and watches nothing elsewhere, so Roles in these namespaces suffice. Empty: every namespace (needs a ClusterRole).")
	fs.IntVar(&c.MaxConcurrentReconciles, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles,
		"RoutingServices reconciled at once (one object is never reconciled by two workers at a time).")
	fs.Float64Var(&f.kubeAPIQPS, "kube-api-qps", defaultKubeAPIQPS,
		"Client-side limit of the manager's requests to the API server, per second. Negative (default): no client-side limit; the API server's Priority and Fairness limits the manager, and client-go retries its 429 answers after their Retry-After.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 0,
		"Requests allowed above --kube-api-qps in a burst; only used when --kube-api-qps > 0. 0: client-go's default (10).")
	fs.StringVar(&f.hubID, "hub-id", "",
		"This hub's identity, recorded in the anchor of every spoke it manages; a hub never writes a spoke whose anchor names another (schemagate.io/takeover hands it over). Empty: the UID of this cluster's kube-system namespace.")
	fs.DurationVar(&f.spokeCleanupTimeout, "spoke-cleanup-timeout", controllers.DefaultSpokeCleanupTimeout,
		"How long the deletion of a RoutingService waits for its unreachable spokes before it goes ahead and leaves their ReplicaSets running.")
	fs.StringVar(&f.probeImage, "probe-image", controllers.ProbeImageAuto,
		"Image holding /schemagate-schema (schemagate's own) that migration probe Jobs run their steps with. \"auto\": the image of this manager's own pod (POD_NAMESPACE and POD_NAME name it; outside a pod, no probe). Empty: no migration probe runs (spec.schema.probe).")
	fs.StringVar(&f.probeDatabaseImage, "probe-database-image", defaultProbeDatabaseImage,
		"The scratch PostgreSQL image of migration probes (the official postgres image; the major version of your databases, or a newer one); spec.schema.probe.databaseImage overrides it. Empty: only RoutingServices that name their own.")
	return f
}

// probeImages are the migration probe's images with tools as --probe-image resolved
// (controllers.ResolveProbeImage), or nil when that is empty.
func (f *managerFlags) probeImages(tools string) *rollout.ProbeImages {
	if tools == "" {
		return nil
	}
	return &rollout.ProbeImages{Tools: tools, Database: f.probeDatabaseImage}
}

// resolve checks the parsed flags and returns the manager's configuration. Errors name the flag.
func (f *managerFlags) resolve() (controllers.ManagerConfig, error) {
	c := f.cfg
	if c.MetricsAddr == "" {
		c.MetricsAddr = defaultPlainMetricsAddr
		if c.MetricsSecure {
			c.MetricsAddr = defaultSecureMetricsAddr
		}
	}
	if c.MetricsCertDir != "" {
		if !c.MetricsSecure {
			return c, errors.New("--metrics-cert-dir needs --metrics-secure=true")
		}
		// controller-runtime would silently fall back to a self-signed certificate.
		for _, name := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(c.MetricsCertDir, name)); err != nil {
				return c, fmt.Errorf("--metrics-cert-dir: %w", err)
			}
		}
	}
	// The Lease's namespace, when given, must be a namespace name too: the API server would
	// refuse every Lease request at runtime, and the manager would never lead.
	if n := c.LeaderElectionNamespace; n != "" {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return c, fmt.Errorf("--leader-election-namespace: %q is not a namespace name: %s", n, strings.Join(errs, "; "))
		}
	}
	ns, err := parseNamespaces(f.watchNamespaces)
	if err != nil {
		return c, fmt.Errorf("--watch-namespaces: %w", err)
	}
	c.WatchNamespaces = ns
	if c.MaxConcurrentReconciles < 1 {
		return c, fmt.Errorf("--max-concurrent-reconciles must be at least 1, not %d", c.MaxConcurrentReconciles)
	}
	if f.kubeAPIQPS == 0 {
		// rest.Config reads 0 as "client-go's default of 5 per second", which nobody means by 0.
		return c, errors.New("--kube-api-qps must be negative (no client-side limit) or positive, not 0")
	}
	c.KubeAPIQPS = float32(f.kubeAPIQPS)
	if c.KubeAPIBurst < 0 {
		return c, fmt.Errorf("--kube-api-burst must not be negative, not %d", c.KubeAPIBurst)
	}
	return c, nil
}

// parseNamespaces splits a comma-separated list of namespace names, ignoring blanks around and
// between them and repeats; each must be a DNS-1123 label, as namespace names are.
func parseNamespaces(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(s, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" || seen[ns] {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		seen[ns] = true
		out = append(out, ns)
	}
	return out, nil
}
