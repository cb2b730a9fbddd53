package rollout

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// migrationJobs names the world's migration Jobs as "<version>#<attempt>", sorted.
func (w *world) migrationJobs() []string {
	var out []string
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration {
			out = append(out, j.Labels[LabelSchemaVersion]+"#"+j.Labels[LabelAttempt])
		}
	}
	sort.Strings(out)
	return out
}

// idle runs reconciles 10 s apart for a minute, past every Job's report lag, so pruning can act.
func (w *world) idle() {
	for i := 0; i < 6; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(10 * time.Second)
	}
}

// deletes returns the names of the Jobs a plan deletes.
func deletes(plan Plan) []string {
	var out []string
	for _, a := range plan.Actions {
		if a.Kind == DeleteJob {
			out = append(out, a.Job.Name)
		}
	}
	return out
}

// evidenceAtV2ThenFailures: steady on v1 (schema 1), v2 (schema 2) promoted, then v3 (schema 3)
// whose migration fails, retried until attempt n: the Job that confirmed schema 2 is older than
// every v3 attempt.
func evidenceAtV2ThenFailures(t *testing.T, limit int32, attempts int) *world {
	w := steady(t)
	w.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(limit)
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.update("app:v3", "3", "migrate:fail")
	w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	for n := 2; n <= attempts; n++ {
		w.annotate(routingv1alpha1.AnnotationRetry, fmt.Sprint(n))
		want := fmt.Sprintf("3#%d", n)
		w.run(100, func() bool {
			return slices.Contains(w.migrationJobs(), want) && w.stalledWith(routingv1alpha1.ReasonMigrationFailed)
		})
	}
	w.idle()
	return w
}

// The Job whose report confirms the schema the database is at is kept however old it is; the
// oldest others beyond the limit go, and the latest attempt stays. Nothing else changes: v2 keeps
// serving, the gate stays closed for v3, and the stored status still names the evidence.
func TestJobHistoryKeepsEvidenceOlderThanTheLimit(t *testing.T) {
	cases := []struct {
		limit int32
		want  []string
	}{
		{limit: 1, want: []string{"2#1", "3#5"}},
		{limit: 3, want: []string{"2#1", "3#4", "3#5"}},
		{limit: 10, want: []string{"1#1", "2#1", "3#1", "3#2", "3#3", "3#4", "3#5"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("limit %d", tc.limit), func(t *testing.T) {
			w := evidenceAtV2ThenFailures(t, tc.limit, 5)
			if got := w.migrationJobs(); !slices.Equal(got, tc.want) {
				t.Fatalf("migration Jobs %v, want %v", got, tc.want)
			}
			evidenceJob := MigrationJobName("rs-a", "2", 1)
			if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.ConfirmedBy != evidenceJob {
				t.Fatalf("status.schema %+v, want confirmed 2 by %s", st, evidenceJob)
			}
			if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
				t.Fatalf("shards %s", got)
			}
			if !w.stalledWith(routingv1alpha1.ReasonMigrationFailed) {
				t.Fatalf("conditions %+v", w.rsvc.Status.Conditions)
			}
			// Settled: the next reconciles delete nothing more.
			for i := 0; i < 3; i++ {
				if d := deletes(w.reconcile()); len(d) != 0 {
					t.Fatalf("settled, yet it deletes %v", d)
				}
				w.now = w.now.Add(time.Minute)
			}
		})
	}
}

// I5: a restarted manager (a fresh planner, the stored status lost or kept) deletes nothing more
// once pruned, and one killed after applying only part of a plan converges to the same Jobs.
func TestJobHistoryRestartConvergesToSameJobs(t *testing.T) {
	w := evidenceAtV2ThenFailures(t, 3, 5)
	want := w.migrationJobs()
	for _, name := range []string{"status kept", "status lost"} {
		o := w.observed()
		if name == "status lost" {
			o.RoutingService.Status = routingv1alpha1.RoutingServiceStatus{}
		}
		if d := deletes(Compute(o)); len(d) != 0 {
			t.Fatalf("%s: a restarted manager deletes %v", name, d)
		}
	}

	// The same history, killed after the first deletion of each plan.
	k := evidenceAtV2ThenFailures(t, 10, 5)
	k.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(3))
	for i := 0; i < 10; i++ {
		plan := Compute(k.observed())
		d := deletes(plan)
		if len(d) == 0 {
			break
		}
		k.deleteJob(d[0])
		k.now = k.now.Add(time.Second)
	}
	if got := k.migrationJobs(); !slices.Equal(got, want) {
		t.Fatalf("after restarts mid-prune: %v, want %v", got, want)
	}
}

