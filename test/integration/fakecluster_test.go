package integration

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// fakeCluster plays, against the real API server, the parts of Kubernetes that envtest does not
// run: the ReplicaSet controller (pods become available one poll after they are asked for), the
// Job controller, and the database the migrations change. Its rules, by image:
//
//   - a ReplicaSet's pods become available only if the namespace's database schema is inside the
//     range its revision runs on (recorded on the ReplicaSet; without one, at least the schema it
//     requires: a readiness probe that checks the schema, scenario S-02), and
//     never if the image contains "broken", or "broken-in-<shard>" for its own shard;
//   - a migration Job whose image contains "manual" is left running for the test to finish
//     (finishJob); any other Job succeeds after about 300 ms and moves the database to its version;
//     a suspended Job loses its active pods;
//   - each finished Job leaves a pod (controlled by the Job, as the Job controller's are) whose
//     container's termination message is a schema report of the database, as
//     schemagate-schema writes it; by image: "noop" succeeds without migrating, "dirty" fails
//     half-way and leaves the database dirty, "garbage" writes a message that is not a report,
//     "huge" one over 4096 bytes, "silent" none. A check Job (component "check") reports the
//     database as it is.
//   - a probe Job (component "probe") never touches the database: by the image of its migrate
//     step, "breaking" finds the incident's change (a text column turned json), anything else a
//     new nullable column (probe_test.go).
type fakeCluster struct {
	c client.Client

	mu    sync.Mutex
	db    map[string]string // namespace → schema version of its database
	dirty map[string]bool   // namespace → its database is dirty
	// shared maps a namespace to the one whose database it uses (a spoke's namespace that reaches
	// the hub namespace's database); unmapped namespaces have their own.
	shared map[string]string
}

// share makes namespace ns use the database of namespace with (both clusters of a story reach
// one database).
func (f *fakeCluster) share(ns, with string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shared == nil {
		f.shared = map[string]string{}
	}
	f.shared[ns] = with
}

// dbOf is the namespace whose database ns uses; f.mu is held.
func (f *fakeCluster) dbOf(ns string) string {
	if with, ok := f.shared[ns]; ok {
		return with
	}
	return ns
}

func newFakeCluster(c client.Client) *fakeCluster {
	return &fakeCluster{c: c, db: map[string]string{}, dirty: map[string]bool{}}
}

// setDatabase sets a namespace's database as a person (or a restored backup) would.
func (f *fakeCluster) setDatabase(ns, version string, dirty bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns = f.dbOf(ns)
	f.db[ns], f.dirty[ns] = version, dirty
}

// report is the schema report of ns's database.
func (f *fakeCluster) report(ns string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns = f.dbOf(ns)
	b, err := schemareport.Encode(schemareport.Report{Version: cmp.Or(f.db[ns], "0"), Dirty: f.dirty[ns], Tool: "fake", Time: time.Now()})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (f *fakeCluster) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		f.syncJobs(ctx)
		f.syncReplicaSets(ctx)
	}, 150*time.Millisecond)
}

func (f *fakeCluster) schema(ns string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db[f.dbOf(ns)]
}

func (f *fakeCluster) migrate(ns, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns = f.dbOf(ns)
	if !f.dirty[ns] && !schemaversion.AtLeast(f.db[ns], version) {
		f.db[ns] = version
	}
}

func (f *fakeCluster) syncReplicaSets(ctx context.Context) {
	var list appsv1.ReplicaSetList
	if err := f.c.List(ctx, &list, client.MatchingLabels{rollout.LabelManagedBy: rollout.ManagedByValue}); err != nil {
		return
	}
	for i := range list.Items {
		rs := &list.Items[i]
		want := ptr.Deref(rs.Spec.Replicas, 1)
		image := rs.Spec.Template.Spec.Containers[0].Image
		healthy := !strings.Contains(image, "broken") || (strings.Contains(image, "broken-in-") && !strings.Contains(image, "broken-in-"+rs.Labels[rollout.LabelShard]))
		db := f.schema(rs.Namespace)
		oldest, newest := rollout.RecordedRange(rs)
		healthy = healthy && schemaversion.AtLeast(db, oldest) && (newest == "" || schemaversion.AtLeast(newest, db))
		available := int32(0)
		if healthy {
			// Scale-downs take effect at once; new pods become available one poll later.
			available = min(want, rs.Status.Replicas)
		}
		st := appsv1.ReplicaSetStatus{Replicas: want, FullyLabeledReplicas: want, ReadyReplicas: available,
			AvailableReplicas: available, ObservedGeneration: rs.Generation}
		if equality.Semantic.DeepEqual(rs.Status, st) {
			continue
		}
		rs.Status = st
		_ = f.c.Status().Update(ctx, rs)
	}
}

