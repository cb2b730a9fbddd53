package rollout

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// sidecarPod adds a running pod of Job name whose migration container ("migrate") terminated
// with exit code 0 and message, beside a proxy that never exits, injected before or after it.
func (w *world) sidecarPod(name, message string, proxyFirst bool) {
	j := w.jobs[name]
	migrate := corev1.ContainerStatus{Name: "migrate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: message, FinishedAt: metav1.Time{Time: w.now}}}}
	proxy := corev1.ContainerStatus{Name: "istio-proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	containers := []corev1.Container{{Name: "migrate"}, {Name: "istio-proxy"}}
	if proxyFirst {
		containers = []corev1.Container{{Name: "istio-proxy"}, {Name: "migrate"}}
	}
	w.pods[name+"-sidecar"] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-sidecar", Namespace: j.Namespace, Labels: j.Spec.Template.Labels, UID: types.UID(name + "-sidecar"),
			CreationTimestamp: j.CreationTimestamp, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec:   corev1.PodSpec{Containers: containers},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{proxy, migrate}},
	}
}

// sidecarMigration is the steady world updated to v2 and schema 2, whose migration Job's pod
// (a proxy beside the migration container, before it with proxyFirst) has migrated the database
// to 2 and reported so, the proxy still running; job is the Job's name.
func sidecarMigration(t *testing.T, proxyFirst bool) (w *world, job string) {
	t.Helper()
	w = steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job = MigrationJobName("rs-a", "2", 1)
	w.confirmed = "2"
	w.sidecarPod(job, gateReport(t, "2", false, w.now), proxyFirst)
	return w, job
}

// A migration pod with a sidecar that never exits: the migration container's clean report is the
// evidence once it has terminated, whatever the proxy does. It is recorded on the Job, so when
// the Job controller fails the Job at its deadline (DeadlineExceeded) and deletes the pod, the
// gate stays open, the rollout finishes and the migration never runs again.
func TestSidecarMigrationContainerReportIsTheEvidence(t *testing.T) {
	for _, proxyFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "proxy after", true: "proxy before"}[proxyFirst], func(t *testing.T) {
			w, job := sidecarMigration(t, proxyFirst)
			w.untilStep(20, func() bool { return w.isTrue(routingv1alpha1.ConditionSchemaReady) })
			if w.jobs[job].Annotations[AnnotationSchemaReport] == "" {
				t.Fatalf("the report is not recorded on the Job: %v", w.jobs[job].Annotations)
			}
			w.run(300, func() bool { return w.rsvc.Status.PromotedShards == "1/3" })
			w.tick() // the controllers act on what that reconcile did
			// The deadline: the Job controller fails the Job and deletes its pod.
			j := w.jobs[job]
			j.Status.Active = 0
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: metav1.Time{Time: w.now}}}
			delete(w.pods, job+"-sidecar")
			w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
			if n := len(w.jobsOf(ComponentMigration)); n != 2 {
				t.Fatalf("migration Jobs %v: the migration ran again", w.jobsOf(ComponentMigration))
			}
			for _, l := range w.log {
				if strings.Contains(l, routingv1alpha1.ReasonMigrationFailed) || strings.Contains(l, routingv1alpha1.ReasonMigrationDeadline) || strings.Contains(l, routingv1alpha1.ReasonSchemaEvidenceLost) {
					t.Fatalf("log: %s", l)
				}
			}
			if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.ConfirmedBy != job {
				t.Fatalf("status.schema = %+v", st)
			}
		})
	}
}

// The migration container is the Job template's first container: a proxy's exit 0 (a message or
// not) confirms nothing while the migration container still runs, and a recorded report on a Job
// that is still active is not read (only its pod speaks then).
func TestSidecarOnlyTheMigrationContainerCounts(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	w.sidecarPod(job, gateReport(t, "2", false, w.now), true)
	pod := w.pods[job+"-sidecar"]
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: gateReport(t, "2", false, w.now)}}
	pod.Status.ContainerStatuses[1].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	w.jobs[job].Annotations[AnnotationSchemaReport] = gateReport(t, "2", false, w.now)
	for i := 0; i < 20; i++ {
		w.step(time.Second)
		if w.isTrue(routingv1alpha1.ConditionSchemaReady) || w.v2Pods() != 0 {
			t.Fatalf("round %d: the gate opened on the proxy's exit or a recorded report of a running Job", i)
		}
	}
}