// S-19 attack: a hand-edited status claiming a newer schema, confirmed by another Job, never
// makes the planner delete the Job that really confirms the schema, nor open the gate.
func TestJobHistoryForgedStatusKeepsEvidence(t *testing.T) {
	w := evidenceAtV2ThenFailures(t, 10, 5)
	w.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(1))
	evidenceJob := MigrationJobName("rs-a", "2", 1)
	forgeries := map[string]func(*routingv1alpha1.RoutingServiceStatus){
		"confirmed 9 by the latest attempt": func(st *routingv1alpha1.RoutingServiceStatus) {
			st.Schema.ConfirmedVersion, st.Schema.ConfirmedBy = "9", MigrationJobName("rs-a", "3", 5)
			st.Schema.RequiredVersion, st.Schema.MigrationJob, st.Schema.Attempt = "9", MigrationJobName("rs-a", "9", 1), 1
		},
		"confirmed 3 by an old attempt, SchemaReady True": func(st *routingv1alpha1.RoutingServiceStatus) {
			st.Schema.ConfirmedVersion, st.Schema.ConfirmedBy = "3", MigrationJobName("rs-a", "3", 1)
			for i := range st.Conditions {
				if st.Conditions[i].Type == routingv1alpha1.ConditionSchemaReady {
					st.Conditions[i].Status, st.Conditions[i].Reason = metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed
				}
			}
		},
		"no schema status at all": func(st *routingv1alpha1.RoutingServiceStatus) {
			st.Schema = routingv1alpha1.SchemaStatus{}
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			o := w.observed()
			forge(&o.RoutingService.Status)
			plan := Compute(o)
			d := deletes(plan)
			if slices.Contains(d, evidenceJob) {
				t.Fatalf("the forged status makes it delete the evidence %s: %v", evidenceJob, d)
			}
			if slices.Contains(d, MigrationJobName("rs-a", "3", 5)) {
				t.Fatalf("it deletes the latest attempt: %v", d)
			}
			if len(d) == 0 {
				t.Fatalf("limit 1 over 7 Jobs deletes nothing: the test proves nothing")
			}
			for _, a := range plan.Actions {
				if a.Kind == ScaleReplicaSet && a.Replicas > 0 && strings.Contains(a.ReplicaSet.Spec.Template.Spec.Containers[0].Image, "v3") {
					t.Fatalf("the forged status opens the gate: %v", a)
				}
			}
			if plan.Status.Schema.ConfirmedBy != evidenceJob || !schemaversion.Equal(plan.Status.Schema.ConfirmedVersion, "2") {
				t.Fatalf("status.schema %+v", plan.Status.Schema)
			}
		})
	}
}

// Jobs that still matter are never deleted, whatever the limit: one running, one finished less
// than 30 s ago, one still with terminating pods; Jobs of another RoutingService are not counted
// or touched.
func TestJobHistoryNeverDeletesLiveOrRecentJobs(t *testing.T) {
	w := evidenceAtV2ThenFailures(t, 1, 2) // 1#1, 2#1 (evidence), 3#1, 3#2 failed → 2#1, 3#2
	if got := w.migrationJobs(); !slices.Equal(got, []string{"2#1", "3#2"}) {
		t.Fatalf("before: %v", got)
	}
	// Hand-made migration Jobs controlled by rs-a (not evidence by name): old, finished, and each
	// still mattering for one reason.
	mk := func(name string, created time.Time, edit func(*batchv1.Job)) {
		j := NewMigrationJob(w.rsvc, "3", 1)
		j.Name, j.UID, j.CreationTimestamp = name, types.UID("uid-"+name), metav1.Time{Time: created}
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: created}}}
		edit(j)
		w.jobs[name] = j
	}
	old := w.now.Add(-time.Hour)
	mk("running", old, func(j *batchv1.Job) { j.Status.Conditions, j.Status.Active = nil, 1 })
	mk("terminating-pods", old, func(j *batchv1.Job) { j.Status.Terminating = ptr.To(int32(1)) })
	mk("just-finished", old, func(j *batchv1.Job) {
		j.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: w.now.Add(-10 * time.Second)}
	})
	mk("other-owner", old, func(j *batchv1.Job) {
		j.OwnerReferences[0].UID = "uid-someone-else"
	})
	mk("prunable", old, func(*batchv1.Job) {})
	plan := Compute(w.observed())
	if d := deletes(plan); !slices.Equal(d, []string{"prunable"}) {
		t.Fatalf("deletes %v, want only [prunable]", d)
	}
	// No watch event may come once just-finished's pod is surely in the cache: it looks again
	// then (finished 10 s ago, 30 s of report lag, 1 s margin).
	if plan.RequeueAfter == 0 || plan.RequeueAfter > 21*time.Second {
		t.Fatalf("requeue after %s, want at most 21s", plan.RequeueAfter)
	}
	w.now = w.now.Add(21 * time.Second)
	if d := deletes(Compute(w.observed())); !slices.Contains(d, "just-finished") {
		t.Fatalf("past its report lag, just-finished is not pruned: %v", d)
	}
}