func (f *fakeCluster) syncJobs(ctx context.Context) {
	var list batchv1.JobList
	if err := f.c.List(ctx, &list, client.MatchingLabels{rollout.LabelManagedBy: rollout.ManagedByValue}); err != nil {
		return
	}
	for i := range list.Items {
		j := &list.Items[i]
		if ptr.Deref(j.Spec.Suspend, false) && !finished(j) {
			// The Job controller stops a suspended Job's pods and says it is suspended.
			if j.Status.Active > 0 || !hasCondition(j, batchv1.JobSuspended) {
				j.Status.Active = 0
				now := metav1.Now()
				j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
					Reason: "JobSuspended", Message: "Job suspended", LastProbeTime: now, LastTransitionTime: now})
				_ = f.c.Status().Update(ctx, j)
			}
			continue
		}
		if finished(j) || strings.Contains(j.Spec.Template.Spec.Containers[0].Image, "manual") {
			if j.Status.StartTime == nil && !finished(j) {
				j.Status.StartTime = &metav1.Time{Time: time.Now()}
				j.Status.Active = 1
				_ = f.c.Status().Update(ctx, j)
			}
			continue
		}
		if time.Since(j.CreationTimestamp.Time) < 300*time.Millisecond {
			continue
		}
		if j.Labels[rollout.LabelComponent] == rollout.ComponentProbe {
			_ = f.finishProbe(ctx, j)
			continue
		}
		image := j.Spec.Template.Spec.Containers[0].Image
		success := !strings.Contains(image, "dirty")
		if j.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck {
			// A shard check fails if its image says "fail", or "fail-in-<shard>" for its shard.
			success = !strings.Contains(image, "fail") || (strings.Contains(image, "fail-in-") && !strings.Contains(image, "fail-in-"+j.Labels[rollout.LabelShard]))
		}
		_ = f.finish(ctx, j, success)
	}
}

// finish writes a Job's final status as the Job controller of Kubernetes 1.37 does (the API
// server insists on the interim SuccessCriteriaMet / FailureTarget condition first).
func (f *fakeCluster) finish(ctx context.Context, j *batchv1.Job, success bool) error {
	if rollout.JobFinished(j) {
		// Finished already (the fake Job controller and a story both finishing one Job, read
		// before the other's write): its completionTime is immutable, and once is what was asked.
		return nil
	}
	now := metav1.Now()
	if j.Status.StartTime == nil {
		j.Status.StartTime = &now
	}
	j.Status.Active = 0
	if success {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now})
	} else {
		j.Status.Failed = ptr.Deref(j.Spec.BackoffLimit, 6) + 1
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now})
	}
	image := j.Spec.Template.Spec.Containers[0].Image
	check := j.Labels[rollout.LabelComponent] == rollout.ComponentCheck
	switch {
	case check, j.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck, strings.Contains(image, "noop"), strings.Contains(image, "silent"), strings.Contains(image, "garbage"), strings.Contains(image, "huge"):
	case strings.Contains(image, "dirty"):
		f.mu.Lock()
		f.dirty[f.dbOf(j.Namespace)] = true
		f.mu.Unlock()
	case success:
		f.migrate(j.Namespace, j.Labels[rollout.LabelSchemaVersion])
	}
	message := f.report(j.Namespace)
	switch {
	case check:
	case strings.Contains(image, "silent"):
		message = ""
	case strings.Contains(image, "garbage"):
		message = "migrated, all good"
	case strings.Contains(image, "huge"):
		message = message[:len(message)-1] + `,"padding":"` + strings.Repeat("x", 5000) + `"}`
	case !success && !strings.Contains(image, "dirty"):
		message = "" // failed before it could read the database
	}
	// The pod first, as the Job controller sees it finish before it marks the Job.
	if err := f.leavePod(ctx, j, success, message); err != nil {
		return err
	}
	return f.c.Status().Update(ctx, j)
}

// leavePod creates the finished pod of Job j, controlled by it, with message as its container's
// termination message.
func (f *fakeCluster) leavePod(ctx context.Context, j *batchv1.Job, success bool, message string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: j.Name + "-", Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *j.Spec.Template.Spec.DeepCopy()}
	if err := f.c.Create(ctx, pod); err != nil {
		return err
	}
	phase, code := corev1.PodSucceeded, int32(0)
	if !success {
		phase, code = corev1.PodFailed, 1
	}
	c := pod.Spec.Containers[0]
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message,
			StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}}
	return f.c.Status().Update(ctx, pod)
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func hasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
