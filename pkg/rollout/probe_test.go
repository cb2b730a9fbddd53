package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// playProbe plays a probe Job one tick after it was created, by the image of its migrate step:
// "breaking" finds the incident's change (a text column turned json), "fail" fails on the
// scratch database, "probe-broken" in the database image fails the copy step, "hang" never
// ends, "untouched" leaves no trace on the scratch database; anything else finds a new nullable
// column. The probe never touches the database.
func (w *world) playProbe(j *batchv1.Job) {
	var migrate, db string
	for _, c := range j.Spec.Template.Spec.InitContainers {
		switch c.Name {
		case ProbeContainerMigrate:
			migrate = c.Image
		case ProbeContainerCopy:
			db = c.Image
		}
	}
	if strings.Contains(migrate, "hang") {
		return
	}
	var inits []corev1.ContainerStatus
	exit := func(name string, code int32, msg string) {
		inits = append(inits, corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}})
	}
	report, failed := "", false
	exit(ProbeContainerTools, 0, "")
	switch {
	case strings.Contains(db, "probe-broken"):
		exit(ProbeContainerCopy, 2, "pg_dump: error: connection refused")
		failed = true
	case strings.Contains(migrate, "fail") && !strings.Contains(migrate, "breaking"):
		// "breaking-fail" passes its probe (breaking) and fails on the database.
		exit(ProbeContainerCopy, 0, "")
		exit(ProbeContainerMigrate, 1, "ERROR: column \"target\" cannot be cast automatically to type json")
		failed = true
	default:
		exit(ProbeContainerCopy, 0, "")
		exit(ProbeContainerMigrate, 0, "")
		change := schemadiff.Change{Class: schemadiff.Expand, Kind: schemadiff.ColumnAdded, Table: "routes", Column: "weight", To: "integer"}
		if strings.Contains(migrate, "untouched") {
			change = schemadiff.Change{Class: schemadiff.Conditional, Kind: schemadiff.NothingChanged}
		}
		if strings.Contains(migrate, "breaking") {
			change = schemadiff.Change{Class: schemadiff.Breaking, Kind: schemadiff.ColumnType, Table: "routes", Column: "target", From: "text", To: "json"}
		}
		b, err := schemadiff.NewReport([]schemadiff.Change{change}).Encode()
		if err != nil {
			w.t.Fatal(err)
		}
		report = string(b)
	}
	j.Status.Active = 0
	phase := corev1.PodSucceeded
	if failed {
		phase = corev1.PodFailed
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	} else {
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: w.now}}}
	}
	var containers []corev1.ContainerStatus
	if !failed {
		containers = []corev1.ContainerStatus{{Name: ProbeContainerReport, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: report}}}}
	}
	w.seq++
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", j.Name, w.seq), Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
			UID: types.UID(fmt.Sprintf("pod-%d", w.seq)), CreationTimestamp: metav1.Time{Time: w.now},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: inits, ContainerStatuses: containers},
	}
	w.pods[pod.Name] = pod
}

// probing is a steady world (v1, its range assumed, serving every shard) whose manager runs
// migration probes.
func probing(t *testing.T) *world {
	w := steady(t)
	w.probe = &ProbeImages{Tools: "schemagate:dev", Database: "postgres:16"}
	return w
}

// The incident's change with nothing declared: the probe finds the breaking change, the
// migration is refused before its Job exists, every shard keeps serving v1; with
// allowBreakingMigration it runs, and a rollback to v1 is refused afterwards.
func TestProbeRefusesTheIncidentsChangeWithNothingDeclared(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:breaking")
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	t.Logf("SchemaReady: %s", c.Message)
	if c.Reason != routingv1alpha1.ReasonBreakingChange {
		t.Fatalf("SchemaReady = %s: %s, want BreakingChange", c.Reason, c.Message)
	}
	for _, want := range []string{"routes.target: text → json", "[1, 1] (assumed)", "us-east", "allowBreakingMigration", "spec.schema.contract", "spec.schema.compatibility"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, c.Message)
		}
	}
	if got := w.jobsOf(ComponentMigration); len(got) != 1 {
		t.Fatalf("migration Jobs %v: only v1's may exist", got)
	}
	if got := w.jobsOf(ComponentProbe); len(got) != 1 {
		t.Fatalf("probe Jobs %v, want one", got)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("every shard keeps v1: %s", got)
	}
	if pr := w.rsvc.Status.Schema.Probe; pr == nil || pr.Verdict != "breaking" || pr.From != "1" || !strings.Contains(pr.Changes, "routes.target") {
		t.Fatalf("status.schema.probe = %+v", pr)
	}
	if w.confirmed != "1" {
		t.Fatalf("the database moved to %s", w.confirmed)
	}

	// Planned downtime, chosen by a person: the migration runs (the probe is not run again).
	w.rsvc.Spec.Schema.AllowBreakingMigration = true
	w.rsvc.Generation++
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if got := w.jobsOf(ComponentProbe); len(got) != 1 {
		t.Fatalf("probe Jobs %v: a probe runs once per version and template", got)
	}
	if !w.sawEvent(routingv1alpha1.ReasonBreakingChange) {
		t.Error("no BreakingChange Event when the breaking migration started")
	}

	// A rollback to v1 is refused: its range is narrowed by the probe, recorded in the cluster.
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.AllowBreakingMigration = false
	w.run(30, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonRollbackRefused {
		t.Fatalf("SchemaReady = %s: %s, want RollbackRefused", c.Reason, c.Message)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("v2 keeps serving: %s", got)
	}
}

