package measure

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

var vars = map[string]string{"shard": "us-east", "revision": "abc123", "namespace": "default", "name": "edge-router", "schemaVersion": "2"}

func httpReq(c routingv1alpha1.HTTPCheck) rollout.MeasurementRequest {
	return rollout.MeasurementRequest{Check: routingv1alpha1.ShardCheck{Name: "smoke", HTTP: &c,
		Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(1))}}, Vars: vars}
}

func promReq(address, query, success, failure string) rollout.MeasurementRequest {
	return rollout.MeasurementRequest{Check: routingv1alpha1.ShardCheck{Name: "ratio",
		Prometheus:  &routingv1alpha1.PrometheusCheck{Address: address, Query: query, SuccessCondition: success, FailureCondition: failure},
		Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(1))}}, Vars: vars}
}

// The http provider against a real server on loopback: placeholders, the Host header, status
// codes, the JSON condition; a server that hangs is an Error within timeoutSeconds; a refused
// connection is an Error; a URL that does not parse is Fatal.
func TestHTTP(t *testing.T) {
	var mu sync.Mutex // the server's handler goroutines write seen, the test reads it
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.String())
		mu.Unlock()
		switch r.URL.Path {
		case "/hang":
			<-r.Context().Done()
		case "/json":
			fmt.Fprint(w, `{"status":"ok","checks":[{"ok":true}],"n":3}`)
		case "/text":
			fmt.Fprint(w, "ok")
		case "/404":
			http.NotFound(w, r)
		default:
			fmt.Fprint(w, "routed")
		}
	}))
	defer srv.Close()
	var tk Taker
	cases := []struct {
		name  string
		check routingv1alpha1.HTTPCheck
		phase routingv1alpha1.MeasurementPhase
		value string
		msg   string
		fatal bool
	}{
		{"ok", routingv1alpha1.HTTPCheck{URL: srv.URL + "/r/{{shard}}/{{revision}}", Headers: []routingv1alpha1.HTTPHeader{{Name: "Host", Value: "d03.example"}}}, routingv1alpha1.MeasurementSuccessful, "200", "", false},
		{"404", routingv1alpha1.HTTPCheck{URL: srv.URL + "/404"}, routingv1alpha1.MeasurementFailed, "404", "status 404, expected one of [200]", false},
		{"404 expected", routingv1alpha1.HTTPCheck{URL: srv.URL + "/404", ExpectedStatus: []int32{404}}, routingv1alpha1.MeasurementSuccessful, "404", "", false},
		{"json ok", routingv1alpha1.HTTPCheck{URL: srv.URL + "/json", JSON: &routingv1alpha1.JSONCondition{Path: "{.checks[0].ok}", Equals: "true"}}, routingv1alpha1.MeasurementSuccessful, "200", "", false},
		{"json number", routingv1alpha1.HTTPCheck{URL: srv.URL + "/json", JSON: &routingv1alpha1.JSONCondition{Path: "{.n}", Equals: "3"}}, routingv1alpha1.MeasurementSuccessful, "200", "", false},
		{"json differs", routingv1alpha1.HTTPCheck{URL: srv.URL + "/json", JSON: &routingv1alpha1.JSONCondition{Path: "{.status}", Equals: "degraded"}}, routingv1alpha1.MeasurementFailed, "200", `json.path {.status} is "ok", expected "degraded"`, false},
		{"json missing", routingv1alpha1.HTTPCheck{URL: srv.URL + "/json", JSON: &routingv1alpha1.JSONCondition{Path: "{.nope}", Equals: "x"}}, routingv1alpha1.MeasurementFailed, "200", "nope is not found", false},
		{"not json", routingv1alpha1.HTTPCheck{URL: srv.URL + "/text", JSON: &routingv1alpha1.JSONCondition{Path: "{.status}", Equals: "ok"}}, routingv1alpha1.MeasurementFailed, "200", "the body is not JSON", false},
		{"bad json path", routingv1alpha1.HTTPCheck{URL: srv.URL + "/json", JSON: &routingv1alpha1.JSONCondition{Path: "{.status", Equals: "ok"}}, routingv1alpha1.MeasurementError, "", "does not parse", true},
		{"hangs", routingv1alpha1.HTTPCheck{URL: srv.URL + "/hang"}, routingv1alpha1.MeasurementError, "", "no answer within timeoutSeconds", false},
		{"refused", routingv1alpha1.HTTPCheck{URL: "http://" + closedAddr(t) + "/"}, routingv1alpha1.MeasurementError, "", "refused", false},
		{"bad url", routingv1alpha1.HTTPCheck{URL: "http://[::1/x"}, routingv1alpha1.MeasurementError, "", "is not an http or https URL", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			got := tk.Take(context.Background(), httpReq(c.check), nil)
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("took %s with timeoutSeconds 1", d)
			}
			if got.Result.Phase != c.phase || got.Result.Value != c.value || got.Fatal != c.fatal || !strings.Contains(got.Result.Message, c.msg) {
				t.Fatalf("got %+v fatal=%v", got.Result, got.Fatal)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != "d03.example/r/us-east/abc123" {
		t.Fatalf("first request %q", seen[0])
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// promAPI answers /api/v1/query with body, as Prometheus' HTTP API does, for the shapes a real
// server returns that are awkward to produce on demand (a matrix, a string). The real-server
// test is in test/prometheus and test/e2e.
func promAPI(t *testing.T, status int, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang/api/v1/query" {
			_, _ = io.Copy(io.Discard, r.Body) // the client POSTs; the server notices it leave only once the body is read
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func vector(values ...string) string {
	var samples []string
	for i, v := range values {
		samples = append(samples, fmt.Sprintf(`{"metric":{"shard":"s%d"},"value":[1700000000,"%s"]}`, i, v))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

// The prometheus provider's reading of each result shape, and its conditions.
func TestPrometheusResults(t *testing.T) {
	var tk Taker
	cases := []struct {
		name, body, success, failure string
		status                       int
		phase                        routingv1alpha1.MeasurementPhase
		value, msg                   string
		fatal                        bool
	}{
		{"pass", vector("0.001"), "result < 0.01", "", 200, routingv1alpha1.MeasurementSuccessful, "0.001", "", false},
		{"fail", vector("0.3"), "result < 0.01", "", 200, routingv1alpha1.MeasurementFailed, "0.3", "successCondition result < 0.01 is false", false},
		{"inconclusive between", vector("0.05"), "result < 0.01", "result > 0.1", 200, routingv1alpha1.MeasurementInconclusive, "0.05", "neither", false},
		{"failure condition", vector("0.5"), "result < 0.01", "result > 0.1", 200, routingv1alpha1.MeasurementFailed, "0.5", "failureCondition", false},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"2"]}}`, "result == 2.0", "", 200, routingv1alpha1.MeasurementSuccessful, "2", "", false},
		{"empty", vector(), "result < 0.01", "", 200, routingv1alpha1.MeasurementInconclusive, "", "no data", false},
		{"NaN", vector("NaN"), "result < 0.01", "", 200, routingv1alpha1.MeasurementInconclusive, "NaN", "0/0", false},
		{"+Inf", vector("+Inf"), "result < 0.01", "", 200, routingv1alpha1.MeasurementFailed, "+Inf", "", false},
		{"many series", vector("0", "0.5", "1"), "result < 0.01", "", 200, routingv1alpha1.MeasurementError, "", "3 series", false},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"]]}]}}`, "result < 0.01", "", 200, routingv1alpha1.MeasurementError, "", "range vector", false},
		{"bad_data", `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected <EOF>"}`, "result < 0.01", "", 400, routingv1alpha1.MeasurementError, "", "rejects the query: 1:5: parse error", true},
		{"server error", `{"status":"error","errorType":"internal","error":"boom"}`, "result < 0.01", "", 500, routingv1alpha1.MeasurementError, "", "server error: 500", false},
		{"not json", `<html>`, "result < 0.01", "", 200, routingv1alpha1.MeasurementError, "", "Prometheus at", false},
		{"condition does not compile", vector("0"), "result <", "", 200, routingv1alpha1.MeasurementError, "", "successCondition", true},
		{"condition not bool", vector("0"), "result + 1.0", "", 200, routingv1alpha1.MeasurementError, "", "not bool", true},
		{"condition on int", vector("0"), "result < 1", "", 200, routingv1alpha1.MeasurementError, "", "successCondition", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tk.Take(context.Background(), promReq(promAPI(t, c.status, c.body), "sum(x)", c.success, c.failure), nil)
			if got.Result.Phase != c.phase || got.Result.Value != c.value || got.Fatal != c.fatal || !strings.Contains(got.Result.Message, c.msg) {
				t.Fatalf("got %+v fatal=%v", got.Result, got.Fatal)
			}
		})
	}
	t.Run("hangs", func(t *testing.T) {
		start := time.Now()
		got := tk.Take(context.Background(), promReq(promAPI(t, 200, "")+"/hang", "sum(x)", "result < 1.0", ""), nil)
		if got.Result.Phase != routingv1alpha1.MeasurementError || !strings.Contains(got.Result.Message, "no answer within timeoutSeconds") || time.Since(start) > 3*time.Second {
			t.Fatalf("got %+v after %s", got.Result, time.Since(start))
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		got := tk.Take(context.Background(), promReq("http://"+closedAddr(t), "sum(x)", "result < 1.0", ""), nil)
		if got.Result.Phase != routingv1alpha1.MeasurementError || got.Fatal || !strings.Contains(got.Result.Message, "refused") {
			t.Fatalf("got %+v", got.Result)
		}
	})
}

// FuzzPrometheusAnswer: whatever a Prometheus address answers, a measurement is one of the four
// phases, with a bounded message, and never panics.
func FuzzPrometheusAnswer(f *testing.F) {
	f.Add(200, vector("0.5"))
	f.Add(200, vector("NaN", "1"))
	f.Add(400, `{"status":"error","errorType":"bad_data","error":"x"}`)
	f.Add(200, `{"status":"success","data":{"resultType":"scalar","result":[1,"x"]}}`)
	f.Add(200, `{"status":"success","data":{"resultType":"vector","result":[null]}}`)
	var tk Taker
	var (
		mu     sync.Mutex
		body   string
		status int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code, answer := status, body
		mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprint(w, answer)
	}))
	defer srv.Close()
	f.Fuzz(func(t *testing.T, code int, answer string) {
		if code < 200 || code > 599 {
			code = 200
		}
		mu.Lock()
		status, body = code, answer
		mu.Unlock()
		got := tk.Take(context.Background(), promReq(srv.URL, "sum(x)", "result < 0.01", "result > 0.5"), nil)
		switch got.Result.Phase {
		case routingv1alpha1.MeasurementSuccessful, routingv1alpha1.MeasurementFailed, routingv1alpha1.MeasurementInconclusive, routingv1alpha1.MeasurementError:
		default:
			t.Fatalf("phase %q", got.Result.Phase)
		}
	})
}

// FuzzJSONField: any body and any path either give one value or an error; never a panic.
func FuzzJSONField(f *testing.F) {
	f.Add(`{"a":{"b":[1,2]}}`, "{.a.b[0]}")
	f.Add(`[1,2,3]`, "{[*]}")
	f.Add(`{"a":null}`, "{.a}")
	f.Fuzz(func(t *testing.T, body, path string) {
		jp := newJSONPath()
		if err := jp.Parse(path); err != nil {
			return
		}
		_, _ = jsonField(jp, []byte(body))
	})
}

// Every placeholder the API documents is replaced, {{stableRevision}} among them (a comparison of
// the update revision with the stable one); an unknown one is left as written.
func TestExpandPlaceholders(t *testing.T) {
	vars := map[string]string{"shard": "us-east", "revision": "r2", "stableRevision": "r1", "namespace": "edge", "name": "rs-a", "schemaVersion": "2"}
	got := expand(`{{shard}} {{revision}} {{stableRevision}} {{namespace}} {{name}} {{schemaVersion}} {{other}}`, vars)
	if want := "us-east r2 r1 edge rs-a 2 {{other}}"; got != want {
		t.Fatalf("expand = %q, want %q", got, want)
	}
}
