package schemaevidence

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func job() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rs-a-schema-1", UID: types.UID("job-uid")}}
}

// pod is a pod of j (controlled by it unless j is nil) in phase, created at s seconds, whose
// containers (name=message) terminated with those messages.
func pod(j *batchv1.Job, name string, phase corev1.PodPhase, s int, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(s) * time.Second))},
		Status: corev1.PodStatus{Phase: phase}}
	if j != nil {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}
	}
	for _, c := range containers {
		n, msg, _ := strings.Cut(c, "=")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: n,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}})
	}
	return p
}

const (
	report3      = `{"schemagate":"schema-report/v1","version":"3","dirty":false,"tool":"golang-migrate","time":"2026-12-07T09:00:00Z"}`
	report3Dirty = `{"schemagate":"schema-report/v1","version":"3","dirty":true,"time":"2026-12-07T09:00:00Z"}`
)

func TestFromPods(t *testing.T) {
	j := job()
	other := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "copied", UID: types.UID("other")}}
	in := func(phase corev1.PodPhase, now int, pods ...*corev1.Pod) Input {
		return Input{Job: j, Kind: "migration", Pods: pods, Phase: phase, Now: t0.Add(time.Duration(now) * time.Second), Finished: t0, Lag: 30 * time.Second}
	}
	for _, c := range []struct {
		name string
		in   Input
		want Report
		// problem is a part of Report.Problem, when want has none.
		problem string
	}{
		{"a report", in(corev1.PodSucceeded, 1, pod(j, "p", corev1.PodSucceeded, 0, "migrate="+report3)),
			Report{Version: "3", Tool: "golang-migrate"}, ""},
		{"a dirty report of a failed pod", in(corev1.PodFailed, 1, pod(j, "p", corev1.PodFailed, 0, "migrate="+report3Dirty)),
			Report{Version: "3", Dirty: true}, ""},
		{"the newest pod in the phase", in(corev1.PodSucceeded, 1,
			pod(j, "new", corev1.PodSucceeded, 5, "migrate="+report3), pod(j, "old", corev1.PodSucceeded, 0, "migrate=garbage")),
			Report{Version: "3", Tool: "golang-migrate"}, ""},
		{"the first container in spec order with a message", in(corev1.PodSucceeded, 1,
			pod(j, "p", corev1.PodSucceeded, 0, "a-migrate="+report3, "b-sidecar=", "c-proxy=not a report")),
			Report{Version: "3", Tool: "golang-migrate"}, ""},
		{"an empty message is passed over", in(corev1.PodSucceeded, 1,
			pod(j, "p", corev1.PodSucceeded, 0, "a-sidecar=", "b-migrate="+report3)),
			Report{Version: "3", Tool: "golang-migrate"}, ""},
		{"a pod with copied labels says nothing", in(corev1.PodSucceeded, 60, pod(other, "p", corev1.PodSucceeded, 0, "migrate="+report3)),
			Report{Gone: true}, "are gone"},
		{"a pod with no controller says nothing", in(corev1.PodSucceeded, 60, pod(nil, "p", corev1.PodSucceeded, 0, "migrate="+report3)),
			Report{Gone: true}, "are gone"},
		{"no report written", in(corev1.PodSucceeded, 1, pod(j, "p", corev1.PodSucceeded, 0, "migrate=")),
			Report{}, "pod p of migration Job rs-a-schema-1"},
		{"a report that does not parse", in(corev1.PodSucceeded, 1, pod(j, "p", corev1.PodSucceeded, 0, "migrate={\"version\":")),
			Report{}, "pod p of migration Job rs-a-schema-1"},
		{"still running, within the lag: pending", in(corev1.PodSucceeded, 30, pod(j, "p", corev1.PodRunning, 0)),
			Report{Pending: true}, "waiting for the pod"},
		{"still running past the lag: gone", in(corev1.PodSucceeded, 31, pod(j, "p", corev1.PodRunning, 0)),
			Report{Gone: true}, "are gone"},
		{"a failed Job's running pod is not waited for", in(corev1.PodFailed, 1, pod(j, "p", corev1.PodRunning, 0)),
			Report{Gone: true}, "are gone"},
		{"no pod", in(corev1.PodSucceeded, 1), Report{Gone: true}, "are gone"},
		{"a nil pod is skipped", in(corev1.PodSucceeded, 1, nil, pod(j, "p", corev1.PodSucceeded, 0, "m="+report3)),
			Report{Version: "3", Tool: "golang-migrate"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := FromPods(c.in)
			if c.problem == "" && got.Problem != "" || c.problem != "" && !strings.Contains(got.Problem, c.problem) {
				t.Fatalf("problem %q, want one with %q", got.Problem, c.problem)
			}
			got.Problem = ""
			if got != c.want {
				t.Fatalf("FromPods = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestMessageWithoutSpec(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "from b"}}},
		{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "from a"}}},
	}}}
	if got := Message(p); got != "from b" {
		t.Fatalf("Message = %q, want the status's first", got)
	}
	p.Spec.Containers = []corev1.Container{{Name: "a"}, {Name: "b"}}
	if got := Message(p); got != "from a" {
		t.Fatalf("Message = %q, want the spec's first", got)
	}
}

func TestLatest(t *testing.T) {
	good, dirty, bad := Candidate{Usable: true}, Candidate{Usable: true, Dirty: true}, Candidate{}
	lateGood, lateDirty := Candidate{Usable: true, Late: true}, Candidate{Usable: true, Late: true, Dirty: true}
	for _, c := range []struct {
		name string
		in   []Candidate
		want int
	}{
		{"none", nil, -1},
		{"only unusable", []Candidate{bad, bad}, -1},
		{"the latest usable", []Candidate{good, good}, 1},
		{"a garbled report does not hide a good one", []Candidate{good, bad}, 0},
		{"a dirty report is evidence", []Candidate{good, dirty}, 1},
		{"a late success is not", []Candidate{good, lateGood}, 0},
		{"a late dirty report still is", []Candidate{good, lateDirty}, 1},
		{"only a late success: none", []Candidate{lateGood}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Latest(c.in); got != c.want {
				t.Fatalf("Latest = %d, want %d", got, c.want)
			}
		})
	}
}

// FuzzFromPods: whatever a pod's termination message holds, reading it never panics, a report
// read has a canonical version, and a problem is said when there is none.
func FuzzFromPods(f *testing.F) {
	f.Add(report3, "")
	f.Add(report3Dirty, "second")
	f.Add("{\"version\":\"00012\"}", "")
	f.Add(strings.Repeat("x", 5000), "{}")
	f.Fuzz(func(t *testing.T, first, second string) {
		j := job()
		got := FromPods(Input{Job: j, Kind: "migration", Phase: corev1.PodSucceeded, Now: t0, Finished: t0, Lag: time.Second,
			Pods: []*corev1.Pod{pod(j, "p", corev1.PodSucceeded, 0, "a="+first, "b="+second)}})
		if got.Gone || got.Pending {
			t.Fatalf("a finished pod of the Job read as %+v", got)
		}
		if got.Problem == "" && (got.Version == "" || len(got.Version) > 64) {
			t.Fatalf("a report with version %q", got.Version)
		}
		if got.Problem != "" && (got.Version != "" || got.Dirty || got.Tool != "") {
			t.Fatalf("a problem with a report: %+v", got)
		}
	})
}
