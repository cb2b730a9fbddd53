package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// The chart's alerts and dashboard (charts/schemagate/templates/monitoring.yaml,
// files/grafana-dashboard.json) are read here rather than in test/install, because only this
// package can record a plan and see what the manager then serves.
var (
	chartRule      = filepath.Join("..", "charts", "schemagate", "templates", "monitoring.yaml")
	chartDashboard = filepath.Join("..", "charts", "schemagate", "files", "grafana-dashboard.json")
)

var (
	metricName = regexp.MustCompile(`schemagate_[a-zA-Z0-9_]+`)
	// selector is a schemagate metric with a label matcher list: the name and the list.
	selector = regexp.MustCompile(`(schemagate_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	// annotationLabel is a label an alert's annotation reads ({{ $labels.x }}), legendLabel one a
	// Grafana legend prints ({{x}}).
	annotationLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	legendLabel     = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// servedMetrics records a plan that touches every schemagate metric (a rollout that failed and
// rolled a shard back, measured checks, a running migration, a cluster shard, a schema phase)
// and returns, by name, the label names of each series the manager's registry then serves (a
// histogram's _bucket, _sum and _count included).
func servedMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	rsvc := alertRS()
	rsvc.Namespace = "chart"
	rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MaxReplicas: ptr.To(int32(10))}
	t.Cleanup(func() { forgetMetrics("chart", rsvc.Name) })
	since := metav1.NewTime(time.Now().Add(-time.Minute))
	var plan rollout.Plan
	plan.Status.Schema = routingv1alpha1.SchemaStatus{RequiredVersion: "2", ConfirmedVersion: "1", MigrationJob: "rs-a-migrate-1", StartTime: &since,
		Phase: routingv1alpha1.SchemaPhaseExpanding, PhaseSince: &since}
	plan.Status.Conditions = []metav1.Condition{{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonMigrating}}
	plan.Status.Shards = []routingv1alpha1.ShardStatus{
		{Name: "us-east", Checks: []routingv1alpha1.ShardCheckStatus{{Name: "errors", Measurements: measured("0.001")}}},
		{Name: "eu-west", Cluster: &routingv1alpha1.ShardClusterStatus{Name: "eu-1", State: routingv1alpha1.ClusterReachable, LastContactTime: &since}},
	}
	plan.Events = []rollout.Event{
		{Reason: rollout.EventProgressDeadline, Measures: []rollout.Measure{{Phase: rollout.PhaseShardProgress, Shard: "us-east", Duration: time.Second}}},
		{Reason: rollout.EventShardRolledBack, Shard: "us-east"},
		{Reason: rollout.EventShardCheckPassed, Check: "errors"},
	}
	taken := []rollout.TakenMeasurement{{MeasurementKey: rollout.MeasurementKey{Shard: "us-east", Check: "errors"}, Result: routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementSuccessful}}}
	recordMetrics(rsvc, plan, taken)
	// The manager's own measures, recorded outside a plan.
	gateLatency.WithLabelValues(gateHopActed)

	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]map[string]bool{}
	add := func(name string, labels []string) {
		if served[name] == nil {
			served[name] = map[string]bool{}
		}
		for _, l := range labels {
			served[name][l] = true
		}
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			if m.GetHistogram() != nil {
				add(mf.GetName()+"_bucket", append(labels, "le"))
				add(mf.GetName()+"_sum", labels)
				add(mf.GetName()+"_count", labels)
				continue
			}
			add(mf.GetName(), labels)
		}
	}
	return served
}

// checkQuery checks one query (and the labels its legend or annotations read): every schemagate
// metric it names is served, with the labels its matchers name; the labels it groups by and the
// labels its templates read are labels of the schemagate metrics it names. It returns the
// metric names.
func checkQuery(t *testing.T, where, query string, printed []string, served map[string]map[string]bool) []string {
	t.Helper()
	names := metricName.FindAllString(query, -1)
	if len(names) == 0 {
		return nil
	}
	union := map[string]bool{}
	for _, n := range names {
		labels, ok := served[n]
		if !ok {
			t.Errorf("%s: %s is not a metric the manager serves", where, n)
			continue
		}
		for l := range labels {
			union[l] = true
		}
	}
	for _, m := range selector.FindAllStringSubmatch(query, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if served[m[1]] != nil && !served[m[1]][l[1]] {
				t.Errorf("%s: %s has no label %s", where, m[1], l[1])
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(query, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !union[l] {
				t.Errorf("%s: groups by %s, which %v lack", where, l, names)
			}
		}
	}
	for _, l := range printed {
		if !union[l] {
			t.Errorf("%s: reads label %s, which %v lack", where, l, names)
		}
	}
	return names
}

// Every schemagate metric the chart's PrometheusRule and Grafana dashboard query is one the
// manager serves once it has recorded a plan, with the labels they match on, group by and print.
func TestChartQueriesOnlyServedMetrics(t *testing.T) {
	served := servedMetrics(t)
	if len(served) < 20 {
		t.Fatalf("the registry serves only %d metrics after a plan", len(served))
	}

	// The rule: one block per alert, its expression and its annotations.
	b, err := os.ReadFile(chartRule)
	if err != nil {
		t.Fatal(err)
	}
	ruleNames := map[string]bool{}
	blocks := strings.Split(string(b), "- alert: ")[1:]
	if len(blocks) != 7 {
		t.Fatalf("%d alerts in %s, want 7", len(blocks), chartRule)
	}
	for _, block := range blocks {
		alert, _, _ := strings.Cut(block, "\n")
		expr, annotations, _ := strings.Cut(block, "annotations:")
		for _, n := range checkQuery(t, alert, expr, submatches(annotationLabel, annotations), served) {
			ruleNames[n] = true
		}
	}
	for _, n := range []string{"schemagate_stalled", "schemagate_schema_dirty", "schemagate_migration_running_seconds", "schemagate_migration_deadline_seconds", "schemagate_shard_rollbacks_total", "schemagate_shard_replicas", "schemagate_shard_autoscaler_max_replicas"} {
		if !ruleNames[n] {
			t.Errorf("no alert reads %s", n)
		}
	}

	// The dashboard: every target's expression and legend.
	b, err = os.ReadFile(chartDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	dashNames := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range checkQuery(t, p.Title, tg.Expr, submatches(legendLabel, tg.Legend), served) {
				dashNames[n] = true
			}
		}
	}
	var got []string
	for n := range dashNames {
		got = append(got, n)
	}
	sort.Strings(got)
	if len(got) < 15 {
		t.Errorf("the dashboard reads only %v", got)
	}
	t.Logf("the rule reads %d schemagate metrics, the dashboard %d", len(ruleNames), len(got))
}

// submatches returns the first group of each match of re in s.
func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
