package integration

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// slowSpoke is a TLS proxy on loopback in front of the suite's API server that holds every
// ReplicaSet list of a cache (a list, or a watch that starts with one; not the reachability
// probe's one-item list) for delay before it passes it on, and counts the ReplicaSet watches that
// go through it.
type slowSpoke struct {
	srv   *httptest.Server
	delay time.Duration

	requests, watches, open atomic.Int32
	mu                      sync.Mutex
	firstWatch              time.Time
}

func newSlowSpoke(t *testing.T, delay time.Duration) *slowSpoke {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(&rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport, proxy.FlushInterval = tr, -1
	s := &slowSpoke{delay: delay}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		s.requests.Add(1)
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicasets") {
			watch := q.Get("watch") == "true"
			if watch {
				s.watches.Add(1)
				s.open.Add(1)
				defer s.open.Add(-1)
				s.mu.Lock()
				if s.firstWatch.IsZero() {
					s.firstWatch = time.Now()
				}
				s.mu.Unlock()
			}
			// The cache's list: a list, or a watch that begins with the list (client-go's
			// streaming list, sendInitialEvents); never the probe's one-item list.
			if (!watch && q.Get("limit") != "1") || q.Get("sendInitialEvents") == "true" {
				select {
				case <-time.After(s.delay): // what is measured: a list slower than the old 10 s cut
				case <-r.Context().Done():
					return
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// Its watches never end by themselves: Close alone would wait for them.
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

// kubeconfig is a kubeconfig for the proxy, with token as its user's bearer token; insecure
// leaves out the proxy's CA and skips verifying its certificate.
func (s *slowSpoke) kubeconfig(t *testing.T, token string, insecure bool) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["slow"] = &clientcmdapi.Cluster{Server: s.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})}
	if insecure {
		kc.Clusters["slow"].CertificateAuthorityData, kc.Clusters["slow"].InsecureSkipTLSVerify = nil, true
	}
	kc.AuthInfos["slow"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["slow"] = &clientcmdapi.Context{Cluster: "slow", AuthInfo: "slow"}
	kc.CurrentContext = "slow"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A region cluster whose first ReplicaSet list takes 12 s (a large namespace, a slow link): the
// spoke's cache still syncs (its requests have no 10 s client timeout, which used to cut the list
// every time, so the cluster was never reachable), the shard becomes Ready, and the cache's
// ReplicaSet watch stays open past 10 s instead of being cut and started again.
func TestSpokeSlowListAndLongWatch(t *testing.T) {
	t.Parallel()
	slow := newSlowSpoke(t, 12*time.Second)
	start := time.Now()
	ns, _ := slow.euThroughIt(t, false)
	kit.WaitReady(t, ns, 90*time.Second)
	t.Logf("Ready %.1fs after the create, through a ReplicaSet list held %s", time.Since(start).Seconds(), slow.delay)
	story.Eventually(t, 10*time.Second, "ClustersReachable", kit.HasCondition(t, ns, routingv1alpha1.ConditionClustersReachable, metav1.ConditionTrue, routingv1alpha1.ReasonClustersReachable))

	// The first watch (the list's, or the one after it) is open 15 s after it began, and is the
	// only one.
	slow.mu.Lock()
	first := slow.firstWatch
	slow.mu.Unlock()
	if first.IsZero() {
		t.Fatal("no ReplicaSet watch went through the proxy")
	}
	story.Eventually(t, 30*time.Second, "15 s of the first watch", func() error {
		if d := time.Since(first); d < 15*time.Second {
			return fmt.Errorf("the first watch is %s old", d.Round(time.Second))
		}
		return nil
	})
	if n, open := slow.watches.Load(), slow.open.Load(); n != 1 || open != 1 {
		t.Fatalf("%d ReplicaSet watches started, %d open, 15 s after the first: want one, still open", n, open)
	}
}

// euThroughIt creates, in a namespace of its own, rs-a with eu-west in cluster "eu" (a spoke
// namespace of the suite's API server) reached through s with a ServiceAccount token (insecure:
// without s's CA), and returns that namespace and the cluster's Secret.
func (s *slowSpoke) euThroughIt(t *testing.T, insecure bool) (string, *corev1.Secret) {
	t.Helper()
	ns, spokeNS := kit.NewNamespace(t), kit.NewNamespace(t)
	fake.setDatabase(spokeNS, "1", false)
	return ns, createWithEUIn(t, ns, spokeNS, s.kubeconfig(t, spokeToken(t, ns), insecure))
}

// spokeToken is a token of a new ServiceAccount of ns that is cluster-admin: a region cluster's
// credentials, which go through a proxy (a client certificate would end at it).
func spokeToken(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke-admin"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "slow-spoke-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	for _, o := range []client.Object{sa, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// A cluster Secret whose kubeconfig skips verifying the server's certificate is refused
// (CredentialsRefused, naming the field and the opt-in) and its token goes nowhere; annotated
// schemagate.io/allow-insecure-tls=true it is used, and ClustersReachable says that cluster is
// not verified. Without the annotation again, or with the Secret deleted, the connection built
// from it closes: its watches end and nothing more reaches the cluster with those credentials.
func TestSpokeInsecureOptInAndRevokedCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy := newSlowSpoke(t, 0)
	ns, secret := proxy.euThroughIt(t, true)
	condition := func(status metav1.ConditionStatus, reason string, says ...string) func() error {
		return func() error {
			c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionClustersReachable)
			if c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("ClustersReachable %+v", c)
			}
			for _, s := range says {
				if !strings.Contains(c.Message, s) {
					return fmt.Errorf("ClustersReachable does not say %q: %s", s, c.Message)
				}
			}
			return nil
		}
	}
	story.Eventually(t, 30*time.Second, "refused", condition(metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsRefused, "insecure-skip-tls-verify", routingv1alpha1.AnnotationAllowInsecureTLS))
	if n := proxy.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the cluster with credentials that were refused", n)
	}

	annotate := func(value string) {
		t.Helper()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(secret.Annotations, routingv1alpha1.AnnotationAllowInsecureTLS)
		} else {
			metav1.SetMetaDataAnnotation(&secret.ObjectMeta, routingv1alpha1.AnnotationAllowInsecureTLS, value)
		}
		if err := k8s.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	annotate("true")
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "reachable, not verified", condition(metav1.ConditionTrue, routingv1alpha1.ReasonClustersReachable, "cluster eu", "not verified"))
	if proxy.open.Load() == 0 {
		t.Fatal("no watch open through the accepted connection")
	}

	// The opt-in withdrawn: refused again, and the connection closes.
	annotate("")
	story.Eventually(t, 30*time.Second, "refused again", condition(metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsRefused, "insecure-skip-tls-verify"))
	story.Eventually(t, 20*time.Second, "its watches closed", func() error {
		if n := proxy.open.Load(); n != 0 {
			return fmt.Errorf("%d watches still open", n)
		}
		return nil
	})
	// What is measured is a quiet cluster: the reachability probe asks every second (the
	// suite's ProbeInterval), so three seconds without a request means it stopped.
	before := proxy.requests.Load()
	story.Consistently(t, 3*time.Second, "no request with refused credentials", func() error {
		if after := proxy.requests.Load(); after != before {
			return fmt.Errorf("%d requests reached the cluster after its credentials were refused", after-before)
		}
		return nil
	})
}
