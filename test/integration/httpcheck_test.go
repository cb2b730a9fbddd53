package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// smokeServer is a real HTTP server on loopback standing in for each region's endpoint: it
// answers /smoke/<shard>/<revision> with the status failIn gives the shard (200 otherwise) and
// remembers every path asked.
type smokeServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newSmokeServer(t *testing.T, failIn map[string]int) *smokeServer {
	s := &smokeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.URL.Path)
		s.mu.Unlock()
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) == 3 && parts[0] == "hang" {
			<-r.Context().Done()
			return
		}
		if len(parts) == 3 && failIn[parts[1]] != 0 {
			w.WriteHeader(failIn[parts[1]])
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *smokeServer) asked(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.seen {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

func httpCheck(name, url string, count int32) routingv1alpha1.ShardCheck {
	return routingv1alpha1.ShardCheck{Name: name, HTTP: &routingv1alpha1.HTTPCheck{URL: url},
		Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(1)), Count: ptr.To(count), TimeoutSeconds: ptr.To(int32(1))}}
}

// Issue 11, the http provider, against a real server: the manager measures each shard during
// its bake with the shard and the update revision in the URL; us-east passes (2 of 2), eu-west
// answers 503 and fails at once (the bake is 300 s), both roll back to v1, ap-south is never
// asked and never runs v2; status keeps the measurements.
func TestStoryHTTPCheckFailsInEUWest(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	srv := newSmokeServer(t, map[string]int{"eu-west": http.StatusServiceUnavailable})
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{httpCheck("smoke", srv.URL+"/smoke/{{shard}}/{{revision}}", 2)}
	})
	story.Eventually(t, 60*time.Second, "Stalled ShardCheckFailed in eu-west", hasStall(t, ns, routingv1alpha1.ReasonShardCheckFailed, "check smoke failed in shard eu-west during its bake"))
	story.Eventually(t, 30*time.Second, "every shard back on v1", kit.ServingIs(t, ns, story.AllV1))
	rsvc := kit.Get(t, ns)
	capture(t, "shard-check-failed", rsvc)
	rev := rsvc.Status.Failure.Revision
	if got := srv.asked("/smoke/us-east/" + rev); len(got) != 2 {
		t.Fatalf("us-east asked %v, want 2 measurements of revision %s", got, rev)
	}
	if got := srv.asked("/smoke/ap-south/"); len(got) != 0 {
		t.Fatalf("ap-south was measured: %v", got)
	}
	for _, ss := range rsvc.Status.Shards {
		if ss.Name != "eu-west" {
			continue
		}
		c := ss.Checks[0]
		if c.Phase != routingv1alpha1.CheckPhaseFailed || c.Failed != 1 || len(c.Measurements) != 1 || c.Measurements[0].Value != "503" {
			t.Fatalf("eu-west check %+v", c)
		}
	}
	if !strings.Contains(rsvc.Status.Failure.Message, "last: Failed 503") {
		t.Fatalf("failure %+v does not name the last measurement", rsvc.Status.Failure)
	}
}

// An endpoint that hangs: each measurement ends within timeoutSeconds (1 s) as an error, and the
// second error in a row (consecutiveErrorLimit 1) fails the shard: bounded in time. A dryRun
// check against a port nothing listens on is reported and fails nothing by itself.
func TestStoryHTTPCheckThatHangsIsBounded(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	srv := newSmokeServer(t, nil)
	hang := httpCheck("hangs", srv.URL+"/hang/{{shard}}/{{revision}}", 3)
	hang.ConsecutiveErrorLimit = ptr.To(int32(1))
	refused := httpCheck("refused", "http://127.0.0.1:1/{{shard}}", 1)
	refused.DryRun = true
	began := time.Now()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{hang, refused}
	})
	story.Eventually(t, 60*time.Second, "Stalled ShardCheckFailed", hasStall(t, ns, routingv1alpha1.ReasonShardCheckFailed, "check hangs failed in shard us-east"))
	if d := time.Since(began); d > 45*time.Second {
		t.Fatalf("a hanging check took %s to fail the shard", d)
	}
	msg := kit.Get(t, ns).Status.Failure.Message
	if !strings.Contains(msg, "2 measurements in a row ended in an error (consecutiveErrorLimit 1)") || !strings.Contains(msg, "no answer within timeoutSeconds") {
		t.Fatalf("failure message %q", msg)
	}
	story.Eventually(t, 30*time.Second, "us-east back on v1", kit.ServingIs(t, ns, story.AllV1))
}

