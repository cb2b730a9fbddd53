package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// schemaPlan is a plan whose status says the schema lifecycle is in phase since since.
func schemaPlan(phase routingv1alpha1.SchemaPhase, since *time.Time) rollout.Plan {
	var p rollout.Plan
	p.Status.Schema.Phase = phase
	if since != nil {
		t := metav1.NewTime(*since)
		p.Status.Schema.PhaseSince = &t
	}
	return p
}

// phaseMetrics is the text exposition of the two schema phase metrics of namespace "edge" (other
// tests of this package record RoutingServices of their own), sorted by label.
func phaseMetrics(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(schemaPhase, schemaPhaseClock)
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			other := false
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
				other = other || (l.GetName() == "namespace" && l.GetValue() != "edge")
			}
			if other {
				continue
			}
			fmt.Fprintf(&b, "%s{%s} %g\n", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	return b.String()
}

// The schema lifecycle's phase is one-hot over the five phases (every phase present, 1 for the
// current one), and the time in phase is counted from status.schema.phaseSince at each scrape, so
// it grows between status writes; a new phase moves both; an object without a phase, or with one
// this manager does not know (a hand-edited status), has no series; deleting the object removes
// them.
func TestSchemaPhaseMetrics(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	schemaPhaseClock.now = func() time.Time { return now }
	t.Cleanup(func() { schemaPhaseClock.now = time.Now; forgetMetrics("edge", "rs-a"); forgetMetrics("edge", "rs-b") })
	rsvc := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "rs-a"}}

	recordMetrics(rsvc, schemaPlan(routingv1alpha1.SchemaPhaseRollbackWindow, &t0), nil)
	want := `schemagate_schema_phase{name=rs-a,namespace=edge,phase=Complete} 0
schemagate_schema_phase{name=rs-a,namespace=edge,phase=Contracting} 0
schemagate_schema_phase{name=rs-a,namespace=edge,phase=Expanding} 0
schemagate_schema_phase{name=rs-a,namespace=edge,phase=RollbackWindow} 1
schemagate_schema_phase{name=rs-a,namespace=edge,phase=RollingOut} 0
schemagate_schema_phase_seconds{name=rs-a,namespace=edge,phase=RollbackWindow} 90
`
	if got := phaseMetrics(t); got != want {
		t.Fatalf("in the rollback window:\n%s\nwant:\n%s", got, want)
	}
	// The next scrape, with no status write between: the time in phase has grown.
	now = now.Add(30 * time.Second)
	if got := phaseMetrics(t); !strings.Contains(got, "schemagate_schema_phase_seconds{name=rs-a,namespace=edge,phase=RollbackWindow} 120\n") {
		t.Fatalf("30 s later:\n%s", got)
	}
	// The contract starts: the phase moves, and its clock starts again.
	t1 := now.Add(-5 * time.Second)
	recordMetrics(rsvc, schemaPlan(routingv1alpha1.SchemaPhaseContracting, &t1), nil)
	got := phaseMetrics(t)
	if !strings.Contains(got, "phase=Contracting} 1\n") || !strings.Contains(got, "phase=RollbackWindow} 0\n") ||
		!strings.Contains(got, "schemagate_schema_phase_seconds{name=rs-a,namespace=edge,phase=Contracting} 5\n") || strings.Count(got, "schemagate_schema_phase_seconds") != 1 {
		t.Fatalf("contracting:\n%s", got)
	}
	// A phaseSince in the future (a skewed clock) counts as 0, never negative.
	future := now.Add(time.Hour)
	recordMetrics(rsvc, schemaPlan(routingv1alpha1.SchemaPhaseComplete, &future), nil)
	if got := phaseMetrics(t); !strings.Contains(got, "schemagate_schema_phase_seconds{name=rs-a,namespace=edge,phase=Complete} 0\n") {
		t.Fatalf("future phaseSince:\n%s", got)
	}
	// A phase without phaseSince: the phase, no time in phase.
	recordMetrics(rsvc, schemaPlan(routingv1alpha1.SchemaPhaseExpanding, nil), nil)
	if got := phaseMetrics(t); !strings.Contains(got, "phase=Expanding} 1\n") || strings.Contains(got, "schemagate_schema_phase_seconds") {
		t.Fatalf("no phaseSince:\n%s", got)
	}
	// Unknown and empty phases: no series at all (the label's values stay the five phases).
	other := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "rs-b"}}
	recordMetrics(other, schemaPlan(routingv1alpha1.SchemaPhase(strings.Repeat("x", 300)), &t0), nil)
	recordMetrics(rsvc, schemaPlan("", &t0), nil)
	if got := phaseMetrics(t); got != "" {
		t.Fatalf("unknown and empty phases:\n%s", got)
	}
	recordMetrics(rsvc, schemaPlan(routingv1alpha1.SchemaPhaseRollingOut, &t0), nil)
	forgetMetrics("edge", "rs-a")
	if got := phaseMetrics(t); got != "" {
		t.Fatalf("after the object is deleted:\n%s", got)
	}
}

// clusterMetrics is the exposition of the two cluster metrics of namespace "edge".
func clusterMetrics(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(clusterState, clusterLastContact)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Fprintf(&b, "%s{%s} %g\n", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	return b.String()
}

// A cluster shard has one state series (its current state) and its last contact; a shard without
// a cluster has none; a new state replaces the old series; deleting the object removes them.
func TestClusterMetrics(t *testing.T) {
	rsvc := &routingv1alpha1.RoutingService{}
	rsvc.Namespace, rsvc.Name = "edge", "rs-a"
	contact := metav1.NewTime(time.Unix(1_800_000_000, 0))
	var plan rollout.Plan
	plan.Status.Shards = []routingv1alpha1.ShardStatus{
		{Name: "us-east"},
		{Name: "eu-west", Cluster: &routingv1alpha1.ShardClusterStatus{Name: "eu-1", State: routingv1alpha1.ClusterReachable, LastContactTime: &contact}},
	}
	recordMetrics(rsvc, plan, nil)
	want := "schemagate_shard_cluster_last_contact_timestamp_seconds{cluster=eu-1,name=rs-a,namespace=edge,shard=eu-west} 1.8e+09\n" +
		"schemagate_shard_cluster_state{cluster=eu-1,name=rs-a,namespace=edge,shard=eu-west,state=Reachable} 1\n"
	if got := clusterMetrics(t); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	plan.Status.Shards[1].Cluster.State = routingv1alpha1.ClusterUnreachable
	recordMetrics(rsvc, plan, nil)
	if got := clusterMetrics(t); !strings.Contains(got, "state=Unreachable} 1") || strings.Contains(got, "state=Reachable") {
		t.Fatalf("after the cut:\n%s", got)
	}
	forgetMetrics("edge", "rs-a")
	if got := clusterMetrics(t); got != "" {
		t.Fatalf("after the delete:\n%s", got)
	}
}
