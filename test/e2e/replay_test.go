//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/realstack"
	"github.com/schemagate/schemagate/test/story"
	"github.com/schemagate/schemagate/test/traffic"
)

// Public reports replayed on the local cluster with nothing faked: the real Job controller and
// garbage collector, migration pods run as processes by the node agent, the router's own
// golang-migrate migrations against PostgreSQL.

// schemaJobs lists the migration Jobs of rs-a in ns for version.
func schemaJobs(t *testing.T, ns, version string) []batchv1.Job {
	t.Helper()
	var out []batchv1.Job
	for _, j := range kit().Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration && j.Labels[rollout.LabelSchemaVersion] == version {
			out = append(out, j)
		}
	}
	return out
}

// jobPods lists the pods whose controller is the Job named job, terminating ones included.
func jobPods(t *testing.T, ns, job string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "Job" && ref.Name == job {
			out = append(out, p)
		}
	}
	return out
}

func getJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		t.Fatal(err)
	}
	return j
}

func jobCondition(j *batchv1.Job, ct batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == ct && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// readyOnGeneration is Ready=True for the RoutingService's current generation.
func readyOnGeneration(t *testing.T, ns string) func() error {
	return func() error {
		r := kit().Get(t, ns)
		if c := story.Condition(r, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	}
}

// Issue item: a sidecar keeps the migration Job running. The migration pod carries a proxy
// that never exits, as a plain second container or as a native sidecar (an init container with
// restartPolicy: Always). The migration container exits 0 with a clean report: the gate opens
// without waiting for the Job's deadline, the rollout finishes, and the migration runs once. A
// plain sidecar's Job is stopped once the report is recorded on it (its pod deleted, none
// started again), and the Job controller fails it at activeDeadlineSeconds, which changes
// nothing; a native sidecar is stopped by the kubelet and the Job completes. A retry annotated
// afterwards runs nothing: a successful migration is never run again.
func TestReplaySidecarKeepsTheMigrationJobRunning(t *testing.T) {
	realStack(t)
	for _, c := range []struct {
		name   string
		native bool
	}{{"plain", false}, {"native", true}} {
		t.Run(c.name, func(t *testing.T) {
			ns := realNamespace(t)
			db := database(t, pg, "sidecar_"+c.name, 0)
			ctx := context.Background()
			if err := k8s.Create(ctx, realRoutingService(ns, db)); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 3*time.Minute)
			const deadline = 30
			kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				toV2(db, time.Second)(r)
				r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(deadline))
				spec := &r.Spec.Schema.Migration.Template.Spec
				proxy := corev1.Container{Name: "proxy", Image: realstack.ProxyImage}
				if c.native {
					proxy.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
					spec.InitContainers = append(spec.InitContainers, proxy)
				} else {
					spec.Containers = append(spec.Containers, proxy)
				}
			})
			updated := time.Now()
			name := rollout.MigrationJobName("rs-a", "2", 1)
			story.Eventually(t, 90*time.Second, "SchemaReady=True for schema 2", func() error {
				r := kit().Get(t, ns)
				if c := story.Condition(r, routingv1alpha1.ConditionSchemaReady); c == nil || c.Status != metav1.ConditionTrue || r.Status.Schema.ConfirmedVersion != "2" {
					return fmt.Errorf("SchemaReady %+v, status.schema %+v", c, r.Status.Schema)
				}
				return nil
			})
			opened := time.Since(updated)
			job := getJob(t, ns, name)
			t.Logf("%s sidecar: gate open %.1fs after the update; the Job then: active %d, succeeded %d, failed %d", c.name, opened.Seconds(), job.Status.Active, job.Status.Succeeded, job.Status.Failed)
			if opened > (deadline-5)*time.Second {
				t.Errorf("the gate opened %s after the update: it waited for the Job's %d s deadline", opened.Round(time.Second), deadline)
			}
			if jobCondition(job, batchv1.JobFailed) != nil {
				t.Errorf("the Job had failed before the gate opened: %+v", job.Status.Conditions)
			}
			story.Eventually(t, 2*time.Minute, "v2 promoted everywhere", readyOnGeneration(t, ns))

			if c.native {
				// The kubelet (the node agent) stops the native sidecar once the migration
				// container has exited: the pod succeeds and the Job completes.
				story.Eventually(t, 30*time.Second, "the Job completes", func() error {
					if j := getJob(t, ns, name); jobCondition(j, batchv1.JobComplete) == nil {
						return fmt.Errorf("Job status %+v", j.Status)
					}
					return nil
				})
			} else {
				// The proxy keeps the pod running, and a drain deletes it now. Once the report is
				// recorded on the Job, schemagate stops the Job (parallelism 0): the Job
				// controller starts no other pod (it would after its 10 s failure backoff), so
				// the migration does not run again.
				for _, p := range jobPods(t, ns, name) {
					if err := k8s.Delete(ctx, &p); client.IgnoreNotFound(err) != nil {
						t.Fatal(err)
					}
				}
				story.Eventually(t, 20*time.Second, "the Job stopped and its pod gone", func() error {
					j := getJob(t, ns, name)
					if p := j.Spec.Parallelism; p == nil || *p != 0 {
						return fmt.Errorf("spec.parallelism %s, want 0", ptrString(p))
					}
					if pods := jobPods(t, ns, name); len(pods) > 0 {
						return fmt.Errorf("%d pods left", len(pods))
					}
					return nil
				})
				// The Job controller then fails the Job at its deadline.
				story.Eventually(t, time.Duration(deadline+40)*time.Second, "the Job controller ends the Job at its deadline", func() error {
					j := getJob(t, ns, name)
					if c := jobCondition(j, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonDeadlineExceeded {
						return fmt.Errorf("Job conditions %+v", j.Status.Conditions)
					}
					if pods := jobPods(t, ns, name); len(pods) > 0 {
						return fmt.Errorf("%d pods left", len(pods))
					}
					return nil
				})
				if getJob(t, ns, name).Annotations[rollout.AnnotationSchemaReport] == "" {
					t.Error("the migration container's report was not recorded on the Job")
				}
			}
			// A retry after the Job ended: nothing runs again.
			kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-the-sidecar"}
			})
			story.Consistently(t, 8*time.Second, "the gate stays open, nothing runs again", func() error {
				r := kit().Get(t, ns)
				if c := story.Condition(r, routingv1alpha1.ConditionSchemaReady); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("SchemaReady %+v", c)
				}
				if c := story.Condition(r, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("Ready %+v", c)
				}
				if jobs := schemaJobs(t, ns, "2"); len(jobs) != 1 {
					return fmt.Errorf("%d migration Jobs for schema 2: the migration ran again", len(jobs))
				}
				return nil
			})
			// Each pod the Job controller created is one SuccessfulCreate Event of the Job. (The
			// plain sidecar's pod, deleted by the stop, is counted in none of the Job's status
			// counters: the Job controller removed it.)
			if created := podsCreated(t, ns, name); created != 1 {
				t.Errorf("the Job controller created %d pods for %s; want 1: the migration ran again", created, name)
			}
			j := getJob(t, ns, name)
			if runs := j.Status.Succeeded + j.Status.Failed + j.Status.Active; runs > 1 {
				t.Errorf("the migration Job ran %d pods (succeeded %d, failed %d, active %d); want at most 1", runs, j.Status.Succeeded, j.Status.Failed, j.Status.Active)
			}
			if st := kit().Get(t, ns).Status.Schema; st.Attempt != 1 || st.ConfirmedBy != name {
				t.Errorf("status.schema %+v: want attempt 1, confirmed by %s", st, name)
			}
		})
	}
}

