package controllers

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// seriesIn is the exposition of collectors' series of namespace ns (other tests of this package
// record RoutingServices of their own), one "name{label=value,…} value" line each, sorted.
func seriesIn(t *testing.T, ns string, collectors ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectors...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			mine := false
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
				mine = mine || (l.GetName() == "namespace" && l.GetValue() == ns)
			}
			if !mine {
				continue
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(labels, ","), v))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// alertCollectors are the collectors of metrics_alerts.go, and the rollouts counter.
func alertCollectors() []prometheus.Collector {
	return []prometheus.Collector{rollouts, stalled, schemaDirty, schemaInfo.vec, schemaVersion.vec, checkValue.vec, checkThreshold.vec, shardRollbacks, migrationClock}
}

// alertRS is a RoutingService of two shards with a prometheus check whose threshold reads
// (result < 0.01), one whose does not, and an http check.
func alertRS() *routingv1alpha1.RoutingService {
	rsvc := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Namespace: "alerts", Name: "rs-a"}}
	rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east"}, {Name: "eu-west"}}
	rsvc.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To[int64](600)
	rsvc.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{
		{Name: "errors", Prometheus: &routingv1alpha1.PrometheusCheck{Query: "q", SuccessCondition: "result < 0.01"}},
		{Name: "latency", Prometheus: &routingv1alpha1.PrometheusCheck{Query: "q", SuccessCondition: "result < 0.2 && result > 0.0"}},
		{Name: "health", HTTP: &routingv1alpha1.HTTPCheck{URL: "http://h"}},
	}
	return rsvc
}

func measured(values ...string) []routingv1alpha1.MeasurementResult {
	var out []routingv1alpha1.MeasurementResult
	for _, v := range values {
		out = append(out, routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementSuccessful, Value: v})
	}
	return out
}

