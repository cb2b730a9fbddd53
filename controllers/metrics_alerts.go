package controllers

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Metrics to alert on (the chart's PrometheusRule, docs/monitoring.md): each is set from the
// status the manager wrote, per RoutingService, and removed when it is deleted. None has a label
// called job, which would clash with the job label Prometheus gives every target.
var (
	// stalled: schemagate_stalled{namespace, name}: 1 while the Stalled condition is True, else
	// 0. One series per RoutingService.
	stalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_stalled",
		Help: "1 while the RoutingService's Stalled condition is True (a person is needed), else 0.",
	}, []string{"namespace", "name"})

	// schemaDirty: schemagate_schema_dirty{namespace, name}: 1 while the SchemaReady condition is
	// False with reason SchemaDirty (the latest schema report says a migration failed half-way),
	// else 0. One series per RoutingService.
	schemaDirty = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_schema_dirty",
		Help: "1 while the latest schema report says the database is dirty (SchemaReady=False, reason SchemaDirty), else 0.",
	}, []string{"namespace", "name"})

	// schemaInfo: schemagate_schema_info{namespace, name, required, confirmed} = 1, the versions
	// of status.schema as label values (at most maxLabelChars characters, printable only: a
	// status is not trusted). One series per RoutingService; a new version replaces it.
	schemaInfo = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_schema_info",
		Help: "1, with the RoutingService's required (spec.schema.version) and confirmed schema versions (status.schema) as labels.",
	}, "required", "confirmed")

	// schemaVersion: schemagate_schema_version{namespace, name, kind}, kind required or
	// confirmed: the version as a number, for versions that are plain non-negative integers
	// (golang-migrate's, a timestamp); none for other versions. At most 2 series per
	// RoutingService.
	schemaVersion = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_schema_version",
		Help: "The RoutingService's required and confirmed schema versions (kind), for versions that are plain non-negative integers.",
	}, "kind")

	// checkValue: schemagate_check_value{namespace, name, check, shard}: the value of the last
	// measurement of an http or prometheus check in a shard (status.shards[].checks[]) that is a
	// finite number: the query's result, or the HTTP status code. One series per check and shard
	// with such a measurement for the shard's step revision.
	checkValue = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_check_value",
		Help: "The last measured value of each http or prometheus check in each shard (the query's result, or the HTTP status code).",
	}, "check", "shard")

	// checkThreshold: schemagate_check_threshold{namespace, name, check, op}: the number a
	// prometheus check's successCondition compares result with, when it is that simple
	// (`result < 0.01`: op "<", 0.01; checkspec.Threshold); op one of <, <=, >, >=, ==. One series
	// per such check.
	checkThreshold = newObjectGauges(prometheus.GaugeOpts{
		Name: "schemagate_check_threshold",
		Help: "The threshold of each prometheus check whose successCondition compares result with one number, labelled with the comparison (op).",
	}, "check", "op")

	// shardRollbacks: schemagate_shard_rollbacks_total{namespace, name, shard}: shards returned to
	// the revision that served them last after a failed rollout (ShardRolledBack Events). Served
	// at 0 for every shard of spec.shards from the first reconcile, so a first rollback shows in
	// increase(). One series per shard ever in spec.shards while the manager runs.
	shardRollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemagate_shard_rollbacks_total",
		Help: "Shards rolled back to the revision that served them last, per RoutingService and shard.",
	}, []string{"namespace", "name", "shard"})

	// migrationClock serves schemagate_migration_running_seconds{namespace, name, migration_job}
	// and schemagate_migration_deadline_seconds{namespace, name, migration_job}, computed at each
	// scrape from status.schema. One series of each per RoutingService whose migration Job runs.
	migrationClock = newMigrationTimer()
)

// maxLabelChars bounds the label values taken from a status or a spec (versions, check and
// shard names, Job names); longer ones are cut.
const maxLabelChars = 63

func init() {
	metrics.Registry.MustRegister(stalled, schemaDirty, schemaInfo.vec, schemaVersion.vec, checkValue.vec, checkThreshold.vec, shardRollbacks, migrationClock)
}

// recordAlertMetrics sets the metrics above from a plan whose status was written.
func recordAlertMetrics(rsvc *routingv1alpha1.RoutingService, plan rollout.Plan) {
	ns, name := rsvc.Namespace, rsvc.Name
	st := &plan.Status
	stalled.WithLabelValues(ns, name).Set(boolGauge(meta.IsStatusConditionTrue(st.Conditions, routingv1alpha1.ConditionStalled)))
	sr := meta.FindStatusCondition(st.Conditions, routingv1alpha1.ConditionSchemaReady)
	schemaDirty.WithLabelValues(ns, name).Set(boolGauge(sr != nil && sr.Status == metav1.ConditionFalse && sr.Reason == routingv1alpha1.ReasonSchemaDirty))

	required, confirmed := st.Schema.RequiredVersion, st.Schema.ConfirmedVersion
	schemaInfo.set(ns, name, []series{{labels: []string{labelValue(required, maxLabelChars), labelValue(confirmed, maxLabelChars)}, value: 1}})
	var versions []series
	for _, v := range []struct{ kind, version string }{{"required", required}, {"confirmed", confirmed}} {
		if n, ok := plainVersion(v.version); ok {
			versions = append(versions, series{labels: []string{v.kind}, value: n})
		}
	}
	schemaVersion.set(ns, name, versions)

	var values []series
	for _, ss := range st.Shards {
		for _, c := range ss.Checks {
			if v, ok := lastValue(c.Measurements); ok {
				values = append(values, series{labels: []string{labelValue(c.Name, maxLabelChars), labelValue(ss.Name, maxLabelChars)}, value: v})
			}
		}
	}
	checkValue.set(ns, name, values)

	var thresholds []series
	for _, c := range rsvc.Spec.Strategy.Checks {
		if c.Prometheus == nil {
			continue
		}
		if op, v, ok := checkspec.Threshold(c.Prometheus.SuccessCondition); ok {
			thresholds = append(thresholds, series{labels: []string{labelValue(c.Name, maxLabelChars), op}, value: v})
		}
	}
	checkThreshold.set(ns, name, thresholds)

	for _, s := range rsvc.Spec.Shards {
		shardRollbacks.WithLabelValues(ns, name, s.Name) // served at 0
	}
	for _, e := range plan.Events {
		if e.Reason == rollout.EventShardRolledBack && e.Shard != "" {
			shardRollbacks.WithLabelValues(ns, name, e.Shard).Inc()
		}
	}

	migrationClock.set(ns, name, &st.Schema, rsvc.Spec.Schema.Migration.ActiveDeadlineSecondsOrDefault())
}