// Shard-check Jobs of the update revision stay (a shard's checks are read from them); those of
// older revisions go beyond the limit.
func TestJobHistoryShardChecks(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(2))
	withShardCheck(w, "smoke", "verify:ok", false)
	revisions := []string{}
	for i, image := range []string{"app:v2", "app:v3", "app:v4"} {
		w.update(image, "1", "migrate:ok")
		revisions = append(revisions, Revision(&w.rsvc.Spec))
		w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
		w.idle()
		byRev := map[string]int{}
		for _, j := range w.jobs {
			if j.Labels[LabelComponent] == ComponentShardCheck {
				byRev[j.Labels[LabelRevision]]++
			}
		}
		if byRev[revisions[i]] != 3 {
			t.Fatalf("%s: the update revision's 3 check Jobs must stay: %v", image, byRev)
		}
		if total := byRev[revisions[i]] + func() int {
			n := 0
			for r, c := range byRev {
				if r != revisions[i] {
					n += c
				}
			}
			return n
		}(); i > 0 && total != 3 {
			t.Fatalf("%s: %d shard-check Jobs, want the current revision's 3 only (limit 2): %v", image, total, byRev)
		}
	}
}

// FuzzJobHistory checks pruning on FuzzCompute's clusters (fuzzObserved): every Job a plan deletes
// is one the RoutingService controls, finished, with no pod active or terminating, and not the
// evidence; and the cluster without those Jobs, computed again, confirms the same version by the
// same Job with the same SchemaReady status: pruning never changes what the gate sees.
func FuzzJobHistory(f *testing.F) {
	f.Add([]byte(nil), []byte(nil), int64(0))
	f.Add([]byte(nil), fuzzClusterSeed(func(c *fuzzCluster) {
		c.Jobs, c.JobHistoryLimit = []fuzzJob{{Condition: 1}, {Version: 1, Condition: 1}, {Version: 2, Condition: 2}}, 1
	}), int64(3600))
	f.Fuzz(func(t *testing.T, status, cluster []byte, clock int64) {
		o := fuzzObserved(status, cluster, clock)
		plan := Compute(o)
		gone := map[string]bool{}
		for _, a := range plan.Actions {
			if a.Kind != DeleteJob {
				continue
			}
			j := a.Job
			if !metav1.IsControlledBy(j, o.RoutingService) || !JobFinished(j) || !stopped(j) || j.DeletionTimestamp != nil {
				t.Fatalf("%s deletes a Job it must not: controlled %v, finished %v, stopped %v", a, metav1.IsControlledBy(j, o.RoutingService), JobFinished(j), stopped(j))
			}
			if j.Name == plan.Status.Schema.ConfirmedBy {
				t.Fatalf("%s deletes the evidence", a)
			}
			gone[string(j.UID)+"/"+j.Name] = true
		}
		if len(gone) == 0 {
			return
		}
		after := deepCopyObserved(o)
		after.Jobs = nil
		for _, j := range o.Jobs {
			if j == nil || !gone[string(j.UID)+"/"+j.Name] {
				after.Jobs = append(after.Jobs, j)
			}
		}
		again := Compute(after)
		a, b := plan.Status.Schema, again.Status.Schema
		if a.ConfirmedVersion != b.ConfirmedVersion || a.ConfirmedBy != b.ConfirmedBy {
			t.Fatalf("pruning changed the evidence: confirmed %q by %q, then %q by %q", a.ConfirmedVersion, a.ConfirmedBy, b.ConfirmedVersion, b.ConfirmedBy)
		}
		if x, y := conditionStatus(plan.Status, routingv1alpha1.ConditionSchemaReady), conditionStatus(again.Status, routingv1alpha1.ConditionSchemaReady); x != y {
			t.Fatalf("pruning changed SchemaReady: %s, then %s", x, y)
		}
	})
}
