package controllers

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Metrics served on the manager's metrics endpoint, beside controller-runtime's own
// (controller_runtime_reconcile_total, workqueue_*, …).
var (
	// phaseDuration: schemagate_phase_duration_seconds{namespace, name, phase, shard}: namespace
	// and name are the RoutingService's; phase one of migration, gate_wait, shard_progress,
	// shard_bake (rollout.Phase*); shard is empty for the first two. Series per RoutingService:
	// 2 + 2 × shards, each with 11 buckets; they are removed when the RoutingService is deleted.
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemagate_phase_duration_seconds",
		Help:    "Duration of rollout phases, in seconds: migration (the Job's run), gate_wait (Job created to gate open), shard_progress, shard_bake.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"namespace", "name", "phase", "shard"})

	// rollouts: schemagate_rollouts_total{namespace, name, outcome}, outcome one of complete,
	// failed, aborted, migration_failed (rolloutOutcomes). Each outcome is served at 0 from the
	// RoutingService's first reconcile, so the first rollout that ends shows in increase(): 4
	// series per RoutingService, removed when it is deleted.
	rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemagate_rollouts_total",
		Help: "Rollouts that ended, per RoutingService and outcome: complete, failed, aborted, migration_failed.",
	}, []string{"namespace", "name", "outcome"})

	// currentStep: schemagate_rollout_step{namespace, name, reason} = 1 for the RoutingService's
	// current activity (the Ready condition's reason: Migrating, ShardProgressing, ShardBaking,
	// RolloutComplete, ProgressDeadlineExceeded, …); other reasons of the object are removed.
	currentStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_rollout_step",
		Help: "1 for each RoutingService's current step, labelled by the reason of its Ready condition.",
	}, []string{"namespace", "name", "reason"})

	// assumedRanges: schemagate_assumed_range_revisions{namespace, name}, the revisions that serve
	// a shard on a range that is only assumed (no spec.schema.compatibility), per RoutingService.
	assumedRanges = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_assumed_range_revisions",
		Help: "Revisions that serve a shard on a schema range that is assumed, not declared, per RoutingService.",
	}, []string{"namespace", "name"})

	// promotedShards: schemagate_promoted_shards{namespace, name}, shards promoted for the update revision.
	promotedShards = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_promoted_shards",
		Help: "Shards promoted to the update revision, per RoutingService.",
	}, []string{"namespace", "name"})
)

// Shard checks (spec.strategy.checks, issue 11).
var (
	// shardChecks: schemagate_shard_checks_total{namespace, name, check, result}, result one of
	// passed, failed, inconclusive: a check's outcome in a shard, counted once per shard and
	// revision.
	shardChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemagate_shard_checks_total",
		Help: "Outcomes of spec.strategy.checks per shard and revision, by check and result: passed, failed, inconclusive.",
	}, []string{"namespace", "name", "check", "result"})

	// checkMeasurements: schemagate_check_measurements_total{namespace, name, check, phase},
	// phase one of Successful, Failed, Inconclusive, Error: the measurements the manager took
	// for http and prometheus checks.
	checkMeasurements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schemagate_check_measurements_total",
		Help: "Measurements of http and prometheus checks, by check and phase: Successful, Failed, Inconclusive, Error.",
	}, []string{"namespace", "name", "check", "phase"})
)

// The schema lifecycle (expand, roll out, rollback window, contract), from status.schema.phase and
// phaseSince as they are written.
var (
	// schemaPhase: schemagate_schema_phase{namespace, name, phase} is one-hot: for a RoutingService
	// with a phase, one series per phase of knownPhases (5), 1 for the current
	// one and 0 for the others, so `schemagate_schema_phase{phase="RollbackWindow"} == 1` selects
	// the objects in that phase and a change of phase never leaves a stale 1 behind. An object
	// with no phase (no lifecycle reported yet) or one this manager does not know has none.
	schemaPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_schema_phase",
		Help: "1 for the schema lifecycle phase each RoutingService is in (Expanding, RollingOut, RollbackWindow, Contracting, Complete), 0 for the others.",
	}, []string{"namespace", "name", "phase"})

	// schemaPhaseClock serves schemagate_schema_phase_seconds{namespace, name, phase}: the time
	// since status.schema.phaseSince, computed at each scrape (so it grows between status writes;
	// a phaseSince in the future counts as 0). One series per RoutingService with a phase and a
	// phaseSince.
	schemaPhaseClock = newPhaseClock()
)

