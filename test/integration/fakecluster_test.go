package integration

import (
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
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// fakeCluster plays, against the real API server, the parts of Kubernetes that envtest does not
// run: the ReplicaSet controller (pods become available one poll after they are asked for), the
// Job controller, and the database the migrations change. Its rules, by image:
//
//   - a ReplicaSet's pods become available only if the namespace's database schema is at least the
//     schema its revision requires (a readiness probe that checks the schema: scenario S-02), and
//     never if the image contains "broken", or "broken-in-<shard>" for its own shard;
//   - a migration Job whose image contains "manual" is left running for the test to finish
//     (finishJob); any other Job succeeds after about 300 ms and moves the database to its version;
//     a suspended Job loses its active pods.
type fakeCluster struct {
	c client.Client

	mu sync.Mutex
	db map[string]string // namespace → schema version of its database
}

func newFakeCluster(c client.Client) *fakeCluster {
	return &fakeCluster{c: c, db: map[string]string{}}
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
	return f.db[ns]
}

func (f *fakeCluster) migrate(ns, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !schemaversion.AtLeast(f.db[ns], version) {
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
		healthy = healthy && schemaversion.AtLeast(f.schema(rs.Namespace), rollout.RequiredSchema(rs))
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
			// The Job controller stops a suspended Job's pods.
			if j.Status.Active > 0 {
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
		_ = f.finish(ctx, j, true)
	}
}

// finish writes a Job's final status as the Job controller of Kubernetes 1.37 does (the API
// server insists on the interim SuccessCriteriaMet / FailureTarget condition first).
func (f *fakeCluster) finish(ctx context.Context, j *batchv1.Job, success bool) error {
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
	if err := f.c.Status().Update(ctx, j); err != nil {
		return err
	}
	if success {
		f.migrate(j.Namespace, j.Labels[rollout.LabelSchemaVersion])
	}
	return nil
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