// An expand passes: the probe runs once, then the migration, then the rollout.
func TestProbeLetsAnExpandThrough(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:v2")
	plan := w.reconcile()
	if len(plan.Actions) != 1 || plan.Actions[0].Job == nil || plan.Actions[0].Job.Labels[LabelComponent] != ComponentProbe {
		t.Fatalf("the first action must be the probe Job: %v", plan.Actions)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonProbing {
		t.Fatalf("SchemaReady = %s, want Probing", c.Reason)
	}
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if pr := w.rsvc.Status.Schema.Probe; pr == nil || pr.Verdict != "expand" {
		t.Fatalf("status.schema.probe = %+v", pr)
	}
	if got := w.jobsOf(ComponentProbe); len(got) != 1 {
		t.Fatalf("probe Jobs %v, want one", got)
	}
	// The probe never ran beside the migration: it finished before the migration Job existed.
	var probeEnd, migrationStart int
	for i, l := range w.log {
		if strings.Contains(l, "CreateJob rs-a-schema-") && strings.Contains(l, "schema 2 required") {
			migrationStart = i
		}
		if strings.Contains(l, "CreateJob rs-a-probe-") {
			probeEnd = i
		}
	}
	if migrationStart <= probeEnd {
		t.Fatalf("the migration Job was created before the probe's:\n%s", strings.Join(w.log, "\n"))
	}
}

// A migration that fails on the scratch database is not run on the database; a retry probes
// again.
func TestProbeHoldsAMigrationThatFailsOnScratch(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c.Reason != routingv1alpha1.ReasonProbeMigrationFailed || !strings.Contains(c.Message, "cannot be cast") {
		t.Fatalf("SchemaReady = %s: %s", c.Reason, c.Message)
	}
	if got := w.jobsOf(ComponentMigration); len(got) != 1 {
		t.Fatalf("migration Jobs %v: the failing migration must not run", got)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "again")
	w.reconcile()
	if got := w.jobsOf(ComponentProbe); len(got) != 2 {
		t.Fatalf("probe Jobs %v: a retry starts probe attempt 2", got)
	}
}

// A probe that cannot run: with onFailure Proceed the migration starts with a Warning Event;
// with Hold it waits, Stalled.
func TestProbeThatCannotRun(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			w := probing(t)
			w.probe.Database = "postgres:probe-broken"
			if hold {
				w.rsvc.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{OnFailure: routingv1alpha1.ProbeFailureHold}
			}
			w.update("app:v2", "2", "migrate:v2")
			if !hold {
				w.run(200, func() bool {
					return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
				})
				if !w.sawEvent(routingv1alpha1.ReasonProbeFailed) {
					t.Error("no ProbeFailed Warning Event")
				}
				if pr := w.rsvc.Status.Schema.Probe; pr == nil || pr.Verdict != ProbeUnavailable || !strings.Contains(pr.Changes, "probe-copy") {
					t.Fatalf("status.schema.probe = %+v", pr)
				}
				return
			}
			w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
			if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonProbeFailed {
				t.Fatalf("SchemaReady = %s: %s", c.Reason, c.Message)
			}
			if got := w.jobsOf(ComponentMigration); len(got) != 1 {
				t.Fatalf("migration Jobs %v", got)
			}
		})
	}
}

// A declared range is never narrowed: the probe's breaking change is a Warning Event, and the
// migration runs.
func TestProbeLeavesADeclaredRangeStanding(t *testing.T) {
	w := newWorld(t)
	w.rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "2"}
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.probe = &ProbeImages{Tools: "schemagate:dev", Database: "postgres:16"}
	w.update("app:v2", "2", "migrate:breaking")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if !w.sawEvent(routingv1alpha1.ReasonBreakingChange) {
		t.Error("no BreakingChange Warning Event for the contradicted declaration")
	}
}

// mode Off runs no probe.
func TestProbeOff(t *testing.T) {
	w := probing(t)
	w.rsvc.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{Mode: routingv1alpha1.ProbeModeOff}
	w.update("app:v2", "2", "migrate:breaking")
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if got := w.jobsOf(ComponentProbe); len(got) != 0 {
		t.Fatalf("probe Jobs %v with mode Off", got)
	}
}

