package measure

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/certs"
)

const token = "s3cret-token-value"

// mtlsServer is an https server on loopback whose certificate, from a CA of its own, names only
// router.example; it asks for a client certificate from that CA and answers 200 only to
// `Authorization: Bearer <token>`, 401 otherwise. /api/v1/query answers as Prometheus does.
func mtlsServer(t *testing.T) (*httptest.Server, *certs.CA, certs.Pair) {
	t.Helper()
	m, err := certs.NewMutual("checks-ca", "router.example", "schemagate")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := m.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/api/v1/query" {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.001"]}]}}`)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.TLS = serverTLS
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, m.CA, m.Client
}

// secretsOf reads from a map of Secrets, as the controller's reader does from the API server,
// and counts the reads.
func secretsOf(data map[string]map[string][]byte, reads *int) Secrets {
	return func(_ context.Context, name string) (map[string][]byte, error) {
		*reads++
		d, ok := data[name]
		if !ok {
			return nil, fmt.Errorf("Secret ns/%s not found", name)
		}
		return d, nil
	}
}

// slow gives a request 10 s instead of 1: a TLS handshake under -race on a loaded machine can take
// longer than a second, and these tests are about what the server refuses, not about time.
func slow(r rollout.MeasurementRequest) rollout.MeasurementRequest {
	r.Check.Measurement.TimeoutSeconds = ptr.To(int32(10))
	return r
}

func authHeader(secret, key string) routingv1alpha1.HTTPHeader {
	return routingv1alpha1.HTTPHeader{Name: "Authorization",
		ValueFrom: &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: secret, Key: key}}}
}

// An http check authenticates with a bearer token and a client certificate from Secrets and
// verifies the server with a CA from a Secret; each missing or wrong part is an Error (or, for a
// wrong token, the server's 401 a Failed) whose message names the Secret and key and never holds
// a value.
func TestHTTPCheckWithSecretsAndTLS(t *testing.T) {
	srv, ca, client := mtlsServer(t)
	data := map[string]map[string][]byte{
		"router-token": {"token": []byte("Bearer " + token + "\n")},
		"wrong-token":  {"token": []byte("Bearer nope")},
		"ctl-token":    {"token": []byte("Bearer a\x00b")},
		"checks-ca":    {"ca.crt": ca.CertPEM, "junk": []byte("not PEM")},
		"client-tls":   {"tls.crt": client.CertPEM, "tls.key": client.KeyPEM},
		"half-tls":     {"tls.crt": client.CertPEM},
	}
	goodTLS := &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "checks-ca", Key: "ca.crt"},
		ClientCertificateSecretName: "client-tls", ServerName: "router.example"}
	with := func(f func(c *routingv1alpha1.HTTPCheck)) routingv1alpha1.HTTPCheck {
		c := routingv1alpha1.HTTPCheck{URL: srv.URL + "/ready", Headers: []routingv1alpha1.HTTPHeader{authHeader("router-token", "token")}, TLS: goodTLS.DeepCopy()}
		if f != nil {
			f(&c)
		}
		return c
	}
	cases := []struct {
		name  string
		check routingv1alpha1.HTTPCheck
		phase routingv1alpha1.MeasurementPhase
		msg   string
	}{
		{"token, CA, client certificate and server name", with(nil), routingv1alpha1.MeasurementSuccessful, ""},
		{"wrong token", with(func(c *routingv1alpha1.HTTPCheck) {
			c.Headers = []routingv1alpha1.HTTPHeader{authHeader("wrong-token", "token")}
		}),
			routingv1alpha1.MeasurementFailed, "status 401"},
		{"no such Secret", with(func(c *routingv1alpha1.HTTPCheck) {
			c.Headers = []routingv1alpha1.HTTPHeader{authHeader("gone", "token")}
		}),
			routingv1alpha1.MeasurementError, "header Authorization: Secret ns/gone not found"},
		{"no such key", with(func(c *routingv1alpha1.HTTPCheck) {
			c.Headers = []routingv1alpha1.HTTPHeader{authHeader("router-token", "tok")}
		}),
			routingv1alpha1.MeasurementError, "header Authorization: Secret router-token has no key tok"},
		{"a control character", with(func(c *routingv1alpha1.HTTPCheck) {
			c.Headers = []routingv1alpha1.HTTPHeader{authHeader("ctl-token", "token")}
		}),
			routingv1alpha1.MeasurementError, "Secret ctl-token key token: the value holds a control character at byte 8"},
		{"the system's roots", with(func(c *routingv1alpha1.HTTPCheck) { c.TLS.CA = nil }),
			routingv1alpha1.MeasurementError, "certificate signed by unknown authority"},
		{"a CA key that is not PEM", with(func(c *routingv1alpha1.HTTPCheck) { c.TLS.CA.Key = "junk" }),
			routingv1alpha1.MeasurementError, "tls.ca: Secret checks-ca key junk holds no PEM certificate"},
		{"no client certificate", with(func(c *routingv1alpha1.HTTPCheck) { c.TLS.ClientCertificateSecretName = "" }),
			routingv1alpha1.MeasurementError, "GET"},
		{"a client Secret without tls.key", with(func(c *routingv1alpha1.HTTPCheck) { c.TLS.ClientCertificateSecretName = "half-tls" }),
			routingv1alpha1.MeasurementError, "tls.clientCertificateSecretName: Secret half-tls has no key tls.key"},
		{"the URL's host is not the certificate's name", with(func(c *routingv1alpha1.HTTPCheck) { c.TLS.ServerName = "" }),
			routingv1alpha1.MeasurementError, "cannot validate certificate for 127.0.0.1"},
	}
	var tk Taker
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reads := 0
			got := tk.Take(context.Background(), slow(httpReq(c.check)), secretsOf(data, &reads))
			if got.Result.Phase != c.phase || !strings.Contains(got.Result.Message, c.msg) || got.Fatal {
				t.Fatalf("got %s %q (fatal %v), want %s with %q", got.Result.Phase, got.Result.Message, got.Fatal, c.phase, c.msg)
			}
			if strings.Contains(got.Result.Message, token) || strings.Contains(got.Result.Message, "PRIVATE KEY") {
				t.Fatalf("the message shows a Secret's value: %q", got.Result.Message)
			}
			if reads > 3 {
				t.Errorf("%d Secret reads for one measurement; each Secret is read once", reads)
			}
		})
	}
	// One transport per TLS material: the measurements above with the good CA, client
	// certificate and server name share one.
	for range 3 {
		reads := 0
		if got := tk.Take(context.Background(), slow(httpReq(with(nil))), secretsOf(data, &reads)); got.Result.Phase != routingv1alpha1.MeasurementSuccessful {
			t.Fatalf("%+v", got.Result)
		}
	}
	if n := len(tk.tlsClients); n > 5 {
		t.Errorf("%d TLS transports kept; want one per distinct TLS material (at most 5 here)", n)
	}
}

// A Prometheus check sends its headers (a token from a Secret, a tenant given inline with a
// placeholder) with each query and uses its tls; without the token the query is an Error.
func TestPrometheusCheckWithSecretsAndTLS(t *testing.T) {
	srv, ca, client := mtlsServer(t)
	data := map[string]map[string][]byte{
		"prom-token": {"token": []byte("Bearer " + token)},
		"prom-ca":    {"ca.crt": ca.CertPEM},
		"prom-tls":   {"tls.crt": client.CertPEM, "tls.key": client.KeyPEM},
	}
	req := func(headers ...routingv1alpha1.HTTPHeader) rollout.MeasurementRequest {
		r := slow(promReq(srv.URL, "sum(x)", "result < 0.01", ""))
		r.Check.Prometheus.Headers = headers
		r.Check.Prometheus.TLS = &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "prom-ca", Key: "ca.crt"},
			ClientCertificateSecretName: "prom-tls", ServerName: "router.example"}
		return r
	}
	var tk Taker
	reads := 0
	got := tk.Take(context.Background(), req(authHeader("prom-token", "token"), routingv1alpha1.HTTPHeader{Name: "X-Scope-OrgID", Value: "{{namespace}}"}), secretsOf(data, &reads))
	if got.Result.Phase != routingv1alpha1.MeasurementSuccessful || got.Result.Value != "0.001" {
		t.Fatalf("with the token: %+v", got.Result)
	}
	got = tk.Take(context.Background(), req(), secretsOf(data, &reads))
	if got.Result.Phase != routingv1alpha1.MeasurementError || got.Fatal {
		t.Fatalf("without the token: %+v (fatal %v)", got.Result, got.Fatal)
	}
	// No Secret reader at all (a manager that reads none): an Error naming the Secret.
	got = tk.Take(context.Background(), req(authHeader("prom-token", "token")), nil)
	if got.Result.Phase != routingv1alpha1.MeasurementError || !strings.Contains(got.Result.Message, "Secret prom-token") {
		t.Fatalf("no reader: %+v", got.Result)
	}
}

// headerValue takes what `kubectl create secret --from-file` stores and refuses what no header
// may hold.
func TestHeaderValueFromSecretBytes(t *testing.T) {
	for in, want := range map[string]string{"abc": "abc", "abc\n": "abc", "abc\r\n": "abc", "a\tb": "a\tb", "": ""} {
		if got, err := headerValue([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a\nb", "a\n\n", "a\x7fb", "\x00", strings.Repeat("x", maxSecretValue+1)} {
		if got, err := headerValue([]byte(in)); err == nil {
			t.Errorf("%q: %q accepted", in, got)
		}
	}
}

// Secrets are untrusted input: whatever bytes a header value, a CA bundle or a client key pair
// hold, resolve returns an error or credentials and never panics; an accepted header value holds
// no control character, and an error never quotes the value.
func FuzzResolveSecrets(f *testing.F) {
	ca, err := certs.NewCA("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	pair, err := ca.Client("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("Bearer abc\n"), ca.CertPEM, pair.CertPEM, pair.KeyPEM)
	f.Add([]byte("a\x00b"), []byte("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n"), pair.KeyPEM, pair.CertPEM)
	f.Add([]byte{}, []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, value, caPEM, crt, key []byte) {
		data := map[string]map[string][]byte{"s": {"v": value, "ca": caPEM, "tls.crt": crt, "tls.key": key}}
		reads := 0
		hs := []routingv1alpha1.HTTPHeader{{Name: "X-Token", ValueFrom: &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: "s", Key: "v"}}}}
		spec := &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "s", Key: "ca"}, ClientCertificateSecretName: "s"}
		c, err := resolve(context.Background(), secretsOf(data, &reads), hs, spec, vars)
		if err != nil {
			if len(value) >= 12 && strings.Contains(err.Error(), string(value)) {
				t.Fatalf("the error quotes the value: %v", err)
			}
			return
		}
		if reads != 1 {
			t.Fatalf("%d reads of one Secret", reads)
		}
		for _, h := range c.headers {
			if _, err := headerValue([]byte(h.value)); err != nil {
				t.Fatalf("accepted %q: %v", h.value, err)
			}
		}
		if c.tls == nil || c.tls.RootCAs == nil || len(c.tls.Certificates) != 1 {
			t.Fatalf("accepted without a CA pool or a client certificate: %+v", c.tls)
		}
	})
}
