package traffic

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// Two regions, each with a real HTTP server on loopback: us-east answers 200 for a.example and 404
// otherwise; eu-west is down for the first half of the run. The report counts what came back.
func TestGeneratorCountsWhatAnswered(t *testing.T) {
	east := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Revision", "v1")
		if r.Host != "a.example" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer east.Close()
	var up atomic.Bool
	west := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Revision", "v2")
	}))
	defer west.Close()
	backends := func(_ context.Context, region string) ([]string, error) {
		if region == "us-east" {
			return []string{strings.TrimPrefix(east.URL, "http://")}, nil
		}
		return []string{strings.TrimPrefix(west.URL, "http://")}, nil
	}
	g := Start(context.Background(), Options{Regions: []string{"us-east", "eu-west"}, Rate: 40, Domains: []string{"a.example", "b.example"}, Backends: backends})
	time.Sleep(time.Second)
	up.Store(true)
	time.Sleep(time.Second)
	rep := g.Stop()
	e, w := rep.Totals["us-east"], rep.Totals["eu-west"]
	if e.Requests < 60 || e.OK == 0 || e.NotFound == 0 || e.OK+e.NotFound != e.Requests || e.Revisions["v1"] != e.Requests {
		t.Fatalf("us-east totals %+v", e)
	}
	if e.NotFoundBy["v1"] != e.NotFound || len(w.NotFoundBy) != 0 {
		t.Fatalf("404s by revision: us-east %v (of %d), eu-west %v", e.NotFoundBy, e.NotFound, w.NotFoundBy)
	}
	if w.ServerErr == 0 || w.OK == 0 || w.MaxGap < 900*time.Millisecond || w.Revisions["v2"] != w.OK {
		t.Fatalf("eu-west totals %+v", w)
	}
	var buf bytes.Buffer
	rep.Table(&buf, "test")
	if !strings.Contains(buf.String(), "| test | eu-west |") || !strings.Contains(buf.String(), fmt.Sprintf("v1×%d (404×%d)", e.Requests, e.NotFound)) {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func TestNeverSendsOutsideLoopback(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "[::1]:80", "example.com:80", "192.168.1.1:8080"} {
		if loopbackOnly(addr) == nil {
			t.Errorf("%s accepted", addr)
		}
	}
	if err := loopbackOnly("127.0.3.4:8080"); err != nil {
		t.Fatal(err)
	}
	g := Start(context.Background(), Options{Regions: []string{"x"}, Rate: 20, Backends: func(context.Context, string) ([]string, error) {
		return []string{"10.0.0.1:80"}, nil
	}})
	time.Sleep(300 * time.Millisecond)
	if rep := g.Stop(); rep.Totals["x"].ConnErr == 0 || rep.Totals["x"].OK != 0 {
		t.Fatalf("a non-loopback backend must count as a connection error, never be sent to: %+v", rep.Totals["x"])
	}
}

func TestReadyAddresses(t *testing.T) {
	s := discoveryv1.EndpointSlice{
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"127.0.1.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"127.0.1.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	if got := ReadyAddresses([]discoveryv1.EndpointSlice{s}); len(got) != 1 || got[0] != "127.0.1.2:8080" {
		t.Fatalf("ReadyAddresses = %v", got)
	}
}

// While the API server cannot be reached the last known backends are kept; before any answer the
// error is returned.
func TestCachedKeepsTheLastAnswerOnErrors(t *testing.T) {
	var fail atomic.Bool
	calls := 0
	b := cached(time.Nanosecond, func(context.Context, string) ([]string, error) {
		calls++
		if fail.Load() {
			return nil, context.DeadlineExceeded
		}
		return []string{"127.0.0.9:8080"}, nil
	})
	fail.Store(true)
	if _, err := b(context.Background(), "r"); err == nil {
		t.Fatal("no answer yet, yet no error")
	}
	fail.Store(false)
	if got, _ := b(context.Background(), "r"); len(got) != 1 {
		t.Fatalf("got %v", got)
	}
	fail.Store(true)
	if got, err := b(context.Background(), "r"); err != nil || len(got) != 1 {
		t.Fatalf("the last answer was not kept: %v %v", got, err)
	}
	if calls != 3 {
		t.Fatalf("%d lookups, want 3", calls)
	}
}

// Latency is the nearest-rank quantile of the answered requests: a slow backend shows in p99,
// not p50, and the latency table prints both.
func TestLatencyQuantiles(t *testing.T) {
	var tot Totals
	for i := 1; i <= 100; i++ {
		tot.Latencies = append(tot.Latencies, time.Duration(101-i)*time.Millisecond)
	}
	if p50, p99, p100 := tot.Latency(0.5), tot.Latency(0.99), tot.Latency(1); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond || p100 != 100*time.Millisecond {
		t.Fatalf("p50 %s, p99 %s, p100 %s; want 50ms, 99ms, 100ms", p50, p99, p100)
	}
	if (Totals{}).Latency(0.5) != 0 {
		t.Fatal("no answers: want 0")
	}
	var slow atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Add(1)%10 == 0 {
			time.Sleep(150 * time.Millisecond)
		}
	}))
	defer srv.Close()
	g := Start(context.Background(), Options{Regions: []string{"us-east"}, Rate: 50,
		Backends: func(context.Context, string) ([]string, error) {
			return []string{strings.TrimPrefix(srv.URL, "http://")}, nil
		}})
	time.Sleep(time.Second)
	rep := g.Stop()
	e := rep.Totals["us-east"]
	if len(e.Latencies) != e.Requests || e.Latency(0.5) > 100*time.Millisecond || e.Latency(0.99) < 150*time.Millisecond {
		t.Fatalf("%d latencies for %d requests, p50 %s, p99 %s", len(e.Latencies), e.Requests, e.Latency(0.5), e.Latency(0.99))
	}
	var buf bytes.Buffer
	rep.LatencyTable(&buf, "slow")
	if !strings.Contains(buf.String(), "| slow | us-east |") || !strings.Contains(buf.String(), "p99 ms") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

// The per-second table has a row for every second of the window, a region's counts in it, and
// "-" for a second in which nothing of that region was recorded.
func TestSecondsTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rep := Report{Regions: []string{"us-east", "eu-west"}, Seconds: []Second{
		{At: t0, Region: "us-east", OK: 20},
		{At: t0, Region: "eu-west", OK: 18, NotFound: 1, ConnErr: 1},
		{At: t0.Add(2 * time.Second), Region: "us-east", OK: 19, ServerErr: 1},
	}}
	var b bytes.Buffer
	rep.SecondsTable(&b, t0.Add(300*time.Millisecond), t0.Add(2500*time.Millisecond))
	want := "| second | us-east 200/404/err | eu-west 200/404/err |\n|---|---|---|\n" +
		"| +0s | 20/0/0 | 18/1/1 |\n| +1s | - | - |\n| +2s | 19/0/1 | - |\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