// The gate's latency inside the manager (gate_latency.go).
var (
	// gateLatency: schemagate_gate_latency_seconds{hop}, from the manager receiving schema
	// evidence (a migration, check or contract pod's first container terminated, or its Job
	// finished) to hop "queued": a reconcile on a fresh cache starts deciding with it, and hop
	// "acted": that reconcile's writes are applied. No per-object labels: it measures the
	// manager, not a RoutingService.
	gateLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schemagate_gate_latency_seconds",
		Help:    "From the manager receiving schema evidence (a migration or check container terminated, its Job finished) to a reconcile deciding with it (hop=queued) and to that reconcile's writes applied (hop=acted), in seconds.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"hop"})

	// staleSkips: schemagate_stale_cache_skips_total, reconciles skipped because the cache did
	// not yet have the manager's own last status write (cachesync.go).
	staleSkips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schemagate_stale_cache_skips_total",
		Help: "Reconciles skipped because the manager's cache did not yet have its own last status write of the RoutingService.",
	})

	// gateFreshReads: schemagate_gate_fresh_reads_total, reconciles that read the RoutingService
	// from the API server because the cache lacked the manager's own last status write while
	// schema evidence waited (cachesync.go).
	gateFreshReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schemagate_gate_fresh_reads_total",
		Help: "Reconciles that read the RoutingService from the API server instead of skipping, because the cache lacked the manager's own last status write while schema evidence waited.",
	})
)

// The hops of schemagate_gate_latency_seconds.
const (
	gateHopQueued = "queued"
	gateHopActed  = "acted"
)

// knownPhases are the values the phase label may take: nothing else reaches a label, whatever a
// status holds.
var knownPhases = []routingv1alpha1.SchemaPhase{
	routingv1alpha1.SchemaPhaseExpanding, routingv1alpha1.SchemaPhaseRollingOut, routingv1alpha1.SchemaPhaseRollbackWindow,
	routingv1alpha1.SchemaPhaseContracting, routingv1alpha1.SchemaPhaseComplete,
}

func knownPhase(p routingv1alpha1.SchemaPhase) bool {
	for _, k := range knownPhases {
		if p == k {
			return true
		}
	}
	return false
}

// phaseClock is a collector of the time each RoutingService has been in its schema phase.
type phaseClock struct {
	desc *prometheus.Desc
	now  func() time.Time
	mu   sync.Mutex
	// since, by namespace/name: the phase and when it began.
	since map[[2]string]phaseStart
}

type phaseStart struct {
	phase routingv1alpha1.SchemaPhase
	at    time.Time
}

func newPhaseClock() *phaseClock {
	return &phaseClock{
		desc: prometheus.NewDesc("schemagate_schema_phase_seconds",
			"Seconds since each RoutingService's schema lifecycle entered its current phase (status.schema.phaseSince), at the time of the scrape.",
			[]string{"namespace", "name", "phase"}, nil),
		now:   time.Now,
		since: map[[2]string]phaseStart{},
	}
}

func (c *phaseClock) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *phaseClock) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for key, s := range c.since {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, max(0, now.Sub(s.at).Seconds()), key[0], key[1], string(s.phase))
	}
}

func (c *phaseClock) set(namespace, name string, phase routingv1alpha1.SchemaPhase, since *metav1.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]string{namespace, name}
	if !knownPhase(phase) || since == nil {
		delete(c.since, key)
		return
	}
	c.since[key] = phaseStart{phase: phase, at: since.Time}
}

// recordSchemaPhase sets both schema phase metrics from the status written.
func recordSchemaPhase(namespace, name string, st *routingv1alpha1.SchemaStatus) {
	schemaPhaseClock.set(namespace, name, st.Phase, st.PhaseSince)
	if !knownPhase(st.Phase) {
		schemaPhase.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
		return
	}
	for _, p := range knownPhases {
		v := 0.0
		if p == st.Phase {
			v = 1
		}
		schemaPhase.WithLabelValues(namespace, name, string(p)).Set(v)
	}
}