// ptrString is *p as text, or "unset".
func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// podsCreated counts the pods the Job controller created for Job ns/name: its SuccessfulCreate
// Events, each with its count (the Event recorder aggregates repeats).
func podsCreated(t *testing.T, ns, name string) int32 {
	t.Helper()
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == name && e.Reason == "SuccessfulCreate" {
			n += max(e.Count, 1)
		}
	}
	return n
}

// suspendOnCreate plays a queue such as Kueue on the real API server: a MutatingAdmissionPolicy
// sets spec.suspend on every Job created in ns with the label kueue.x-k8s.io/queue-name, as
// Kueue's webhook does; the test releases the Job later. It returns once the policy acts.
func suspendOnCreate(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	name := "queue-" + ns
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				}}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "queued",
				Expression: `has(object.metadata.labels) && 'kueue.x-k8s.io/queue-name' in object.metadata.labels`}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{suspend: true}}`}}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name}}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("the queue's admission policy: %v", err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	// The API server compiles and loads the policy asynchronously: probe until it acts.
	story.Eventually(t, 30*time.Second, "the queue's policy suspends a new Job", func() error {
		probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "probe"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(false), Template: corev1.PodTemplateSpec{Spec: realstack.OnProcessNodes(corev1.Container{Name: "c", Image: realstack.ProxyImage})}}}
		probe.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		if err := k8s.Create(ctx, probe); err != nil {
			return err
		}
		_ = k8s.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if !ptr.Deref(probe.Spec.Suspend, false) {
			return fmt.Errorf("created unsuspended")
		}
		return nil
	})
}

// Issue item: a suspended migration Job. The queue label set in
// spec.schema.migration.jobMetadata reaches the Job, which a queue (an admission policy here)
// suspends at creation; the real Job controller creates no pod meanwhile. Status says
// MigrationSuspended with suspendedSince; schemagate's deadline does not run while suspended;
// held longer than activeDeadlineSeconds it is Stalled ("needs a person"). Released, before or
// after that, the Job runs with its whole deadline, and its success opens the gate: the
// documented rule (suspended time does not count against the deadline).
func TestReplayQueuedMigration(t *testing.T) {
	realStack(t)
	const deadline = 15
	for _, c := range []struct {
		name string
		hold time.Duration
	}{{"released_before_the_deadline", 8 * time.Second}, {"released_after_the_deadline", 35 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			ns := realNamespace(t)
			db := database(t, pg, "queue_"+strconv.Itoa(int(c.hold.Seconds())), 0)
			ctx := context.Background()
			suspendOnCreate(t, ns)
			if err := k8s.Create(ctx, realRoutingService(ns, db)); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 3*time.Minute)
			kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				toV2(db, time.Second)(r)
				r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(deadline))
				r.Spec.Schema.Migration.JobMetadata = &routingv1alpha1.JobMetadata{Labels: map[string]string{"kueue.x-k8s.io/queue-name": "db"}}
			})
			name := rollout.MigrationJobName("rs-a", "2", 1)
			story.Eventually(t, 30*time.Second, "the migration Job", func() error {
				return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &batchv1.Job{})
			})
			job := getJob(t, ns, name)
			if job.Labels["kueue.x-k8s.io/queue-name"] != "db" || !ptr.Deref(job.Spec.Suspend, false) {
				t.Fatalf("Job labels %v, suspend %v: want the queue label on the Job, and the queue to have suspended it", job.Labels, job.Spec.Suspend)
			}
			story.Eventually(t, 20*time.Second, "MigrationSuspended with suspendedSince", func() error {
				r := kit().Get(t, ns)
				c := story.Condition(r, routingv1alpha1.ConditionSchemaReady)
				if c == nil || c.Reason != routingv1alpha1.ReasonMigrationSuspended || r.Status.Schema.SuspendedSince == nil || !strings.Contains(c.Message, "suspended since") {
					return fmt.Errorf("SchemaReady %+v, status.schema %+v", c, r.Status.Schema)
				}
				return nil
			})
			story.Consistently(t, c.hold, "suspended: no pod, no deadline", func() error {
				if pods := jobPods(t, ns, name); len(pods) > 0 {
					return fmt.Errorf("the suspended Job has pod %s", pods[0].Name)
				}
				if c := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionSchemaReady); c == nil || c.Reason == routingv1alpha1.ReasonMigrationDeadline {
					return fmt.Errorf("SchemaReady %+v", c)
				}
				return nil
			})
			if c.hold > deadline*time.Second {
				story.Eventually(t, 20*time.Second, "Stalled MigrationSuspended", func() error {
					s := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
					if s == nil || s.Status != metav1.ConditionTrue || s.Reason != routingv1alpha1.ReasonMigrationSuspended {
						return fmt.Errorf("Stalled %+v", s)
					}
					return nil
				})
			}
			released := metav1.Now()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				j := getJob(t, ns, name)
				j.Spec.Suspend = ptr.To(false)
				return k8s.Update(ctx, j)
			})
			if err != nil {
				t.Fatal(err)
			}
			story.Eventually(t, 2*time.Minute, "released: the migration runs and v2 rolls out", readyOnGeneration(t, ns))
			j := getJob(t, ns, name)
			if jobCondition(j, batchv1.JobComplete) == nil || j.Status.StartTime == nil || j.Status.StartTime.Before(&metav1.Time{Time: released.Add(-time.Second)}) {
				t.Errorf("Job status %+v: want it complete, started after its release at %s", j.Status, released.UTC().Format(time.RFC3339))
			}
			if jobs := schemaJobs(t, ns, "2"); len(jobs) != 1 {
				t.Errorf("%d migration Jobs for schema 2", len(jobs))
			}
			if st := kit().Get(t, ns).Status.Schema; st.ConfirmedBy != name || st.SuspendedSince != nil {
				t.Errorf("status.schema %+v: want schema 2 confirmed by %s, no longer suspended", st, name)
			}
		})
	}
}

// dbReads is an application's own reads of the routes table, beside the routers: each
// SELECT runs with a 1 s statement_timeout every 100 ms, so that a lock queue on the table shows
// as latency and errors (the routers read through their cache and keep answering).
type dbReads struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	tot    traffic.Totals
}

func startReads(t *testing.T, url string) *dbReads {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &dbReads{cancel: cancel}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 3000; i++ { // bounded: at most 5 min
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			began := time.Now()
			err := func() error {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				conn, err := pgx.Connect(cctx, url)
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				if _, err := conn.Exec(cctx, "SET statement_timeout = '1s'"); err != nil {
					return err
				}
				var n int
				return conn.QueryRow(cctx, "SELECT count(*) FROM routes").Scan(&n)
			}()
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.tot.Requests++
			r.tot.Latencies = append(r.tot.Latencies, time.Since(began))
			if err != nil {
				r.tot.ServerErr++
			} else {
				r.tot.OK++
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *dbReads) stop() traffic.Totals {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tot
}

// lockWaiters counts the sessions of database url that wait for a lock on routes.
func lockWaiters(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND l.relation = 'routes'::regclass AND a.query ILIKE '%ALTER TABLE routes%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// holdRoutes opens a session that holds ACCESS SHARE on routes in an open transaction (a long
// report, a dump); release commits it.
func holdRoutes(t *testing.T, url string) (release func()) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "LOCK TABLE routes IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Commit(context.Background())
			_ = conn.Close(context.Background())
		})
	}
	t.Cleanup(release)
	return release
}

var runningFor = regexp.MustCompile(`attempt 1 has been running for (\d+) (s|min)`)

// S-36: a migration stuck on a lock. Another session holds ACCESS SHARE on routes in an open
// transaction; migration 2's ALTER TABLE queues behind it, and every later read of routes queues
// behind the ALTER. While it waits, status says Migrating with how long attempt 1 has run and when
// the deadline ends it; one attempt waits, never two. Released in time, the migration finishes
// and v2 rolls out. Held past the deadline, the Job controller stops the attempt at
// activeDeadlineSeconds, its pods go, its ALTER leaves the lock queue (the tool cancels its
// statement on SIGTERM), and nothing starts a second attempt by itself. The routers keep
// answering from their cache: the table shows their latency, and that of direct reads of routes.
func TestStoryS36MigrationWaitsOnALock(t *testing.T) {
	realStack(t)
	for _, c := range []struct {
		name    string
		release bool
	}{{"released", true}, {"held_past_the_deadline", false}} {
		t.Run(c.name, func(t *testing.T) {
			ns := realNamespace(t)
			db := database(t, pg, "s36_"+c.name, 0)
			ctx := context.Background()
			if err := k8s.Create(ctx, realRoutingService(ns, db)); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 3*time.Minute)
			services := regionPods(rsvcSelector)
			waitServed(t, ns, services)

			// v1's latency before anything waits, for comparison.
			gen := startTraffic(ns, services)
			reads := startReads(t, db)
			time.Sleep(8 * time.Second) // measured: traffic before the change, for the table
			latencyTable(t, "S-36 "+c.name+": before", gen.Snapshot(), reads.stop())
			gen.Stop()

			release := holdRoutes(t, db)
			gen = startTraffic(ns, services)
			reads = startReads(t, db)
			const deadline = 40
			kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				toV2(db, 0)(r)
				r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(deadline))
			})
			name := rollout.MigrationJobName("rs-a", "2", 1)
			story.Eventually(t, 60*time.Second, "migration 2's ALTER TABLE waits for the lock", func() error {
				if n := lockWaiters(t, db); n != 1 {
					return fmt.Errorf("%d sessions wait for routes", n)
				}
				return nil
			})
			waitBegan := time.Now()
			story.Eventually(t, 30*time.Second, "status says how long attempt 1 has been running", func() error {
				cond := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionSchemaReady)
				if cond == nil || cond.Reason != routingv1alpha1.ReasonMigrating {
					return fmt.Errorf("SchemaReady %+v", cond)
				}
				m := runningFor.FindStringSubmatch(cond.Message)
				if m == nil || (m[2] == "s" && m[1] == "0") || !strings.Contains(cond.Message, "deadline ends it at") {
					return fmt.Errorf("SchemaReady message %q", cond.Message)
				}
				return nil
			})
			t.Logf("while it waits: %s", story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionSchemaReady).Message)
			story.Consistently(t, 5*time.Second, "one attempt, one waiting session", func() error {
				if jobs := schemaJobs(t, ns, "2"); len(jobs) != 1 {
					return fmt.Errorf("%d migration Jobs", len(jobs))
				}
				if n := lockWaiters(t, db); n != 1 {
					return fmt.Errorf("%d sessions wait for routes", n)
				}
				return nil
			})
			if c.release {
				time.Sleep(time.Until(waitBegan.Add(15 * time.Second)))
				latencyTable(t, "S-36 "+c.name+": while the migration waits", gen.Snapshot(), reads.stop())
				release()
				story.Eventually(t, 2*time.Minute, "the migration finishes and v2 rolls out", readyOnGeneration(t, ns))
				if jobs := schemaJobs(t, ns, "2"); len(jobs) != 1 {
					t.Errorf("%d migration Jobs for schema 2", len(jobs))
				}
			} else {
				story.Eventually(t, time.Duration(deadline+40)*time.Second, "the deadline ends attempt 1", func() error {
					r := kit().Get(t, ns)
					s := story.Condition(r, routingv1alpha1.ConditionStalled)
					if s == nil || s.Status != metav1.ConditionTrue || (s.Reason != routingv1alpha1.ReasonMigrationDeadline && s.Reason != routingv1alpha1.ReasonSchemaDirty) {
						return fmt.Errorf("Stalled %+v", s)
					}
					return nil
				})
				t.Logf("after the deadline: %s", story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled).Message)
				story.Eventually(t, 30*time.Second, "attempt 1's pods are gone, and its ALTER left the lock queue", func() error {
					if pods := jobPods(t, ns, name); len(pods) > 0 {
						return fmt.Errorf("%d pods left", len(pods))
					}
					if n := lockWaiters(t, db); n != 0 {
						return fmt.Errorf("%d sessions still wait for routes after attempt 1's pods are gone", n)
					}
					return nil
				})
				if jobs := schemaJobs(t, ns, "2"); len(jobs) != 1 {
					t.Errorf("%d migration Jobs for schema 2: an attempt started by itself", len(jobs))
				}
				latencyTable(t, "S-36 "+c.name+": waiting, then stopped at the deadline", gen.Snapshot(), reads.stop())
				release()
			}
			rep := gen.Stop()
			for _, r := range realRegions {
				if tot := rep.Totals[r.Shard]; tot.NotFound > 0 || tot.Errors() > 0 {
					t.Errorf("%s: %d × 404, %d errors while the migration waited", r.Shard, tot.NotFound, tot.Errors())
				}
			}
		})
	}
}

// latencyTable prints the routers' latency per region and that of the direct reads of routes,
// and keeps the table for the suite's summary.
func latencyTable(t *testing.T, scenario string, regions map[string]traffic.Totals, reads traffic.Totals) {
	t.Helper()
	rep := traffic.Report{Totals: map[string]*traffic.Totals{}}
	for _, r := range realRegions {
		tot := regions[r.Shard]
		rep.Regions = append(rep.Regions, r.Shard)
		rep.Totals[r.Shard] = &tot
	}
	rep.Regions = append(rep.Regions, "reads of routes")
	rep.Totals["reads of routes"] = &reads
	var b strings.Builder
	rep.LatencyTable(&b, scenario)
	t.Logf("\n%s", b.String())
	tablesMu.Lock()
	tables = append(tables, b.String())
	tablesMu.Unlock()
}