// What a probe found outlives its pod: a breaking verdict read once and recorded on the Job still
// refuses the migration after the pod is gone (a ttlSecondsAfterFinished, PodGC).
func TestProbeVerdictOutlivesItsPod(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:breaking")
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	for name, pod := range w.pods {
		if pod.Labels[LabelComponent] == ComponentProbe {
			delete(w.pods, name)
		}
	}
	for i := 0; i < 5; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonBreakingChange {
		t.Fatalf("SchemaReady = %s: %s, want BreakingChange with the probe's pod gone", c.Reason, c.Message)
	}
	if got := w.jobsOf(ComponentMigration); len(got) != 1 {
		t.Fatalf("migration Jobs %v", got)
	}
}

// The narrowing outlives the migration Job it anchors: once a breaking migration ran (opt-in), a
// later migration ran too and the breaking one's Job is gone, a spec reverted to v1 is still
// refused.
func TestProbeNarrowingOutlivesTheMigrationJob(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:breaking")
	w.rsvc.Spec.Schema.AllowBreakingMigration = true
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	w.rsvc.Spec.Schema.AllowBreakingMigration = false
	w.update("app:v3", "3", "migrate:v3")
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	for _, name := range w.jobsOf(ComponentMigration) {
		if w.jobs[name].Labels[LabelSchemaVersion] == "2" {
			w.deleteJob(name)
		}
	}
	w.update("app:v1", "1", "migrate:ok")
	w.run(30, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonRollbackRefused {
		t.Fatalf("SchemaReady = %s: %s, want RollbackRefused", c.Reason, c.Message)
	}
}

// A breaking migration that failed before it reached the database does not block its fix: the
// team replaces it with an expand, which is probed and runs.
func TestProbeOfAFailedBreakingMigrationDoesNotBlockItsFix(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:breaking-fail")
	w.rsvc.Spec.Schema.AllowBreakingMigration = true
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonMigrationFailed {
		t.Fatalf("SchemaReady = %s: %s, want MigrationFailed", c.Reason, c.Message)
	}
	w.rsvc.Spec.Schema.AllowBreakingMigration = false
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:v2-expand"
	w.rsvc.Generation++
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if got := w.jobsOf(ComponentProbe); len(got) != 2 {
		t.Fatalf("probe Jobs %v, want the breaking one and the fix's", got)
	}
}

// A migration template that names its database in its args cannot be pointed at the scratch
// database: no probe Job is created (it would migrate that database); with onFailure Proceed the
// migration starts with a ProbeFailed Warning Event, with Hold it waits, Stalled, and says why.
func TestProbeNeverRunsAMigrationThatNamesItsDatabase(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			w := probing(t)
			w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Args = []string{"-path", "/m", "-database", "postgres://edge@primary.db/edge", "up"}
			if hold {
				w.rsvc.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{OnFailure: routingv1alpha1.ProbeFailureHold}
			}
			w.update("app:v2", "2", "migrate:v2")
			if !hold {
				w.run(200, func() bool {
					return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
				})
				if !w.sawEvent(routingv1alpha1.ReasonProbeFailed) {
					t.Error("no ProbeFailed Warning Event")
				}
			} else {
				w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
				c := w.condition(routingv1alpha1.ConditionSchemaReady)
				if c.Reason != routingv1alpha1.ReasonProbeFailed || !strings.Contains(c.Message, "names its database") || !strings.Contains(c.Message, "$(DATABASE_URL)") {
					t.Fatalf("SchemaReady = %s: %s", c.Reason, c.Message)
				}
				if got := w.jobsOf(ComponentMigration); len(got) != 1 {
					t.Fatalf("migration Jobs %v", got)
				}
			}
			if got := w.jobsOf(ComponentProbe); len(got) != 0 {
				t.Fatalf("probe Jobs %v for a migration that names its database", got)
			}
		})
	}
	// $(DATABASE_URL) in args is the variable, which the probe points at its scratch database.
	w := probing(t)
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Args = []string{"-path", "/m", "-database", "$(DATABASE_URL)", "up"}
	w.update("app:v2", "2", "migrate:v2")
	w.reconcile()
	if got := w.jobsOf(ComponentProbe); len(got) != 1 {
		t.Fatalf("probe Jobs %v, want one", got)
	}
}

// A migration that left no trace on the scratch database (it may have run on another one): a
// ProbeSawNoChange Warning Event, once, and the migration starts.
func TestProbeSawNoChange(t *testing.T) {
	w := probing(t)
	w.update("app:v2", "2", "migrate:untouched")
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	n := 0
	for _, e := range w.events {
		if e.Reason == EventProbeSawNoChange {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d ProbeSawNoChange Events, want 1", n)
	}
}