// A RoutingService's first reconcile serves every rollout outcome and every shard's rollbacks at
// 0, so the first increment shows in increase(); the gauges read the status written: Stalled,
// a dirty schema, the versions (as labels, and as numbers when they are plain integers), the
// last measured values beside the thresholds that parse, the running migration against its
// deadline at scrape time. Deleting the object removes every series.
func TestAlertMetrics(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	now := t0.Add(500 * time.Second)
	migrationClock.now = func() time.Time { return now }
	t.Cleanup(func() { migrationClock.now = time.Now; forgetMetrics("alerts", "rs-a") })
	rsvc := alertRS()

	var plan rollout.Plan
	start := metav1.NewTime(t0)
	plan.Status.Schema = routingv1alpha1.SchemaStatus{RequiredVersion: "20260114093000", ConfirmedVersion: "20251201000000", MigrationJob: "rs-a-migrate-1", StartTime: &start}
	plan.Status.Conditions = []metav1.Condition{
		{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonMigrating},
		{Type: routingv1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: "NotStalled"},
	}
	plan.Status.Shards = []routingv1alpha1.ShardStatus{
		{Name: "us-east", Checks: []routingv1alpha1.ShardCheckStatus{
			{Name: "errors", Measurements: measured("0.5", "0.004", "")}, // the newest with a value counts
			{Name: "health", Measurements: measured("200")},
			{Name: "latency", Measurements: measured("NaN")}, // not a finite number: no series
		}},
		{Name: "eu-west"},
	}
	recordMetrics(rsvc, plan, nil)
	want := `schemagate_check_threshold{check=errors,name=rs-a,namespace=alerts,op=<} 0.01
schemagate_check_value{check=errors,name=rs-a,namespace=alerts,shard=us-east} 0.004
schemagate_check_value{check=health,name=rs-a,namespace=alerts,shard=us-east} 200
schemagate_migration_deadline_seconds{migration_job=rs-a-migrate-1,name=rs-a,namespace=alerts} 600
schemagate_migration_running_seconds{migration_job=rs-a-migrate-1,name=rs-a,namespace=alerts} 500
schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=aborted} 0
schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=complete} 0
schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=failed} 0
schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=migration_failed} 0
schemagate_schema_dirty{name=rs-a,namespace=alerts} 0
schemagate_schema_info{confirmed=20251201000000,name=rs-a,namespace=alerts,required=20260114093000} 1
schemagate_schema_version{kind=confirmed,name=rs-a,namespace=alerts} 2.0251201e+13
schemagate_schema_version{kind=required,name=rs-a,namespace=alerts} 2.0260114093e+13
schemagate_shard_rollbacks_total{name=rs-a,namespace=alerts,shard=eu-west} 0
schemagate_shard_rollbacks_total{name=rs-a,namespace=alerts,shard=us-east} 0
schemagate_stalled{name=rs-a,namespace=alerts} 0`
	if got := seriesIn(t, "alerts", alertCollectors()...); got != want {
		t.Fatalf("first reconcile:\n%s\nwant:\n%s", got, want)
	}
	// The migration clock runs between status writes.
	now = now.Add(30 * time.Second)
	if got := seriesIn(t, "alerts", migrationClock); !strings.Contains(got, "schemagate_migration_running_seconds{migration_job=rs-a-migrate-1,name=rs-a,namespace=alerts} 530") {
		t.Fatalf("30 s later:\n%s", got)
	}

	// The migration failed dirty, the rollout failed and a shard rolled back; the status
	// versions are hand-edited garbage.
	done := metav1.NewTime(now)
	plan.Status.Schema.CompletionTime = &done
	plan.Status.Schema.ConfirmedVersion = "v1.2\x00" + strings.Repeat("x", 100)
	plan.Status.Conditions = []metav1.Condition{
		{Type: routingv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: routingv1alpha1.ReasonSchemaDirty},
		{Type: routingv1alpha1.ConditionSchemaReady, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonSchemaDirty},
	}
	plan.Status.Shards[0].Checks = nil
	plan.Events = []rollout.Event{
		{Reason: rollout.EventProgressDeadline},
		{Reason: rollout.EventShardRolledBack, Shard: "us-east"},
	}
	recordMetrics(rsvc, plan, nil)
	got := seriesIn(t, "alerts", alertCollectors()...)
	for _, line := range []string{
		"schemagate_stalled{name=rs-a,namespace=alerts} 1",
		"schemagate_schema_dirty{name=rs-a,namespace=alerts} 1",
		"schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=failed} 1",
		"schemagate_rollouts_total{name=rs-a,namespace=alerts,outcome=complete} 0",
		"schemagate_shard_rollbacks_total{name=rs-a,namespace=alerts,shard=us-east} 1",
		"schemagate_shard_rollbacks_total{name=rs-a,namespace=alerts,shard=eu-west} 0",
		// 63 characters, the NUL shown as '?'.
		"schemagate_schema_info{confirmed=v1.2?" + strings.Repeat("x", 58) + ",name=rs-a,namespace=alerts,required=20260114093000} 1",
	} {
		if !strings.Contains(got, line+"\n") && !strings.HasSuffix(got, line) {
			t.Errorf("after the failure, no %s", line)
		}
	}
	for _, gone := range []string{"schemagate_check_value", "schemagate_migration_", "kind=confirmed", "confirmed=20251201000000"} {
		if strings.Contains(got, gone) {
			t.Errorf("after the failure, still %s:\n%s", gone, got)
		}
	}
	if t.Failed() {
		t.Fatalf("after the failure:\n%s", got)
	}
	if v := testutil.ToFloat64(rollouts.WithLabelValues("alerts", "rs-a", rollout.OutcomeFailed)); v != 1 {
		t.Fatalf("failed rollouts %g", v)
	}

	// A migration Job a queue holds is not running.
	held := metav1.NewTime(now)
	plan.Status.Schema.CompletionTime, plan.Status.Schema.SuspendedSince = nil, &held
	plan.Events = nil
	recordMetrics(rsvc, plan, nil)
	if got := seriesIn(t, "alerts", migrationClock); got != "" {
		t.Fatalf("suspended migration:\n%s", got)
	}

	forgetMetrics("alerts", "rs-a")
	if got := seriesIn(t, "alerts", alertCollectors()...); got != "" {
		t.Fatalf("after the object is deleted:\n%s", got)
	}
}

func TestPlainVersion(t *testing.T) {
	for v, want := range map[string]bool{"7": true, "0": true, "20260114093000": true, "": false, "v1": false, "-3": false, "+3": false, "1.2": false, "1e3": false, "99999999999999999999999": false} {
		if _, ok := plainVersion(v); ok != want {
			t.Errorf("plainVersion(%q) ok=%v, want %v", v, ok, want)
		}
	}
}

// The decision is logged once per change, not once per reconcile; a RoutingService deleted and
// made again logs its first decision again.
func TestLogDecision(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	r := &RoutingServiceReconciler{}
	key := types.NamespacedName{Namespace: "alerts", Name: "rs-a"}
	plan := rollout.Plan{}
	plan.Status.Conditions = []metav1.Condition{{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonShardBaking, Message: "shard us-east bakes until 03:10"}}

	r.logDecision(log, key, plan)
	r.logDecision(log, key, plan)
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg"="decision"`) || !strings.Contains(lines[0], "shard us-east bakes until 03:10") || !strings.Contains(lines[0], "False ShardBaking") {
		t.Fatalf("after two reconciles with one decision: %q", lines)
	}
	plan.Status.Conditions[0].Message = "shard eu-west bakes until 03:20"
	r.logDecision(log, key, plan)
	if len(lines) != 2 || !strings.Contains(lines[1], "eu-west") {
		t.Fatalf("after a new decision: %q", lines)
	}
	r.decisions.forget(key)
	r.logDecision(log, key, plan)
	if len(lines) != 3 {
		t.Fatalf("after the object was deleted and made again: %q", lines)
	}
}
