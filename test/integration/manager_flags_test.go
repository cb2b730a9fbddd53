package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/story"
)

// The manager's command line (cmd/manager/flags.go, docs/manager.md), each flag's behaviour against a real
// API server of the test's own (startFlagsEnv).

// --metrics-secure (the default): the metrics endpoint speaks HTTPS only and answers a request
// without a token 401, a ServiceAccount's token without `get /metrics` 403, and one bound to a
// ClusterRole granting it 200 with schemagate's series, the phase histogram labelled by the
// RoutingService.
func TestManagerFlagsSecureMetrics(t *testing.T) {
	env := startFlagsEnv(t)
	ctx := context.Background()
	port := freeLoopbackPort(t)
	startFlagsManager(t, env.cfg, controllers.ManagerConfig{
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", port), MetricsSecure: true, ProbeAddr: "0",
	}, nil)

	ns := env.kit.NewNamespace(t)
	if err := env.c.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	env.kit.WaitReady(t, ns, 60*time.Second)

	for _, sa := range []string{"scraper-denied", "scraper-allowed"} {
		if err := env.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper-allowed"}},
	}
	for _, o := range []client.Object{reader, binding} {
		if err := env.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(env.cfg)
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	denied, allowed := token("scraper-denied"), token("scraper-allowed")

	// The certificate is the self-signed one the manager made at start: nothing to verify it with.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback, self-signed
	scrape := func(scheme, token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d/metrics", scheme, port), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if scheme == "https" && resp.TLS == nil {
			return 0, "", fmt.Errorf("not TLS")
		}
		return resp.StatusCode, string(b), nil
	}
	story.Eventually(t, 10*time.Second, "no token → 401", func() error {
		if code, body, err := scrape("https", ""); err != nil || code != http.StatusUnauthorized {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
	// controller-runtime's filter answers 500 "Authentication failed" when the TokenReview comes
	// back with an error (a token that is not a JWT), 401 when it only says "not authenticated".
	if code, body, err := scrape("https", "not-a-token"); err != nil || code == http.StatusOK || strings.Contains(body, "schemagate_") {
		t.Errorf("a forged token: %d %q %v, want a refusal", code, body, err)
	}
	if code, body, err := scrape("https", denied); err != nil || code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without get /metrics: %d %q %v, want 403", code, body, err)
	}
	if code, body, err := scrape("http", allowed); err == nil && strings.Contains(body, "schemagate_") {
		t.Errorf("plain HTTP was answered with metrics (%d)", code)
	}
	code, body, err := scrape("https", allowed)
	if err != nil || code != http.StatusOK {
		t.Fatalf("a ServiceAccount bound to get /metrics: %d %q %v, want 200", code, body, err)
	}
	for _, want := range []string{
		fmt.Sprintf(`schemagate_rollout_step{name="rs-a",namespace="%s",reason="RolloutComplete"} 1`, ns),
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="migration",shard=""} 1`, ns),
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="shard_bake",shard="us-east"}`, ns),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// forbiddenLog records the requests the API server refused with 403.
type forbiddenLog struct {
	mu   sync.Mutex
	reqs []string
}

func (f *forbiddenLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.reqs = append(f.reqs, requestKind(r))
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbiddenLog) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readRules reads the rules of the Role or ClusterRole in a file under config/rbac.
func readRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootDir, "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole // a Role has the same rules field
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s has no rules", file)
	}
	return role.Rules
}