// A native sidecar (an init container with restartPolicy: Always) works as Kubernetes intends:
// the kubelet stops it after the migration container, the Job completes, the report is read;
// the sidecar's own termination message is never taken as the report.
func TestNativeSidecarMigrationCompletes(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Schema.Migration.Template.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	if env := w.jobs[job].Spec.Template.Spec.InitContainers[0].Env; len(env) == 0 || env[0].Name != EnvSchemaVersion {
		t.Fatalf("the native sidecar has no %s: %v", EnvSchemaVersion, env)
	}
	w.confirmed = "2"
	pod := w.finishJob(job, false, w.now, "migrate", gateReport(t, "2", false, w.now))
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Message: gateReport(t, "0", true, w.now)}}}}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.jobsOf(ComponentMigration)); n != 2 {
		t.Fatalf("migration Jobs %v", w.jobsOf(ComponentMigration))
	}
}

// The Job controller (Kubernetes 1.31 and later) ends a Job at its deadline in two writes: first
// FailureTarget, with the pods deleted, then Failed once they are gone. Between the two the Job is
// neither finished nor has a pod to read: the report recorded on it stays the evidence, and an
// open gate stays open (CI saw SchemaReady flip to Migrating in that window). A recorded report
// on a Job without FailureTarget whose pods are gone is still not read.
func TestSidecarReportSurvivesTheFailureTargetWindow(t *testing.T) {
	w, job := sidecarMigration(t, false)
	w.untilStep(20, func() bool { return w.isTrue(routingv1alpha1.ConditionSchemaReady) })
	w.run(300, func() bool { return w.rsvc.Status.PromotedShards == "1/3" })
	w.tick()

	j := w.jobs[job]
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: metav1.Time{Time: w.now}}}
	j.Status.Active, j.Status.Terminating = 0, ptr.To[int32](1)
	delete(w.pods, job+"-sidecar")
	for i := 0; i < 5; i++ {
		w.step(time.Second)
		if !w.isTrue(routingv1alpha1.ConditionSchemaReady) {
			t.Fatalf("round %d in the FailureTarget window: SchemaReady %s", i, w.schemaReason())
		}
	}
	if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.ConfirmedBy != job {
		t.Fatalf("status.schema = %+v", st)
	}
	j.Status.Terminating = ptr.To[int32](0)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: metav1.Time{Time: w.now}})
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.jobsOf(ComponentMigration)); n != 2 {
		t.Fatalf("migration Jobs %v: the migration ran again", w.jobsOf(ComponentMigration))
	}

	// Without FailureTarget, a recorded report on an active Job with no pod opens nothing.
	w2 := steady(t)
	w2.update("app:v2", "2", "migrate:hang")
	w2.reconcile()
	w2.jobs[job].Annotations[AnnotationSchemaReport] = gateReport(t, "2", false, w2.now)
	for i := 0; i < 10; i++ {
		w2.step(time.Second)
		if w2.isTrue(routingv1alpha1.ConditionSchemaReady) || w2.v2Pods() != 0 {
			t.Fatalf("round %d: a recorded report on an active Job without FailureTarget opened the gate", i)
		}
	}
}

// Issue 42 item 9: once the migration container's report is recorded on its Job, the Job is
// stopped (spec.parallelism 0), so that the pod the sidecar keeps running, once deleted, is not
// replaced by one that runs the migration again. After the Job controller has deleted that pod,
// the recorded report on the stopped Job stays the evidence: the gate stays open and the rollout
// finishes on the one migration. A recorded report on an active Job nobody stopped still opens
// nothing (TestSidecarReportSurvivesTheFailureTargetWindow).
func TestSidecarJobIsStoppedOnceItsReportIsRecorded(t *testing.T) {
	w, job := sidecarMigration(t, false)
	w.untilStep(20, func() bool { return stoppedAfterReport(w.jobs[job]) })
	if w.jobs[job].Annotations[AnnotationSchemaReport] == "" || !w.isTrue(routingv1alpha1.ConditionSchemaReady) {
		t.Fatalf("stopped before its report was recorded (annotations %v) or with the gate shut (%s)", w.jobs[job].Annotations, w.schemaReason())
	}
	// The Job controller deletes the stopped Job's pod and starts none.
	w.jobs[job].Status.Active = 0
	delete(w.pods, job+"-sidecar")
	for i := 0; i < 10; i++ {
		w.step(time.Second)
		if !w.isTrue(routingv1alpha1.ConditionSchemaReady) {
			t.Fatalf("round %d after the stop: SchemaReady %s", i, w.schemaReason())
		}
	}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.jobsOf(ComponentMigration)); n != 2 {
		t.Fatalf("migration Jobs %v: the migration ran again", w.jobsOf(ComponentMigration))
	}
	if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.ConfirmedBy != job {
		t.Fatalf("status.schema = %+v", st)
	}
}
