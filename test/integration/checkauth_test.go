package integration

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/certs"
	"github.com/schemagate/schemagate/test/story"
)

// authServer is an https server on loopback that asks for a client certificate of its CA and
// answers 200 only to the bearer token; it remembers the client certificate's name and the
// shard of each request it answered 200.
type authServer struct {
	*httptest.Server
	ca     *certs.CA
	client certs.Pair
	mu     sync.Mutex
	ok     []string
}

func newAuthServer(t *testing.T, token string) *authServer {
	t.Helper()
	m, err := certs.NewMutual("checks-ca", "smoke.checks.example", "schemagate-manager")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := m.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	s := &authServer{ca: m.CA, client: m.Client}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		s.ok = append(s.ok, r.TLS.PeerCertificates[0].Subject.CommonName+" "+r.URL.Path)
		s.mu.Unlock()
		fmt.Fprintln(w, "ok")
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = serverTLS
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *authServer) answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ok...)
}

// Item 5 of issue 23: an http check that authenticates. The check's token, CA and client
// certificate are Secrets of the RoutingService's namespace. The token's Secret does not exist
// yet: each measurement is an Error whose message, in status, names the missing Secret, and
// nothing is promoted past us-east; once the Secret is created the measurements pass with the
// token and the client certificate, and v2 reaches every shard. No Secret's value is ever in
// status.
func TestStoryHTTPCheckAuthenticatesWithSecrets(t *testing.T) {
	t.Parallel()
	const token = "tok-7f3a9c"
	ns := steadyV1(t)
	srv := newAuthServer(t, token)
	ctx := context.Background()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "checks-ca", Namespace: ns}, Data: map[string][]byte{"ca.crt": srv.ca.CertPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "manager-client", Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: srv.client.CertPEM, corev1.TLSPrivateKeyKey: srv.client.KeyPEM}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	check := httpCheck("smoke", srv.URL+"/smoke/{{shard}}", 2)
	check.ConsecutiveErrorLimit = ptr.To(int32(100))
	check.HTTP.Headers = []routingv1alpha1.HTTPHeader{{Name: "Authorization",
		ValueFrom: &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: "smoke-token", Key: "token"}}}}
	check.HTTP.TLS = &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "checks-ca", Key: "ca.crt"},
		ClientCertificateSecretName: "manager-client", ServerName: "smoke.checks.example"}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{check}
	})
	missing := fmt.Sprintf("header Authorization: Secret %s/smoke-token not found", ns)
	story.Eventually(t, 60*time.Second, "us-east's measurements name the missing Secret", func() error {
		for _, ss := range kit.Get(t, ns).Status.Shards {
			if ss.Name != "us-east" || len(ss.Checks) == 0 {
				continue
			}
			for _, m := range ss.Checks[0].Measurements {
				if m.Phase == routingv1alpha1.MeasurementError && m.Message == missing {
					return nil
				}
			}
			return fmt.Errorf("us-east check %+v", ss.Checks[0])
		}
		return fmt.Errorf("no check status in us-east yet")
	})
	if got := kit.Serving(t, ns); !strings.Contains(got, "eu-west=app:v1:3/3") || strings.Contains(got, "eu-west=app:v2") {
		t.Fatalf("eu-west moved while us-east's check could not measure: %s", got)
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "smoke-token", Namespace: ns},
		Data: map[string][]byte{"token": []byte("Bearer " + token + "\n")}}); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 90*time.Second)
	rsvc := kit.Get(t, ns)
	for _, shard := range []string{"us-east", "eu-west", "ap-south"} {
		n := 0
		for _, a := range srv.answered() {
			if a == "schemagate-manager /smoke/"+shard {
				n++
			}
		}
		if n < 2 {
			t.Errorf("%s: %d authenticated measurements answered, want 2: %v", shard, n, srv.answered())
		}
	}
	for _, ss := range rsvc.Status.Shards {
		for _, c := range ss.Checks {
			for _, m := range c.Measurements {
				if strings.Contains(m.Message, token) {
					t.Fatalf("status shows the token: %+v", m)
				}
			}
		}
	}
}

// Bad input in the credentials of a check is rejected by the API server, naming the field.
func TestCheckCredentialsBadInputIsRejected(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	ref := &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: "tok", Key: "token"}}
	prom := func(h ...routingv1alpha1.HTTPHeader) *routingv1alpha1.PrometheusCheck {
		return &routingv1alpha1.PrometheusCheck{Address: "https://127.0.0.1:9090", Query: "up", SuccessCondition: "result > 0.0", Headers: h}
	}
	cases := map[string]struct {
		check routingv1alpha1.ShardCheck
		want  string
	}{
		"value and valueFrom": {routingv1alpha1.ShardCheck{Name: "both", HTTP: &routingv1alpha1.HTTPCheck{URL: "https://127.0.0.1/x",
			Headers: []routingv1alpha1.HTTPHeader{{Name: "Authorization", Value: "Bearer x", ValueFrom: ref}}}}, "a header has value or valueFrom, not both"},
		"Host to Prometheus": {routingv1alpha1.ShardCheck{Name: "host", Prometheus: prom(routingv1alpha1.HTTPHeader{Name: "HOST", Value: "x"})},
			"prometheus.headers may not set Host"},
		"a Secret name that is not a name": {routingv1alpha1.ShardCheck{Name: "name", Prometheus: prom(routingv1alpha1.HTTPHeader{Name: "Authorization",
			ValueFrom: &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: "../etc", Key: "token"}}})},
			"secretKeyRef.name"},
		"a key that is not a key": {routingv1alpha1.ShardCheck{Name: "key", HTTP: &routingv1alpha1.HTTPCheck{URL: "https://127.0.0.1/x",
			TLS: &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "ca", Key: "a/b"}}}}, "tls.ca.key"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := story.Fixture(ns)
			r.Name = "bad-" + strings.ReplaceAll(strings.ToLower(name), " ", "-")
			r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{c.check}
			err := k8s.Create(context.Background(), r)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create = %v, want Invalid naming %q", err, c.want)
			}
		})
	}
}