// rolloutOutcomes are the values of schemagate_rollouts_total's outcome label.
var rolloutOutcomes = []string{rollout.OutcomeComplete, rollout.OutcomeFailed, rollout.OutcomeAborted, rollout.OutcomeMigrationFailed}

// checkResults maps the Event reasons of check outcomes to the result label.
var checkResults = map[string]string{
	rollout.EventShardCheckPassed:                "passed",
	routingv1alpha1.ReasonShardCheckFailed:       "failed",
	routingv1alpha1.ReasonShardCheckInconclusive: "inconclusive",
}

func init() {
	metrics.Registry.MustRegister(phaseDuration, rollouts, currentStep, promotedShards, assumedRanges, shardChecks, checkMeasurements, schemaPhase, schemaPhaseClock, gateLatency, staleSkips, gateFreshReads)
}

// recordMetrics updates the metrics from a plan whose status was written.
func recordMetrics(rsvc *routingv1alpha1.RoutingService, plan rollout.Plan, taken []rollout.TakenMeasurement) {
	for _, o := range rolloutOutcomes {
		// Served at 0 until the first rollout with that outcome ends.
		rollouts.WithLabelValues(rsvc.Namespace, rsvc.Name, o)
	}
	for _, m := range taken {
		checkMeasurements.WithLabelValues(rsvc.Namespace, rsvc.Name, m.Check, string(m.Result.Phase)).Inc()
	}
	for _, e := range plan.Events {
		for _, m := range e.Measures {
			phaseDuration.WithLabelValues(rsvc.Namespace, rsvc.Name, m.Phase, m.Shard).Observe(m.Duration.Seconds())
		}
		if outcome := rollout.OutcomeOf(e.Reason); outcome != "" {
			rollouts.WithLabelValues(rsvc.Namespace, rsvc.Name, outcome).Inc()
		}
		if result := checkResults[e.Reason]; result != "" && e.Check != "" {
			shardChecks.WithLabelValues(rsvc.Namespace, rsvc.Name, e.Check, result).Inc()
		}
	}
	reason := ""
	for _, c := range plan.Status.Conditions {
		if c.Type == routingv1alpha1.ConditionReady {
			reason = c.Reason
		}
	}
	currentStep.DeletePartialMatch(prometheus.Labels{"namespace": rsvc.Namespace, "name": rsvc.Name})
	if reason != "" {
		currentStep.WithLabelValues(rsvc.Namespace, rsvc.Name, reason).Set(1)
	}
	promoted := 0
	for _, s := range plan.Status.Shards {
		if s.Step == routingv1alpha1.ShardStepPromoted && s.StepRevision == plan.Status.UpdateRevision {
			promoted++
		}
	}
	promotedShards.WithLabelValues(rsvc.Namespace, rsvc.Name).Set(float64(promoted))
	assumed := 0
	for _, r := range plan.Status.Schema.Revisions {
		if r.Assumed && len(r.Shards) > 0 {
			assumed++
		}
	}
	assumedRanges.WithLabelValues(rsvc.Namespace, rsvc.Name).Set(float64(assumed))
	recordSchemaPhase(rsvc.Namespace, rsvc.Name, &plan.Status.Schema)
	recordClusterMetrics(rsvc, plan.Status.Shards)
	recordAlertMetrics(rsvc, plan)
	recordScalingMetrics(rsvc, plan)
}

// forgetMetrics removes a deleted RoutingService's series.
func forgetMetrics(namespace, name string) {
	phaseDuration.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	rollouts.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	currentStep.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	promotedShards.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	assumedRanges.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	shardChecks.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	checkMeasurements.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	schemaPhase.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	schemaPhaseClock.set(namespace, name, "", nil)
	forgetClusterMetrics(namespace, name)
	forgetAlertMetrics(namespace, name)
	for _, g := range []*objectGauges{shardReplicas, shardScaledBy, shardMaxReplicas} {
		g.set(namespace, name, nil)
	}
}
