package invariants

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// I1 is judged on the evidence this checker's informers deliver, and an informer can miss a state:
// when a watch ends with "too old resource version" the reflector lists again, and every state
// an object passed through meanwhile is lost, without the watch error handler hearing of it (CI on
// 2026-12-06: a migration pod's report, which the manager read before it scaled up, reached the
// checker only with the pod's later Succeeded, 36 revisions after the scale-up). So a scale-up the
// checker has not seen confirmed 5 s on is read again from the API server: its Jobs and schema pods
// exactly as they were at the scale-up's revision (resourceVersionMatch=Exact, read well within
// etcd's compaction window). Evidence held there clears the scale-up; its absence changes nothing.

// JobsAndPodsAt lists namespace ns's Jobs and its migration, check and contract pods exactly as
// they were at etcd revision rv (an error once etcd has compacted it away).
type JobsAndPodsAt func(ctx context.Context, ns string, rv int64) ([]batchv1.Job, []corev1.Pod, error)

// JobsAndPodsAtRevision is a JobsAndPodsAt on cs.
func JobsAndPodsAtRevision(cs kubernetes.Interface) JobsAndPodsAt {
	return func(ctx context.Context, ns string, rv int64) ([]batchv1.Job, []corev1.Pod, error) {
		at := metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, at)
		if err != nil {
			return nil, nil, err
		}
		at.LabelSelector = rollout.LabelComponent + " in (" + rollout.ComponentMigration + "," + rollout.ComponentCheck + "," + rollout.ComponentContract + ")"
		pods, err := cs.CoreV1().Pods(ns).List(ctx, at)
		if err != nil {
			return nil, nil, err
		}
		return jobs.Items, pods.Items, nil
	}
}

func i1ReadKey(p pendingCheck) string {
	return p.rs.Namespace + "/" + p.rs.Name + "@" + strconv.FormatInt(p.rsRV, 10)
}

// readI1 reads the API server's state for the scale-ups settle queued (with all, for every
// scale-up still unconfirmed, as the last step before the verdict) and records what it held in
// k.heldAt. It does not hold k.mu while it reads.
func (k *Checker) readI1(ctx context.Context, all bool) {
	k.mu.Lock()
	reads := k.i1Reads
	k.i1Reads = nil
	if all && k.jobsAndPodsAt != nil {
		for i := range k.pendingI1 {
			p := &k.pendingI1[i]
			owner := metav1.GetControllerOf(p.rs)
			if p.asked || owner == nil {
				continue
			}
			if ok, _ := k.confirmedBefore(p.rs.Namespace, string(owner.UID), p.rs, p.rsRV); !ok {
				p.asked = true
				reads = append(reads, *p)
			}
		}
	}
	list := k.jobsAndPodsAt
	k.mu.Unlock()
	if len(reads) == 0 {
		return
	}
	held := map[string]string{}
	for _, p := range reads {
		held[i1ReadKey(p)] = heldConfirmation(ctx, list, p)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, v := range held {
		k.heldAt[key] = v
	}
}

// heldConfirmation replays the Jobs and pods the API server held at p's revision through a checker
// of their own, and describes the confirmation it finds of a schema in p's range ("" when none, or
// when the read failed).
func heldConfirmation(ctx context.Context, list JobsAndPodsAt, p pendingCheck) string {
	owner := metav1.GetControllerOf(p.rs)
	if owner == nil {
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	jobs, pods, err := list(rctx, p.rs.Namespace, p.rsRV)
	if err != nil {
		return ""
	}
	replay := New()
	for i := range jobs {
		replay.observe(&jobs[i])
	}
	for i := range pods {
		replay.observe(&pods[i])
	}
	replay.mu.Lock()
	defer replay.mu.Unlock()
	if ok, _ := replay.confirmedBefore(p.rs.Namespace, string(owner.UID), p.rs, p.rsRV); !ok {
		return ""
	}
	return fmt.Sprintf("I1: ReplicaSet %s/%s asked for %d replicas at resourceVersion %d; the API server's Jobs and pods at that revision confirmed its schema (%s)",
		p.rs.Namespace, p.rs.Name, *p.rs.Spec.Replicas, p.rsRV, describeConfirmations(replay.confirmedAt[p.rs.Namespace+"/"+string(owner.UID)]))
}
