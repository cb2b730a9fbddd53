//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/realstack"
	"github.com/schemagate/schemagate/test/story"
	"github.com/schemagate/schemagate/test/traffic"
)

// the route target's type change (a text URL becomes a JSON document) on the real
// stack, with the edge router's own golang-migrate files (examples/edge-router, the naive and the
// expand-contract sets) and 20 requests/s per region.

// typeChangeV1 is rs-a serving the text router v1 in three shards of 2 (bake 2 s, progress
// deadline 40 s), its database migrated to schema 1 by set's migration Job.
func typeChangeV1(ns, db, set string, compat *routingv1alpha1.SchemaCompatibility) *routingv1alpha1.RoutingService {
	r := realstack.TypeChangeV1("rs-a", ns, db, set, 2, compat)
	r.Spec.Strategy = routingv1alpha1.RolloutStrategy{BakeSeconds: ptr.To(int32(2)), ProgressDeadlineSeconds: ptr.To(int32(40))}
	return r
}

// allOn is Serving (story.Kit) with every shard on revision's image, 2 of 2 available.
func allOn(revision string) string {
	var out []string
	for _, r := range realRegions {
		out = append(out, fmt.Sprintf("%s=%s:%s:2/2", r.Shard, routerImage, revision))
	}
	return strings.Join(out, " ")
}

