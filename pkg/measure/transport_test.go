package measure

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Prometheus' answer is read to at most MaxBody bytes: a larger one (here a valid answer padded to
// 2 MiB) is an Error, never read whole into memory.
func TestPrometheusBodyIsBounded(t *testing.T) {
	pad := strings.Repeat(" ", 2<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"0.5"]}}`+pad)
	}))
	defer srv.Close()
	var tk Taker
	got := tk.Take(context.Background(), promReq(srv.URL, "x", "result < 1.0", ""), nil)
	if got.Result.Phase != routingv1alpha1.MeasurementError || !strings.Contains(got.Result.Message, "larger than") {
		t.Fatalf("a 2 MiB answer must be an Error naming the bound, got %s %q", got.Result.Phase, got.Result.Message)
	}
	small := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"0.5"]}}`)
	}))
	defer small.Close()
	if got := tk.Take(context.Background(), promReq(small.URL, "x", "result < 1.0", ""), nil); got.Result.Phase != routingv1alpha1.MeasurementSuccessful {
		t.Fatalf("a small answer: %+v", got.Result)
	}
}

// Measurements reuse connections: 20 http and 20 prometheus measurements of one Taker open one
// connection to each server, not one each (a transport per measurement left its idle connections
// and their goroutines behind for 90 s).
func TestMeasurementsShareOneTransport(t *testing.T) {
	count := func(n *atomic.Int32) func(net.Conn, http.ConnState) {
		return func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		}
	}
	var httpConns, promConns atomic.Int32
	h := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	h.Config.ConnState = count(&httpConns)
	h.Start()
	defer h.Close()
	p := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"0.5"]}}`)
	}))
	p.Config.ConnState = count(&promConns)
	p.Start()
	defer p.Close()
	var tk Taker
	for i := 0; i < 20; i++ {
		if got := tk.Take(context.Background(), httpReq(routingv1alpha1.HTTPCheck{URL: h.URL}), nil); got.Result.Phase != routingv1alpha1.MeasurementSuccessful {
			t.Fatalf("http: %+v", got.Result)
		}
		if got := tk.Take(context.Background(), promReq(p.URL, "x", "result < 1.0", ""), nil); got.Result.Phase != routingv1alpha1.MeasurementSuccessful {
			t.Fatalf("prometheus: %+v", got.Result)
		}
	}
	if h, p := httpConns.Load(), promConns.Load(); h != 1 || p != 1 {
		t.Fatalf("20 measurements each opened %d http and %d prometheus connections, want 1 and 1", h, p)
	}
}

// A redirect is followed on the check's own host and port only: one to another server is not
// followed (the 302 is judged, and fails a check that expects 200), and that server gets nothing.
func TestRedirectsStayOnTheChecksHost(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		fmt.Fprint(w, "ok")
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/metadata", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			fmt.Fprint(w, "ok")
		}
	}))
	defer srv.Close()
	var tk Taker
	if got := tk.Take(context.Background(), httpReq(routingv1alpha1.HTTPCheck{URL: srv.URL + "/here"}), nil); got.Result.Phase != routingv1alpha1.MeasurementSuccessful {
		t.Fatalf("a redirect on the same host is followed: %+v", got.Result)
	}
	got := tk.Take(context.Background(), httpReq(routingv1alpha1.HTTPCheck{URL: srv.URL + "/away"}), nil)
	if got.Result.Phase != routingv1alpha1.MeasurementFailed || got.Result.Value != "302" {
		t.Fatalf("a redirect to another host must not be followed: %+v", got.Result)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the other server got %d requests", n)
	}
}