// forgetAlertMetrics removes a deleted RoutingService's series of the metrics above.
func forgetAlertMetrics(namespace, name string) {
	stalled.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	schemaDirty.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	shardRollbacks.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	for _, g := range []*objectGauges{schemaInfo, schemaVersion, checkValue, checkThreshold} {
		g.set(namespace, name, nil)
	}
	migrationClock.set(namespace, name, nil, 0)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// plainVersion parses a version made of decimal digits only ("20260114093000", "7"); anything
// else ("v1.2", "-3", "") is not a number.
func plainVersion(v string) (float64, bool) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return float64(n), true
}

// lastValue is the value of the newest measurement that has one that is a finite number.
func lastValue(ms []routingv1alpha1.MeasurementResult) (float64, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Value == "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(ms[i].Value), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// labelValue makes s, which comes from a status or a spec, safe as a label value: valid UTF-8,
// printable characters only (others become '?'), at most limit characters.
func labelValue(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// series is one series of an objectGauges: its label values after namespace and name.
type series struct {
	labels []string
	value  float64
}

// objectGauges is a gauge whose series of a RoutingService are replaced as a set on each
// record: the series no longer wanted are deleted, the others set in place, so a series that
// stays is never missing from a scrape between the two.
type objectGauges struct {
	vec *prometheus.GaugeVec
	mu  sync.Mutex
	// last holds, by namespace/name, the label values set last (joined by "\xff").
	last map[[2]string]map[string][]string
}

func newObjectGauges(opts prometheus.GaugeOpts, labels ...string) *objectGauges {
	return &objectGauges{
		vec:  prometheus.NewGaugeVec(opts, append([]string{"namespace", "name"}, labels...)),
		last: map[[2]string]map[string][]string{},
	}
}

func (g *objectGauges) set(namespace, name string, want []series) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := [2]string{namespace, name}
	now := map[string][]string{}
	for _, s := range want {
		lv := append([]string{namespace, name}, s.labels...)
		now[strings.Join(lv, "\xff")] = lv
		g.vec.WithLabelValues(lv...).Set(s.value)
	}
	for k, lv := range g.last[key] {
		if _, ok := now[k]; !ok {
			g.vec.DeleteLabelValues(lv...)
		}
	}
	if len(now) == 0 {
		delete(g.last, key)
		return
	}
	g.last[key] = now
}

// migrationTimer is a collector of how long each RoutingService's migration Job has run and of
// its deadline, so that an alert can compare the two between status writes.
type migrationTimer struct {
	running, deadline *prometheus.Desc
	now               func() time.Time
	mu                sync.Mutex
	// runs, by namespace/name.
	runs map[[2]string]migrationRun
}

type migrationRun struct {
	job      string
	start    time.Time
	deadline float64
}

func newMigrationTimer() *migrationTimer {
	labels := []string{"namespace", "name", "migration_job"}
	return &migrationTimer{
		running: prometheus.NewDesc("schemagate_migration_running_seconds",
			"Seconds since the RoutingService's running migration Job was created (status.schema.startTime), at the time of the scrape.",
			labels, nil),
		deadline: prometheus.NewDesc("schemagate_migration_deadline_seconds",
			"The running migration's deadline in seconds (spec.schema.migration.activeDeadlineSeconds).",
			labels, nil),
		now:  time.Now,
		runs: map[[2]string]migrationRun{},
	}
}

func (c *migrationTimer) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.deadline
}

func (c *migrationTimer) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for key, r := range c.runs {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, max(0, now.Sub(r.start).Seconds()), key[0], key[1], r.job)
		ch <- prometheus.MustNewConstMetric(c.deadline, prometheus.GaugeValue, r.deadline, key[0], key[1], r.job)
	}
}

// set records the migration st reports as running: its Job named, created (startTime) and not
// finished (no completionTime). A Job a queue holds (suspendedSince) is not running, and its
// deadline does not run either. The time is counted from the Job's creation, so time it spent
// suspended before it was released counts too: the alert on it may fire early, never late. A nil
// st forgets the object.
func (c *migrationTimer) set(namespace, name string, st *routingv1alpha1.SchemaStatus, deadlineSeconds int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]string{namespace, name}
	if st == nil || st.MigrationJob == "" || st.StartTime == nil || st.CompletionTime != nil || st.SuspendedSince != nil {
		delete(c.runs, key)
		return
	}
	c.runs[key] = migrationRun{job: labelValue(st.MigrationJob, maxLabelChars), start: st.StartTime.Time, deadline: float64(deadlineSeconds)}
}
