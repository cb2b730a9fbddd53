// Package schemaevidence reads what a finished migration, check or contract Job says about the
// database: the schema report its pod left as a termination message (docs/schema-report.md),
// and, of several such readings, which one is the evidence.
//
// Everything it reads is untrusted: pods with copied labels, messages of any size or content. A
// pod counts only when the Job is its controller (by UID); the report is parsed by
// pkg/schemareport, which bounds it. pkg/rollout keeps the Jobs' attempts, deadlines and the
// report recorded on a Job (sidecar.go), and asks this package what the pods say.
package schemaevidence

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Input is one Job whose pods are read.
type Input struct {
	Job *batchv1.Job
	// Kind names the Job in messages: "migration", "check" or "contract".
	Kind string
	// Pods are the pods observed (any of them; only the Job's own are read).
	Pods []*corev1.Pod
	// Phase is the phase of the pod whose report is read: Succeeded for a Job that completed,
	// Failed for one that failed.
	Phase corev1.PodPhase
	// Now is the planner's clock; Finished is when the Job finished; Lag is how long after that
	// a pod still running is waited for (the pod's update and the Job's arrive separately).
	Now, Finished time.Time
	Lag           time.Duration
}

// Report is what the Job's pods say.
type Report struct {
	// Version (canonical), Dirty and Tool are the report's, when Problem is "".
	Version string
	Dirty   bool
	Tool    string
	// Problem says why there is no report to use: none was written, it does not parse, the pods
	// are gone, or the pod is not yet seen finished. "" when there is one.
	Problem string
	// Gone: no pod of the Job is left (deleted, garbage-collected): evidence that disappeared,
	// not a defect. Pending: a pod of a completed Job is not yet seen finished, within Lag.
	Gone, Pending bool
}

// FromPods reads the schema report of the Job's newest pod in in.Phase: the termination message
// of the first container, in spec order, that left a non-empty one (init containers are not
// read).
func FromPods(in Input) Report {
	var pod *corev1.Pod
	running := false
	for _, candidate := range in.Pods {
		if candidate == nil || !metav1.IsControlledBy(candidate, in.Job) {
			continue
		}
		if candidate.Status.Phase != in.Phase {
			running = running || (candidate.Status.Phase != corev1.PodSucceeded && candidate.Status.Phase != corev1.PodFailed)
			continue
		}
		if pod == nil || pod.CreationTimestamp.Before(&candidate.CreationTimestamp) {
			pod = candidate
		}
	}
	if pod == nil && running && in.Phase == corev1.PodSucceeded && !in.Now.After(in.Finished.Add(in.Lag)) {
		return Report{Pending: true, Problem: fmt.Sprintf("waiting for the pod of %s Job %s to show its schema report", in.Kind, in.Job.Name)}
	}
	if pod == nil {
		return Report{Gone: true, Problem: fmt.Sprintf("the pods of %s Job %s are gone, and their schema report with them", in.Kind, in.Job.Name)}
	}
	report, err := schemareport.Parse([]byte(Message(pod)))
	if err != nil {
		return Report{Problem: fmt.Sprintf("pod %s of %s Job %s: %s", pod.Name, in.Kind, in.Job.Name, err.Error())}
	}
	return Report{Version: schemaversion.Canonical(report.Version), Dirty: report.Dirty, Tool: report.Tool}
}

// Message is the termination message of pod's first container, in spec order, that left a
// non-empty one ("" when none did). The kubelet sorts status.containerStatuses by name, so the
// spec gives the order; a pod without a spec (as some tests build) is read in its status's order.
func Message(pod *corev1.Pod) string {
	order := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		order = append(order, c.Name)
	}
	if len(order) == 0 {
		for _, cs := range pod.Status.ContainerStatuses {
			order = append(order, cs.Name)
		}
	}
	for _, name := range order {
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == name && t != nil && t.Message != "" {
				return t.Message
			}
		}
	}
	return ""
}

// Candidate is one reading, as Latest weighs it.
type Candidate struct {
	// Usable: it says which version the database is at (no Problem, not gone).
	Usable bool
	// Late: a migration that succeeded after schemagate's deadline had passed.
	Late bool
	// Dirty: the report says the database is dirty.
	Dirty bool
}

// Latest is the index of the evidence among readings in causal order (oldest first): the latest
// usable one, -1 when none is. A reading that is not usable never counts, so a garbled report
// cannot hide an earlier good one and one Job deleted does not erase what another saw; nor does a
// late success that is not dirty (it never opens the gate; a dirty one still closes it).
func Latest(readings []Candidate) int {
	for i := len(readings) - 1; i >= 0; i-- {
		if r := readings[i]; r.Usable && (!r.Late || r.Dirty) {
			return i
		}
	}
	return -1
}
