package checkspec

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

func promSpec(success, failure, address string) *routingv1alpha1.RoutingServiceSpec {
	return &routingv1alpha1.RoutingServiceSpec{Strategy: routingv1alpha1.RolloutStrategy{Checks: []routingv1alpha1.ShardCheck{{Name: "ratio",
		Prometheus: &routingv1alpha1.PrometheusCheck{Address: address, Query: "up", SuccessCondition: success, FailureCondition: failure}}}}}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *routingv1alpha1.RoutingServiceSpec
		want []string // fields, in order
	}{
		{"valid", promSpec("result < 0.01", "result > 0.1", "http://prometheus.monitoring:9090"), nil},
		{"unbalanced", promSpec("result <", "", "http://p:9090"), []string{"spec.strategy.checks[0].prometheus.successCondition"}},
		{"not a bool", promSpec("result + 1.0", "", "http://p:9090"), []string{"spec.strategy.checks[0].prometheus.successCondition"}},
		{"unknown variable", promSpec("value < 1.0", "", "http://p:9090"), []string{"spec.strategy.checks[0].prometheus.successCondition"}},
		{"int against double", promSpec("result < 1", "", "http://p:9090"), []string{"spec.strategy.checks[0].prometheus.successCondition"}},
		{"failure condition", promSpec("result < 0.01", "result >>> 2", "http://p:9090"), []string{"spec.strategy.checks[0].prometheus.failureCondition"}},
		{"address", promSpec("result < 0.01", "", "http://"), []string{"spec.strategy.checks[0].prometheus.address"}},
		{"all three", promSpec("(", ")", "ftp://p"), []string{"spec.strategy.checks[0].prometheus.successCondition",
			"spec.strategy.checks[0].prometheus.failureCondition", "spec.strategy.checks[0].prometheus.address"}},
		{"http placeholders", &routingv1alpha1.RoutingServiceSpec{Strategy: routingv1alpha1.RolloutStrategy{Checks: []routingv1alpha1.ShardCheck{
			{Name: "a", Job: &routingv1alpha1.JobCheck{}},
			{Name: "b", HTTP: &routingv1alpha1.HTTPCheck{URL: "https://{{shard}}.edge.example/{{revision}}?v={{schemaVersion}}", JSON: &routingv1alpha1.JSONCondition{Path: "{.status}", Equals: "ok"}}},
		}}}, nil},
		{"http url and path", &routingv1alpha1.RoutingServiceSpec{Strategy: routingv1alpha1.RolloutStrategy{Checks: []routingv1alpha1.ShardCheck{
			{Name: "a", HTTP: &routingv1alpha1.HTTPCheck{URL: "https://{{region}}.edge.example/", JSON: &routingv1alpha1.JSONCondition{Path: "{.status", Equals: "ok"}}},
		}}}, []string{"spec.strategy.checks[0].http.url", "spec.strategy.checks[0].http.json.path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Problems(tc.spec)
			var fields []string
			for _, p := range got {
				fields = append(fields, p.Field)
				if p.Message == "" || strings.Contains(p.Message, "\n") {
					t.Fatalf("message %q: want one non-empty line", p.Message)
				}
			}
			if strings.Join(fields, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("problems %v, want fields %v", got, tc.want)
			}
		})
	}
}

// The message quotes CEL's complaint.
func TestProblemQuotesCEL(t *testing.T) {
	got := Problems(promSpec("result +", "", "http://p:9090"))
	if len(got) != 1 || !strings.Contains(got[0].Message, `"result +" does not compile`) || !strings.Contains(got[0].Message, "Syntax error") {
		t.Fatalf("%v", got)
	}
}

// Untrusted spec strings never panic the check, the verdict is the same on every call (it is
// cached), and it agrees with CompileCondition, which the providers evaluate with.
func FuzzProblems(f *testing.F) {
	for _, s := range []string{"result < 0.01", "result <", "(", "result + 1.0", `"x" == "x"`, "result in [1.0, 2.0]", "[1,2,3].all(x, x > 0)", "has(result.x)", "https://{{shard}}.x/", "{.a[0].b}", "{range .x}"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, expr, other string) {
		if len(expr) > 512 || len(other) > 2048 {
			return
		}
		spec := &routingv1alpha1.RoutingServiceSpec{Strategy: routingv1alpha1.RolloutStrategy{Checks: []routingv1alpha1.ShardCheck{
			{Name: "p", Prometheus: &routingv1alpha1.PrometheusCheck{Address: other, Query: "up", SuccessCondition: expr, FailureCondition: other}},
			{Name: "h", HTTP: &routingv1alpha1.HTTPCheck{URL: other, JSON: &routingv1alpha1.JSONCondition{Path: other}}},
		}}}
		a, b := Problems(spec), Problems(spec)
		if len(a) != len(b) {
			t.Fatalf("two verdicts: %v, %v", a, b)
		}
		_, err := CompileCondition(expr)
		flagged := len(a) > 0 && a[0].Field == "spec.strategy.checks[0].prometheus.successCondition"
		if (err != nil) != flagged {
			t.Fatalf("CompileCondition says %v, Problems %v", err, a)
		}
	})
}

// A range shorter than twice the declared scrape interval is warned about (once per check);
// ranges long enough, subqueries' steps, and checks without scrapeIntervalSeconds are not.
func TestWarningsShortRange(t *testing.T) {
	check := func(query string, scrape *int32) routingv1alpha1.ShardCheck {
		return routingv1alpha1.ShardCheck{Name: "c", Prometheus: &routingv1alpha1.PrometheusCheck{Address: "http://127.0.0.1:9090", Query: query, SuccessCondition: "result < 1", ScrapeIntervalSeconds: scrape}}
	}
	s30 := ptr.To(int32(30))
	spec := &routingv1alpha1.RoutingServiceSpec{Strategy: routingv1alpha1.RolloutStrategy{Checks: []routingv1alpha1.ShardCheck{
		check(`sum(rate(x[30s])) / sum(rate(y[30s]))`, s30),
		check(`sum(rate(x[1m])) / sum(rate(y[5m]))`, s30),
		check(`max_over_time(rate(x[2m])[45s:15s])`, s30),
		check(`sum(rate(x[1s]))`, nil),
		check(`sum(rate(x[1m30s]))`, ptr.To(int32(60))),
	}}}
	got := Warnings(spec)
	var fields []string
	for _, w := range got {
		fields = append(fields, w.Field)
	}
	want := []string{"spec.strategy.checks[0].prometheus.query", "spec.strategy.checks[2].prometheus.query", "spec.strategy.checks[4].prometheus.query"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Fatalf("warnings %v, want %v", got, want)
	}
	if !strings.Contains(got[0].Message, "[30s]") || !strings.Contains(got[0].Message, "use [1m] or more") {
		t.Fatalf("message %q", got[0].Message)
	}
}
