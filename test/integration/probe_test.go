package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemadiff"
	"github.com/schemagate/schemagate/test/story"
)

// finishProbe finishes a probe Job as its pod would: every step exits 0 and probe-report leaves
// the probe report as its termination message. It never touches the database.
func (f *fakeCluster) finishProbe(ctx context.Context, j *batchv1.Job) error {
	var migrate string
	for _, c := range j.Spec.Template.Spec.InitContainers {
		if c.Name == rollout.ProbeContainerMigrate {
			migrate = c.Image
		}
	}
	change := schemadiff.Change{Class: schemadiff.Expand, Kind: schemadiff.ColumnAdded, Table: "routes", Column: "weight", To: "integer"}
	if strings.Contains(migrate, "breaking") {
		change = schemadiff.Change{Class: schemadiff.Breaking, Kind: schemadiff.ColumnType, Table: "routes", Column: "target", From: "text", To: "json"}
	}
	report, err := schemadiff.NewReport([]schemadiff.Change{change}).Encode()
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: j.Name + "-", Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *j.Spec.Template.Spec.DeepCopy()}
	if err := f.c.Create(ctx, pod); err != nil {
		return err
	}
	done := func(name, message string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: message,
			StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, done(c.Name, ""))
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{done(rollout.ProbeContainerReport, string(report))}
	if err := f.c.Status().Update(ctx, pod); err != nil {
		return err
	}
	now := metav1.Now()
	j.Status.StartTime, j.Status.Succeeded, j.Status.CompletionTime = &now, 1, &now
	j.Status.Conditions = append(j.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastProbeTime: now, LastTransitionTime: now})
	return f.c.Status().Update(ctx, j)
}

// The incident's change with nothing declared, against the API server: v1 (no range declared)
// serves; v2's migration turns a text column into json. The probe Job finds it, the migration
// is refused before its Job exists (BreakingChange, naming the change and v1), and every shard
// keeps v1. With allowBreakingMigration it runs and v2 rolls out; then a spec reverted to v1 is
// refused (RollbackRefused): v1's narrowed range is read back from the probe Job in the cluster.
func TestProbeStory(t *testing.T) {
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	r := story.Fixture(ns)
	r.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{DatabaseImage: "postgres:16"}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	v1 := kit.Get(t, ns).Status.StableRevision

	kit.Update(t, ns, story.ToV2("app:v2", "migrate:breaking"))
	refused := func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonBreakingChange)(); err != nil {
			return err
		}
		c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionSchemaReady)
		for _, want := range []string{"routes.target: text → json", "revision " + v1 + " (runs on [1, 1] (assumed)) serves us-east, eu-west, ap-south", "allowBreakingMigration"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("SchemaReady message %q does not say %q", c.Message, want)
			}
		}
		return nil
	}
	story.Eventually(t, 30*time.Second, "the incident's migration refused by its probe", refused)
	story.Consistently(t, 3*time.Second, "no migration Job to 2, v1 serving", func() error {
		for _, j := range kit.Jobs(t, ns) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration && j.Labels[rollout.LabelSchemaVersion] == "2" {
				return fmt.Errorf("migration Job %s exists", j.Name)
			}
		}
		if got := kit.Serving(t, ns); got != story.AllV1 {
			return fmt.Errorf("serving %q", got)
		}
		return nil
	})
	if fake.schema(ns) != "1" {
		t.Fatalf("the database moved to %s", fake.schema(ns))
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Schema.AllowBreakingMigration = true })
	story.Eventually(t, 60*time.Second, "v2 everywhere with the opt-in", kit.ServingIs(t, ns, strings.ReplaceAll(story.AllV1, "v1", "v2")))
	probes := 0
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentProbe && j.Labels[rollout.LabelSchemaVersion] == "2" {
			probes++
		}
	}
	if probes != 1 {
		t.Fatalf("%d probe Jobs for schema 2: a probe runs once per version and template", probes)
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v1"
		r.Spec.Schema.Version = "1"
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
		r.Spec.Schema.AllowBreakingMigration = false
	})
	story.Eventually(t, 30*time.Second, "the rollback to v1 refused", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonRollbackRefused))
	story.Consistently(t, 2*time.Second, "v2 keeps serving", kit.ServingIs(t, ns, strings.ReplaceAll(story.AllV1, "v1", "v2")))
}
