package controllers

import (
	"cmp"
	"crypto/tls"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Scheme holds the API types the manager reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(routingv1alpha1.AddToScheme(s))
	return s
}

// ManagerConfig is what the manager's command line (cmd/manager, docs/manager.md) decides. The
// zero value is a manager with plain-HTTP metrics on controller-runtime's default address, no
// leader election, every namespace watched, and controller-runtime's defaults elsewhere.
type ManagerConfig struct {
	// MetricsAddr is the metrics endpoint's listen address, host:port; "0" disables it.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS, and only to callers whose bearer token the API
	// server authenticates (TokenReview) and authorizes for `get` on the non-resource URL
	// /metrics (SubjectAccessReview). The manager's own identity then needs `create` on
	// tokenreviews and subjectaccessreviews (controllers/rbac.go). False serves plain HTTP to
	// anyone who can reach the address.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the HTTPS metrics endpoint, reloaded when they
	// change; "" means a self-signed certificate made at start (for 127.0.0.1 and localhost).
	MetricsCertDir string
	// EnableHTTP2 lets the HTTPS metrics endpoint negotiate HTTP/2. Off, it speaks HTTP/1.1 only,
	// which keeps it out of reach of HTTP/2 stream-reset floods (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
	// ProbeAddr is the listen address of /healthz and /readyz; "0" disables them.
	ProbeAddr string
	// PprofAddr is the listen address of Go's /debug/pprof/ handlers (controller-runtime's
	// PprofBindAddress); "0" or empty disables them. They are not authenticated.
	PprofAddr string
	// LeaderElect elects a leader through a Lease so that one manager acts at a time.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; "" lets controller-runtime use the manager's own
	// namespace. It is independent of WatchNamespaces.
	LeaderElectionNamespace string
	// WatchNamespaces restricts the manager's cache, and so everything it reads, watches and
	// reconciles, to these namespaces; empty means every namespace. Restricted, the manager needs
	// Roles in these namespaces only (docs/manager.md lists them).
	WatchNamespaces []string
	// MaxConcurrentReconciles is the manager-wide number of RoutingServices reconciled at once
	// (config.Controller.MaxConcurrentReconciles); 0 means DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// KubeAPIQPS and KubeAPIBurst are the client-side rate limit of every request the manager
	// sends: requests per second and the burst above it. KubeAPIQPS < 0 disables client-side rate
	// limiting (controller-runtime's default): the API server's Priority and Fairness does the
	// limiting, and client-go retries its 429 answers after their Retry-After. 0 leaves the
	// config as it is.
	KubeAPIQPS   float32
	KubeAPIBurst int
}

// DefaultMaxConcurrentReconciles is how many RoutingServices are reconciled at once by default.
// A reconcile takes milliseconds (p50 5 ms in issue 13's benchmark at 50 RoutingServices), except
// while it measures an http or prometheus shard check (up to its timeoutSeconds, at most 60 s);
// four workers keep one hung check endpoint from holding up every other RoutingService.
const DefaultMaxConcurrentReconciles = 4

// ManagerOptions is ManagerConfig{...}.Options() for the envtest suite: plain-HTTP metrics (or
// none, with "0") and every namespace watched.
func ManagerOptions(metricsAddr, probeAddr string, leaderElect bool, leaderElectionNamespace string) ctrl.Options {
	return ManagerConfig{
		MetricsAddr: metricsAddr, ProbeAddr: probeAddr,
		LeaderElect: leaderElect, LeaderElectionNamespace: leaderElectionNamespace,
	}.Options()
}

// Options are the manager's options. The cache holds only the ReplicaSets, Jobs, Pods,
// ControllerRevisions and budgets labelled
// app.kubernetes.io/managed-by=schemagate, so the manager's memory does not grow with unrelated
// objects in the cluster, and, with WatchNamespaces, only objects in those namespaces.
func (c ManagerConfig) Options() ctrl.Options {
	ours := labels.SelectorFromSet(labels.Set{rollout.LabelManagedBy: rollout.ManagedByValue})
	opts := ctrl.Options{
		Scheme:                  Scheme(),
		Metrics:                 c.metricsOptions(),
		HealthProbeBindAddress:  c.ProbeAddr,
		PprofBindAddress:        cmp.Or(c.PprofAddr, "0"),
		LeaderElection:          c.LeaderElect,
		LeaderElectionID:        "schemagate.routing.schemagate.io",
		LeaderElectionNamespace: c.LeaderElectionNamespace,
		Cache: cache.Options{
			// Nothing in the manager reads managedFields: without them every cached object, and
			// every copy a List makes of one, is smaller (the bench's allocation profile showed
			// their deep copies among the largest allocators).
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// With the managedFields entries that own spec.replicas: a write through /scale
				// by someone else is named in an Event (pkg/rollout/resize.go).
				&appsv1.ReplicaSet{}: {Label: ours, Transform: keepReplicasWriter},
				&batchv1.Job{}:       {Label: ours},
				&corev1.Pod{}:        {Label: ours},
				// The revision records (pkg/rollout/history.go).
				&appsv1.ControllerRevision{}: {Label: ours},
				// The per-shard budgets (controllers/pdb.go), labelled like the rest.
				&policyv1.PodDisruptionBudget{}: {Label: ours},
				// The scale targets of autoscaled shards, with only the managedFields entries that
				// say who set their size (scaling.go), and the autoscalers schemagate owns.
				&routingv1alpha1.RoutingShard{}:          {Label: ours, Transform: keepReplicasWriter},
				&autoscalingv2.HorizontalPodAutoscaler{}: {Label: ours},
			}},
		Controller: config.Controller{MaxConcurrentReconciles: cmp.Or(c.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)},
	}
	if len(c.WatchNamespaces) > 0 {
		// ByObject entries without namespaces of their own inherit these.
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.WatchNamespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

func (c ManagerConfig) metricsOptions() metricsserver.Options {
	o := metricsserver.Options{BindAddress: c.MetricsAddr}
	if !c.MetricsSecure {
		return o
	}
	o.SecureServing = true
	o.CertDir = c.MetricsCertDir
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	if !c.EnableHTTP2 {
		o.TLSOpts = append(o.TLSOpts, func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} })
	}
	return o
}

// RESTConfig returns a copy of base with the client-side rate limit of KubeAPIQPS and
// KubeAPIBurst (left as in base where they are 0).
func (c ManagerConfig) RESTConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	if c.KubeAPIQPS != 0 {
		cfg.QPS = c.KubeAPIQPS
	}
	if c.KubeAPIBurst != 0 {
		cfg.Burst = c.KubeAPIBurst
	}
	return cfg
}