// --watch-namespaces=team-a: the manager reconciles team-a's RoutingService and leaves
// team-b's alone (no ReplicaSet, no Job, no status). It runs as a ServiceAccount (impersonated)
// whose only grants are Roles: the rules of config/rbac/role.yaml in team-a, and
// config/rbac/leader_election_role.yaml in the manager's own namespace, where its Lease is. The
// API server refuses none of its requests.
func TestManagerFlagsWatchNamespaces(t *testing.T) {
	env := startFlagsEnv(t)
	ctx := context.Background()
	const home, sa = "schemagate-system", "schemagate"
	for _, ns := range []string{home, "team-a", "team-b"} {
		if err := env.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	grant := func(ns, name string, rules []rbacv1.PolicyRule) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa}},
		}
		for _, o := range []client.Object{role, rb} {
			if err := env.c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	grant("team-a", "schemagate-manager", readRules(t, "role.yaml"))
	grant(home, "schemagate-leader-election", readRules(t, "leader_election_role.yaml"))

	for _, ns := range []string{"team-a", "team-b"} {
		if err := env.c.Create(ctx, story.Fixture(ns)); err != nil {
			t.Fatal(err)
		}
	}

	forbidden := &forbiddenLog{}
	asSA := rest.CopyConfig(env.cfg)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + home + ":" + sa}
	asSA.WrapTransport = forbidden.wrap
	startFlagsManager(t, asSA, controllers.ManagerConfig{
		MetricsAddr: "0", ProbeAddr: "0", LeaderElect: true, LeaderElectionNamespace: home,
		WatchNamespaces: []string{"team-a"}, MaxConcurrentReconciles: 4, KubeAPIQPS: -1,
	}, nil)

	env.kit.WaitReady(t, "team-a", 60*time.Second)
	if got := env.kit.Serving(t, "team-a"); got != story.AllV1 {
		t.Errorf("team-a serves %s, want %s", got, story.AllV1)
	}
	if n := len(env.kit.Jobs(t, "team-a")); n == 0 {
		t.Error("team-a has no migration Job")
	}
	story.Consistently(t, 3*time.Second, "team-b untouched", func() error {
		rsvc := env.kit.Get(t, "team-b")
		if rsvc.Status.ObservedGeneration != 0 || len(rsvc.Status.Conditions) > 0 {
			return fmt.Errorf("team-b's RoutingService has a status: %+v", rsvc.Status)
		}
		if rs, jobs := env.kit.ReplicaSets(t, "team-b"), env.kit.Jobs(t, "team-b"); len(rs)+len(jobs) > 0 {
			return fmt.Errorf("team-b has %d ReplicaSets and %d Jobs", len(rs), len(jobs))
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	if err := env.c.Get(ctx, client.ObjectKey{Namespace: home, Name: "schemagate.routing.schemagate.io"}, lease); err != nil {
		t.Errorf("the leader election Lease in %s: %v", home, err)
	} else if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("the Lease has no holder: %+v", lease.Spec)
	}
	if got := forbidden.list(); len(got) > 0 {
		t.Errorf("the API server refused %d of the manager's requests: %v", len(got), got)
	}
}

// --kube-api-qps (default: no client-side limit): the API server limits the manager with 429 and
// Retry-After, and client-go waits and sends the request again. Behind a proxy that answers the
// first two of each write (create, update, patch, delete) and the first of each read and watch
// with 429, a RoutingService still rolls out to Ready, with no reconcile error and no Warning.
func TestManagerFlagsRetriesTooManyRequests(t *testing.T) {
	env := startFlagsEnv(t)
	ctx := context.Background()
	proxy := startThrottlingProxy(t, env.cfg, func(r *http.Request) int {
		if r.Method == http.MethodGet {
			return 1
		}
		return 2
	})
	log := &managerLog{}
	start := time.Now()
	startFlagsManager(t, &rest.Config{Host: proxy.URL}, controllers.ManagerConfig{
		MetricsAddr: "0", ProbeAddr: "0", MaxConcurrentReconciles: 4, KubeAPIQPS: -1,
	}, log)

	ns := env.kit.NewNamespace(t)
	if err := env.c.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	env.kit.WaitReady(t, ns, 90*time.Second)
	t.Logf("Ready %.1f s after the manager started", time.Since(start).Seconds())
	story.Eventually(t, 5*time.Second, "Stalled=False", env.kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionFalse, ""))
	if got := env.kit.Serving(t, ns); got != story.AllV1 {
		t.Errorf("serving %s, want %s", got, story.AllV1)
	}
	if got := log.reconcileErrors(); len(got) > 0 {
		t.Errorf("Reconcile returned %d errors: %v", len(got), got)
	}
	var events eventsv1.EventList
	if err := env.c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning %s: %s", e.Reason, e.Note)
		}
	}

	seen, throttled := proxy.counts()
	total := 0
	for _, n := range throttled {
		total += n
	}
	t.Logf("429 answers: %d over %d kinds of request", total, len(throttled))
	for _, want := range []struct{ method, suffix string }{
		{"POST", "/replicasets"}, {"POST", "/jobs"}, {"PUT", "/routingservices/rs-a/status"},
	} {
		found := false
		for _, k := range kinds(throttled) {
			if strings.HasPrefix(k, want.method+" /") && strings.HasSuffix(k, want.suffix) && strings.Contains(k, "/namespaces/"+ns+"/") {
				found = true
				if seen[k] <= throttled[k] {
					t.Errorf("%s: answered 429 %d times and never sent again", k, throttled[k])
				}
			}
		}
		if !found {
			t.Errorf("no %s …%s was answered 429: %v", want.method, want.suffix, kinds(throttled))
		}
	}
}

// --max-concurrent-reconciles reaches the RoutingService controller through the manager's
// config.Controller: its controller starts that many workers.
func TestManagerFlagsMaxConcurrentReconciles(t *testing.T) {
	env := startFlagsEnv(t)
	log := &managerLog{}
	startFlagsManager(t, env.cfg, controllers.ManagerConfig{
		MetricsAddr: "0", ProbeAddr: "0", MaxConcurrentReconciles: 2, KubeAPIQPS: -1,
	}, log)
	story.Eventually(t, 30*time.Second, "the controller's workers started", func() error {
		if len(log.matching(`"Starting workers"`, `"controller"="routingservice"`)) == 0 {
			return fmt.Errorf("no \"Starting workers\" line yet")
		}
		return nil
	})
	if got := log.matching(`"Starting workers"`, `"controller"="routingservice"`, `"worker count"=2`); len(got) != 1 {
		t.Errorf("the RoutingService controller did not start 2 workers: %v", log.matching(`"Starting workers"`))
	}
}