// readyAt waits until Ready is True for the current generation.
func readyAt(t *testing.T, ns string, timeout time.Duration, what string) {
	t.Helper()
	story.Eventually(t, timeout, what, func() error {
		r := kit().Get(t, ns)
		if c := story.Condition(r, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

// schemaVersion reads golang-migrate's version of the database at url.
func schemaVersion(t *testing.T, url string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int64
	if err := conn.QueryRow(context.Background(), `SELECT version FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// revisionOf is the revision (schemagate.io/revision) of the ReplicaSets running image.
func revisionOf(t *testing.T, ns, image string) string {
	t.Helper()
	for _, rs := range kit().ReplicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Labels[rollout.LabelRevision]
		}
	}
	t.Fatalf("no ReplicaSet runs %s", image)
	return ""
}

// jobsOf lists rs-a's Jobs that bring the database to version (migration or contract).
func jobsOf(t *testing.T, ns, version string) []string {
	var out []string
	for _, j := range kit().Jobs(t, ns) {
		if j.Labels[rollout.LabelSchemaVersion] == version && j.Labels[rollout.LabelComponent] != rollout.ComponentCheck {
			out = append(out, j.Name)
		}
	}
	return out
}

// TestIncidentR4WithoutWindow is the incident moved, not fixed: v1 declares no range (so it is
// assumed to run on every newer schema), and v2's migration changes the type of the column v1
// reads, in place. schemagate runs the migration first, as it must for v2, and from its commit
// every region still on v1 answers 404, until its shard is promoted; a rollback to v1 afterwards
// 404s as well.
func TestIncidentR4WithoutWindow(t *testing.T) {
	realStack(t)
	ns := realNamespace(t)
	db := database(t, pg, "r4without", 0)
	ctx := context.Background()
	if err := k8s.Create(ctx, typeChangeV1(ns, db, realstack.SetNaive, nil)); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	t.Cleanup(func() { gen.Stop() }) // when the test ends early; Stop again is harmless
	time.Sleep(3 * time.Second)      // measured: traffic before the change, for the table

	began := time.Now()
	kit().Update(t, ns, realstack.ToNaiveV2(db, 2*time.Second, nil))
	readyAt(t, ns, 3*time.Minute, "v2 promoted everywhere")
	t.Logf("v2 promoted in every shard %s after the update", time.Since(began).Round(time.Second))
	time.Sleep(2 * time.Second) // measured: traffic after the change, for the table
	rolling := gen.Stop()
	table(t, "R-4 naive migration, then the rollout", rolling)

	// The rollback: the spec reverted to v1, as Git would.
	gen = startTraffic(ns, services)
	time.Sleep(2 * time.Second) // measured: traffic before the change, for the table
	kit().Update(t, ns, realstack.ToTextV1(db, nil))
	story.Eventually(t, 3*time.Minute, "v1 serves every shard again", kit().ServingIs(t, ns, allOn("v1")))
	readyAt(t, ns, time.Minute, "v1 Ready")
	time.Sleep(3 * time.Second) // measured: traffic after the change, for the table
	back := gen.Stop()
	table(t, "R-4 naive migration, rollback to v1", back)

	if v := schemaVersion(t, db); v != 2 {
		t.Errorf("the database is at schema %d, want the naive migration's 2", v)
	}
	for _, r := range realRegions {
		during, after := rolling.Totals[r.Shard], back.Totals[r.Shard]
		t.Logf("%s: %d × 404 from v1 while its shard waited for v2; %d × 404 from v1 after the rollback",
			r.Shard, during.NotFoundBy["v1"], after.NotFoundBy["v1"])
		if during.NotFoundBy["v1"] == 0 || during.NotFoundBy["v2"] > 0 {
			t.Errorf("%s during the rollout: %+v (want 404s from v1, none from v2)", r.Shard, during)
		}
		if after.NotFoundBy["v1"] == 0 {
			t.Errorf("%s after the rollback: %+v (want v1 to 404 on the migrated column)", r.Shard, after)
		}
	}
}

// TestIncidentR4WithSchemagate: v1 declares the range it runs on, [1, 1]. The naive migration to 2
// would break it in every shard it serves, so it is refused before its Job exists: Stalled with
// reason IncompatibleRevision naming v1 and its shards; the database stays at 1 and not one
// request is affected.
func TestIncidentR4WithSchemagate(t *testing.T) {
	realStack(t)
	ns := realNamespace(t)
	db := database(t, pg, "r4with", 0)
	ctx := context.Background()
	if err := k8s.Create(ctx, typeChangeV1(ns, db, realstack.SetNaive, realstack.Range("1", "1"))); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	v1 := revisionOf(t, ns, routerImage+":v1")
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	t.Cleanup(func() { gen.Stop() }) // when the test ends early; Stop again is harmless
	time.Sleep(3 * time.Second)      // measured: traffic before the change, for the table

	kit().Update(t, ns, realstack.ToNaiveV2(db, 0, realstack.Range("2", "2")))
	noJob := func() {
		if jobs := jobsOf(t, ns, "2"); len(jobs) > 0 {
			t.Fatalf("the naive migration's Job %v exists: the migration was not refused although v1 (%s) runs on [1, 1] only; Stalled %+v",
				jobs, v1, story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled))
		}
	}
	story.Eventually(t, time.Minute, "the migration is refused: Stalled IncompatibleRevision", func() error {
		noJob()
		r := kit().Get(t, ns)
		stalled, schema := story.Condition(r, routingv1alpha1.ConditionStalled), story.Condition(r, routingv1alpha1.ConditionSchemaReady)
		if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != routingv1alpha1.ReasonIncompatibleRevision || stalled.ObservedGeneration != r.Generation {
			return fmt.Errorf("Stalled %+v", stalled)
		}
		if schema == nil || schema.Status != metav1.ConditionFalse {
			return fmt.Errorf("SchemaReady %+v", schema)
		}
		return nil
	})
	stalled := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
	t.Logf("Stalled=True %s: %s", stalled.Reason, stalled.Message)
	for _, name := range append([]string{v1}, "us-east", "eu-west", "ap-south") {
		if !strings.Contains(stalled.Message, name) {
			t.Errorf("the refusal does not name %s: %q", name, stalled.Message)
		}
	}
	story.Consistently(t, 5*time.Second, "no migration Job, v1 serves", func() error {
		noJob()
		return kit().ServingIs(t, ns, allOn("v1"))()
	})
	rep := gen.Stop()
	table(t, "R-4 with schemagate (v1 runs on [1, 1])", rep)
	if v := schemaVersion(t, db); v != 1 {
		t.Errorf("the database is at schema %d, want 1 (nothing migrated)", v)
	}
	for _, r := range realRegions {
		if tot := rep.Totals[r.Shard]; tot.NotFound > 0 || tot.Errors() > 0 || tot.Revisions["v1"] != tot.Requests {
			t.Errorf("%s: %+v (want every request answered 200 by v1)", r.Shard, tot)
		}
	}
}

// lifecycleLog records, by polling every 200 ms, when the moments of the schema lifecycle
// happened: each Job of a schema version created, each shard promoted, v1's pods (terminating
// ones included) last seen, and the lifecycle's phase changes.
type lifecycleLog struct {
	mu       sync.Mutex
	lines    []string
	seen     map[string]bool
	lastV1   time.Time // last poll that saw a v1 pod
	v1Gone   time.Time // first poll after lastV1 that saw none
	contract time.Time // the contract Job's creationTimestamp
	stop     chan struct{}
	done     chan struct{}
}

func watchLifecycle(t *testing.T, ns string) *lifecycleLog {
	l := &lifecycleLog{seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.poll(ns)
		}
	}()
	return l
}

func (l *lifecycleLog) once(key string, at time.Time, format string, args ...any) {
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.lines = append(l.lines, at.Format("15:04:05.0")+"  "+fmt.Sprintf(format, args...))
}

func (l *lifecycleLog) poll(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var pods corev1.PodList
	var jobs batchv1.JobList
	var r routingv1alpha1.RoutingService
	if k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}) != nil ||
		k8s.List(ctx, &jobs, client.InNamespace(ns)) != nil ||
		k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a"}, &r) != nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	v1 := 0
	for _, p := range pods.Items {
		if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == routerImage+":v1" {
			v1++
		}
	}
	switch {
	case v1 > 0:
		l.lastV1, l.v1Gone = now, time.Time{}
		delete(l.seen, "v1 gone")
	case !l.lastV1.IsZero() && l.v1Gone.IsZero():
		l.v1Gone = now
		l.once("v1 gone", now, "no v1 pod left in any shard (terminating included); last seen %s", l.lastV1.Format("15:04:05.0"))
	}
	for _, j := range jobs.Items {
		v := j.Labels[rollout.LabelSchemaVersion]
		if v == "" || j.Labels[rollout.LabelComponent] == rollout.ComponentCheck {
			continue
		}
		l.once("job "+j.Name, j.CreationTimestamp.Time, "Job %s (schema %s, %s) created", j.Name, v, j.Labels[rollout.LabelComponent])
		if v == "3" && l.contract.IsZero() {
			l.contract = j.CreationTimestamp.Time
		}
		if j.Status.Succeeded > 0 && j.Status.CompletionTime != nil {
			l.once("done "+j.Name, j.Status.CompletionTime.Time, "Job %s succeeded", j.Name)
		}
	}
	for _, s := range r.Status.Shards {
		if s.Step == routingv1alpha1.ShardStepPromoted || s.Step == routingv1alpha1.ShardStepRolledBack || s.Step == routingv1alpha1.ShardStepFailed {
			l.once(string(s.Step)+" "+s.Name+" "+s.StepRevision+" "+r.Status.UpdateRevision, now, "%s %s (revision %s)", s.Name, s.Step, s.StepRevision)
		}
	}
	if p := r.Status.Schema.Phase; p != "" {
		l.once("phase "+string(p)+" "+r.Status.UpdateRevision, now, "schema phase %s", p)
	}
	for _, c := range r.Status.Conditions {
		if c.Type == routingv1alpha1.ConditionContractReady || c.Type == routingv1alpha1.ConditionRollbackSafe ||
			(c.Type == routingv1alpha1.ConditionStalled && c.Status == metav1.ConditionTrue) {
			l.once(c.Type+string(c.Status)+c.Reason, now, "%s=%s %s", c.Type, c.Status, c.Reason)
		}
	}
}

// end stops the polling and logs the timeline.
func (l *lifecycleLog) end(t *testing.T) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("lifecycle timeline:\n%s", strings.Join(l.lines, "\n"))
}

// TestIncidentR5ExpandContract is the type change done as a lifecycle: expand (migration 2 adds
// the JSON column beside the text one and keeps them in step), roll v2 out through the three
// shards, wait out a 20 s rollback window, contract (migration 3 drops the text column). Before
// the contract a failure in a shard (v2 never ready in eu-west) rolls back to v1, which runs on
// schema 2 and serves; after it, a revert to v1 is refused (v1 cannot run on schema 3) and v2
// keeps serving. Over the whole run: 0 × 404 and 0 errors, and the contract Job starts only once
// no v1 pod exists.
func TestIncidentR5ExpandContract(t *testing.T) {
	// Not parallel: it asserts zero failed requests over minutes of traffic, which 2 cores do not
	// keep at a 1 s timeout beside the other replays.
	realStack(t)
	ns := realNamespace(t)
	db := database(t, pg, "r5", 0)
	ctx := context.Background()
	const window = 20 * time.Second
	rs := typeChangeV1(ns, db, realstack.SetExpandContract, realstack.Range("1", "2"))
	rs.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(20))
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	life := watchLifecycle(t, ns)
	defer life.end(t)
	gen := startTraffic(ns, services)
	t.Cleanup(func() { gen.Stop() }) // when the test ends early; Stop again is harmless
	time.Sleep(3 * time.Second)      // measured: traffic before the change, for the table

	// 1. Before the contract: v2 never becomes ready in eu-west. The expand runs, us-east is
	// promoted, eu-west misses its 20 s deadline, and both go back to v1, on schema 2.
	kit().Update(t, ns, realstack.ToExpandContractV2(db, window, "--unready-in-region=eu-west"))
	story.Eventually(t, 3*time.Minute, "the failure in eu-west rolls back to v1", func() error {
		c := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != routingv1alpha1.ReasonProgressDeadlineExceeded {
			return fmt.Errorf("Stalled %+v", c)
		}
		return kit().ServingIs(t, ns, allOn("v1"))()
	})
	time.Sleep(2 * time.Second) // measured: traffic after the change, for the table
	before := gen.Stop()
	table(t, "R-5 failure before the contract (rolled back to v1)", before)
	if v := schemaVersion(t, db); v != 2 {
		t.Fatalf("after the failed rollout the database is at %d, want the expand's 2", v)
	}
	if jobs := jobsOf(t, ns, "3"); len(jobs) > 0 {
		t.Fatalf("a contract Job %v exists after a failed rollout", jobs)
	}

	// 2. The fixed v2: three shards, the rollback window, the contract.
	gen = startTraffic(ns, services)
	began := time.Now()
	kit().Update(t, ns, realstack.ToExpandContractV2(db, window))
	story.Eventually(t, 3*time.Minute, "v2 promoted everywhere", kit().ServingIs(t, ns, allOn("v2")))
	promoted := time.Now()
	story.Eventually(t, 2*time.Minute, "the contract Job starts", func() error {
		if jobs := jobsOf(t, ns, "3"); len(jobs) == 0 {
			r := kit().Get(t, ns)
			return fmt.Errorf("no contract Job; ContractReady %+v, phase %q", story.Condition(r, routingv1alpha1.ConditionContractReady), r.Status.Schema.Phase)
		}
		return nil
	})
	story.Eventually(t, 2*time.Minute, "the contract is complete", func() error {
		r := kit().Get(t, ns)
		if r.Status.Schema.Phase != routingv1alpha1.SchemaPhaseComplete || r.Status.Schema.ConfirmedVersion != "3" {
			return fmt.Errorf("phase %q, confirmed %q, ContractReady %+v", r.Status.Schema.Phase, r.Status.Schema.ConfirmedVersion,
				story.Condition(r, routingv1alpha1.ConditionContractReady))
		}
		return nil
	})
	if v := schemaVersion(t, db); v != 3 {
		t.Errorf("after the contract the database is at %d, want 3", v)
	}
	life.mu.Lock()
	lastV1, v1Gone, contract := life.lastV1, life.v1Gone, life.contract
	life.mu.Unlock()
	t.Logf("update %s; v2 in every shard %s; last v1 pod seen %s (gone by %s); contract Job created %s (window %s)",
		began.Format("15:04:05.0"), promoted.Format("15:04:05.0"), lastV1.Format("15:04:05.0"), v1Gone.Format("15:04:05.0"),
		contract.Format("15:04:05"), window)
	// creationTimestamp has whole seconds: the Job must not be from a second before the last v1 pod.
	if v1Gone.IsZero() || contract.Before(lastV1.Truncate(time.Second)) {
		t.Errorf("the contract Job (created %s) started while a v1 pod existed (last seen %s)", contract, lastV1)
	}
	if contract.Sub(promoted) < window-2*time.Second {
		t.Errorf("the contract Job started %s after the last shard was promoted, before the %s window", contract.Sub(promoted), window)
	}
	time.Sleep(2 * time.Second) // measured: traffic after the change, for the table
	lifecycle := gen.Stop()
	table(t, "R-5 expand, three shards, window, contract", lifecycle)

	// 3. After the contract: the same rollback to v1 (the spec reverted, as Git would) is refused,
	// since v1 runs on [1, 2] and the database is at 3; v2 keeps serving.
	gen = startTraffic(ns, services)
	time.Sleep(2 * time.Second) // measured: traffic before the change, for the table
	kit().Update(t, ns, realstack.ToTextV1(db, realstack.Range("1", "2")))
	story.Eventually(t, time.Minute, "the rollback is refused", func() error {
		r := kit().Get(t, ns)
		c := story.Condition(r, routingv1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != routingv1alpha1.ReasonRollbackRefused || c.ObservedGeneration != r.Generation {
			return fmt.Errorf("Stalled %+v; serving %s", c, kit().Serving(t, ns))
		}
		return nil
	})
	refused := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
	t.Logf("Stalled=True %s: %s", refused.Reason, refused.Message)
	if !strings.Contains(refused.Message, "3") || !strings.Contains(refused.Message, "2") {
		t.Errorf("the refusal does not name both versions (database 3, v1's newest 2): %q", refused.Message)
	}
	story.Consistently(t, 5*time.Second, "v2 keeps serving every shard", kit().ServingIs(t, ns, allOn("v2")))
	after := gen.Stop()
	table(t, "R-5 revert to v1 after the contract (refused)", after)

	for _, rep := range []struct {
		name string
		rep  traffic.Report
		want string // who answers at the end
	}{{"before the contract", before, ""}, {"the lifecycle", lifecycle, ""}, {"after the contract", after, "v2"}} {
		for _, r := range realRegions {
			tot := rep.rep.Totals[r.Shard]
			if tot.NotFound > 0 || tot.Errors() > 0 || tot.Requests == 0 {
				t.Errorf("%s, %s: %+v (want no 404 and no error)", rep.name, r.Shard, tot)
			}
			if rep.want != "" && tot.Revisions[rep.want] != tot.Requests {
				t.Errorf("%s, %s: %+v (want every answer from %s)", rep.name, r.Shard, tot, rep.want)
			}
		}
	}
}