// Bad input is rejected by the API server with a message naming the field.
func TestShardCheckBadInputIsRejected(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	cases := map[string]struct {
		check routingv1alpha1.ShardCheck
		want  string
	}{
		"no provider": {routingv1alpha1.ShardCheck{Name: "none"}, "exactly one of job, http or prometheus"},
		"two providers": {routingv1alpha1.ShardCheck{Name: "two", HTTP: &routingv1alpha1.HTTPCheck{URL: "http://127.0.0.1/x"},
			Prometheus: &routingv1alpha1.PrometheusCheck{Address: "http://127.0.0.1:9090", Query: "up", SuccessCondition: "result > 0.0"}}, "exactly one of job, http or prometheus"},
		"url scheme":      {routingv1alpha1.ShardCheck{Name: "url", HTTP: &routingv1alpha1.HTTPCheck{URL: "ftp://127.0.0.1/x"}}, "http.url must start with http:// or https://"},
		"address scheme":  {routingv1alpha1.ShardCheck{Name: "addr", Prometheus: &routingv1alpha1.PrometheusCheck{Address: "127.0.0.1:9090", Query: "up", SuccessCondition: "result > 0.0"}}, "prometheus.address must start with http:// or https://"},
		"timeout too big": {routingv1alpha1.ShardCheck{Name: "slow", HTTP: &routingv1alpha1.HTTPCheck{URL: "http://127.0.0.1/x"}, Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(600))}}, "timeoutSeconds"},
		"status code":     {routingv1alpha1.ShardCheck{Name: "code", HTTP: &routingv1alpha1.HTTPCheck{URL: "http://127.0.0.1/x", ExpectedStatus: []int32{42}}}, "expectedStatus"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := story.Fixture(ns)
			r.Name = "bad-" + strings.ReplaceAll(name, " ", "-")
			r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{c.check}
			err := k8s.Create(context.Background(), r)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create = %v, want Invalid naming %q", err, c.want)
			}
		})
	}
}

// Issue 24, item 3: measurements run outside the reconcile workers. Six RoutingServices (more
// than the manager's four workers) bake against an endpoint that never answers (timeoutSeconds
// 60, so each measurement holds whatever waits on it for a minute); a seventh, without checks,
// rolls out v2 through its three shards meanwhile, as fast as it would alone. Were the
// measurements taken inside the reconcile, the hung ones would hold every worker a minute at a
// time and the seventh would wait minutes.
func TestStoryHungChecksHoldNoWorker(t *testing.T) {
	t.Parallel()
	srv := newSmokeServer(t, nil)
	t.Cleanup(srv.CloseClientConnections) // before Close, which waits for the hung requests
	var hung []string
	for range 6 {
		ns := steadyV1(t)
		hang := httpCheck("hangs", srv.URL+"/hang/{{shard}}/{{revision}}", 3)
		hang.Measurement.TimeoutSeconds = ptr.To(int32(60))
		hang.ConsecutiveErrorLimit = ptr.To(int32(100))
		kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "app:v2"
			r.Spec.Strategy.BakeSeconds = ptr.To(int32(600))
			r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{hang}
		})
		hung = append(hung, ns)
	}
	story.Eventually(t, 30*time.Second, "every hung RoutingService measuring", func() error {
		if n := len(srv.asked("/hang/")); n < len(hung) {
			return fmt.Errorf("%d hung measurements started", n)
		}
		return nil
	})
	ns := steadyV1(t)
	began := time.Now()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
	})
	kit.WaitReady(t, ns, 45*time.Second)
	t.Logf("v2 through three shards in %.1fs beside %d RoutingServices whose checks hang", time.Since(began).Seconds(), len(hung))
	for _, h := range hung {
		if r := kit.Get(t, h); r.Status.Failure != nil {
			t.Fatalf("%s failed: %+v", h, r.Status.Failure)
		}
	}
}
