package prometheus

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/certs"
)

// The prometheus provider (pkg/measure) against a real Prometheus server: each shape of answer
// and each bad query of issue 11 gives the phase and the reason a check reports.
func TestMeasureAgainstRealPrometheus(t *testing.T) {
	ctx := context.Background()
	s := startServer(ctx, t, Options{})
	var tk measure.Taker
	take := func(address, query string) rollout.TakenMeasurement {
		return tk.Take(ctx, rollout.MeasurementRequest{Vars: map[string]string{"shard": "us-east"}, Check: routingv1alpha1.ShardCheck{Name: "ratio",
			Prometheus:  &routingv1alpha1.PrometheusCheck{Address: address, Query: query, SuccessCondition: "result < 0.01"},
			Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(2))}}}, nil)
	}
	cases := []struct {
		name, query string
		phase       routingv1alpha1.MeasurementPhase
		value, msg  string
		fatal       bool
	}{
		{"passes", `vector(0.001)`, routingv1alpha1.MeasurementSuccessful, "0.001", "", false},
		{"fails", `vector(0.25)`, routingv1alpha1.MeasurementFailed, "0.25", "successCondition result < 0.01 is false", false},
		{"placeholder", `label_replace(vector(0.5), "shard", "us-east", "", "") and on(shard) label_replace(vector(1), "shard", "{{shard}}", "", "")`, routingv1alpha1.MeasurementFailed, "0.5", "", false},
		{"scalar", `scalar(vector(0))`, routingv1alpha1.MeasurementSuccessful, "0", "", false},
		{"no data", `sum(rate(edge_router_requests_total{shard="nowhere"}[10s]))`, routingv1alpha1.MeasurementInconclusive, "", "no data: the query returned an empty vector", false},
		{"NaN", `vector(0) / vector(0)`, routingv1alpha1.MeasurementInconclusive, "NaN", "0/0", false},
		{"many series", `label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2), "a", "y", "", "")`, routingv1alpha1.MeasurementError, "", "the query returned 2 series", false},
		{"range vector", `up[1m]`, routingv1alpha1.MeasurementError, "", "range vector", false},
		{"does not parse", `sum(rate(x[1m])`, routingv1alpha1.MeasurementError, "", "rejects the query", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := take(s.URL(), c.query)
			if got.Result.Phase != c.phase || got.Result.Value != c.value || got.Fatal != c.fatal || !strings.Contains(got.Result.Message, c.msg) {
				t.Fatalf("%s: got %+v fatal=%v", c.query, got.Result, got.Fatal)
			}
			t.Logf("%s → %s %s %s", c.query, got.Result.Phase, got.Result.Value, got.Result.Message)
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		addr := s.URL()
		s.Stop()
		got := take(addr, `vector(0)`)
		if got.Result.Phase != routingv1alpha1.MeasurementError || got.Fatal || !strings.Contains(got.Result.Message, "refused") {
			t.Fatalf("got %+v", got.Result)
		}
		t.Logf("stopped server → %s %s", got.Result.Phase, got.Result.Message)
	})
}

// Item 5 of issue 23 against a real Prometheus protected as in production (--web.config.file):
// HTTPS with a certificate of its own CA, client certificates required, basic auth. The check's
// Authorization header, CA and client certificate come from Secrets (a map here; the controller
// reads them from the API server); each missing part is an Error that says what the server
// refused.
func TestMeasureAgainstPrometheusWithTLSAndBasicAuth(t *testing.T) {
	ctx := context.Background()
	m, err := certs.NewMutual("prometheus-ca", "127.0.0.1", "schemagate")
	if err != nil {
		t.Fatal(err)
	}
	ca, srvPair, client := m.CA, m.Server, m.Client
	const password = "pw-3c1d9e"
	s := startServer(ctx, t, Options{Web: &WebSecurity{CertPEM: srvPair.CertPEM, KeyPEM: srvPair.KeyPEM, CAPEM: ca.CertPEM,
		ClientCAPEM: ca.CertPEM, ClientCertPEM: client.CertPEM, ClientKeyPEM: client.KeyPEM, Users: map[string]string{"schemagate": password}}})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	basic := func(user, pw string) []byte {
		return []byte("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw)) + "\n")
	}
	secrets := map[string]map[string][]byte{
		"prom-auth":   {"authorization": basic("schemagate", password), "wrong": basic("schemagate", "nope")},
		"prom-ca":     {"ca.crt": ca.CertPEM},
		"prom-client": {"tls.crt": client.CertPEM, "tls.key": client.KeyPEM},
	}
	read := func(_ context.Context, name string) (map[string][]byte, error) {
		if d, ok := secrets[name]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("Secret test/%s not found", name)
	}
	auth := func(key string) []routingv1alpha1.HTTPHeader {
		return []routingv1alpha1.HTTPHeader{{Name: "Authorization",
			ValueFrom: &routingv1alpha1.HeaderValueSource{SecretKeyRef: routingv1alpha1.SecretKeySelector{Name: "prom-auth", Key: key}}}}
	}
	full := func() *routingv1alpha1.CheckTLS {
		return &routingv1alpha1.CheckTLS{CA: &routingv1alpha1.SecretKeySelector{Name: "prom-ca", Key: "ca.crt"}, ClientCertificateSecretName: "prom-client"}
	}
	var tk measure.Taker
	cases := []struct {
		name    string
		headers []routingv1alpha1.HTTPHeader
		tls     *routingv1alpha1.CheckTLS
		phase   routingv1alpha1.MeasurementPhase
		msg     string
	}{
		{"password, CA and client certificate", auth("authorization"), full(), routingv1alpha1.MeasurementSuccessful, ""},
		{"no password", nil, full(), routingv1alpha1.MeasurementError, "401"},
		{"a wrong password", auth("wrong"), full(), routingv1alpha1.MeasurementError, "401"},
		{"no client certificate", auth("authorization"), &routingv1alpha1.CheckTLS{CA: full().CA}, routingv1alpha1.MeasurementError, ""},
		{"the system's roots", auth("authorization"), &routingv1alpha1.CheckTLS{ClientCertificateSecretName: "prom-client"}, routingv1alpha1.MeasurementError, "unknown authority"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tk.Take(ctx, rollout.MeasurementRequest{Vars: map[string]string{"shard": "us-east"}, Check: routingv1alpha1.ShardCheck{Name: "ratio",
				Prometheus:  &routingv1alpha1.PrometheusCheck{Address: s.URL(), Query: `vector(0.001)`, SuccessCondition: "result < 0.01", Headers: c.headers, TLS: c.tls},
				Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(5))}}}, read)
			if got.Result.Phase != c.phase || got.Fatal || !strings.Contains(got.Result.Message, c.msg) {
				t.Fatalf("got %+v fatal=%v, want %s with %q", got.Result, got.Fatal, c.phase, c.msg)
			}
			if strings.Contains(got.Result.Message, password) {
				t.Fatalf("the message shows the password: %s", got.Result.Message)
			}
			t.Logf("%s → %s %s %s", c.name, got.Result.Phase, got.Result.Value, got.Result.Message)
		})
	}
}
