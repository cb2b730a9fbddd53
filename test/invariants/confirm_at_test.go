package invariants

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CI's I1 timeline of 2026-12-06: the manager read the migration pod's report and scaled up at rv
// 1740, but this checker's pod watch lost that state and delivered the pod only at 1770. The API
// server's Jobs and pods at 1740 decide: held there, the scale-up is cleared; not held, or not
// readable, it stays a violation.
func TestI1EvidenceTheWatchMissedIsReadAtTheScaleUpsRevision(t *testing.T) {
	job := testJob(jobUID, "rs-a-schema-1", 1723, false, false)
	done := testJob(jobUID, "rs-a-schema-1", 1768, false, true)
	other := testJob("other-job", "other-schema-1", 1723, false, false)
	other.OwnerReferences = []metav1.OwnerReference{rsvcRef("another-uid")}
	for _, tc := range []struct {
		name                  string
		jobs                  []batchv1.Job
		pods                  []corev1.Pod
		err                   error
		violations, corrected int
	}{
		{name: "the API server held the pod's report", jobs: []batchv1.Job{*job}, pods: []corev1.Pod{*testPod(job, 1738)}, corrected: 1},
		{name: "the API server held no report", jobs: []batchv1.Job{*job}, violations: 1},
		{name: "a report of another RoutingService's Job", jobs: []batchv1.Job{*other}, pods: []corev1.Pod{*testPod(other, 1738)}, violations: 1},
		{name: "the revision could not be read", err: errors.New("too old resource version"), violations: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := New()
			var asked []int64
			k.jobsAndPodsAt = func(_ context.Context, namespace string, rv int64) ([]batchv1.Job, []corev1.Pod, error) {
				if namespace != ns {
					t.Errorf("read namespace %q", namespace)
				}
				asked = append(asked, rv)
				return tc.jobs, tc.pods, tc.err
			}
			for _, e := range []any{testRSVC(), job, testRS(1740, 2), testPod(done, 1770), done} {
				k.observe(e)
			}
			v, _ := k.Violations()
			if len(v) != tc.violations || len(k.correctedI1) != tc.corrected {
				t.Errorf("violations %q, cleared %q; want %d and %d", v, k.correctedI1, tc.violations, tc.corrected)
			}
			if len(asked) != 1 || asked[0] != 1740 {
				t.Errorf("read at %v, want once at 1740", asked)
			}
		})
	}
}
