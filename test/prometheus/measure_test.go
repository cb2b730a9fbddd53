package prometheus

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
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
			Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(2))}}})
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
