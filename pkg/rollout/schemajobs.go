package rollout

// The migration, check and contract Jobs as evidence: which count, whether one may still change
// the database, its deadline, and the pods it leaves behind.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// ownedJob is a migration Job that counts as evidence: controlled by this RoutingService and named
// exactly as MigrationJobName(version, attempt) from its own labels, so neither a Job of another
// RoutingService nor an edited label can confirm a version (scenario S-03).
// Check Jobs (spec.schema.check) are kept the same way, with check set and attempt their number.
type ownedJob struct {
	job     *batchv1.Job
	version string
	attempt int32
	check   bool
	// contract: a contract Job (contract.go); its reading counts as evidence like a migration's.
	contract bool
}

func (oj *ownedJob) kind() string {
	switch {
	case oj.check:
		return "check"
	case oj.contract:
		return "contract"
	}
	return "migration"
}

// ownedJobs returns the Jobs of component (ComponentMigration or ComponentCheck) that count as
// evidence, lowest attempt first.
func ownedJobs(rsvc *routingv1alpha1.RoutingService, jobs []*batchv1.Job, component string) []ownedJob {
	name := MigrationJobName
	switch component {
	case ComponentCheck:
		name = CheckJobName
	case ComponentContract:
		name = ContractJobName
	}
	var out []ownedJob
	for _, j := range jobs {
		if j == nil || !metav1.IsControlledBy(j, rsvc) || j.Labels[LabelComponent] != component {
			continue
		}
		version := j.Labels[LabelSchemaVersion]
		attempt, err := strconv.Atoi(j.Labels[LabelAttempt])
		if err != nil || attempt < 0 || attempt > 1<<30 || !schemaversion.Valid(version) || j.Name != name(rsvc.Name, version, int32(attempt)) {
			continue
		}
		out = append(out, ownedJob{job: j, version: version, attempt: int32(attempt), check: component == ComponentCheck, contract: component == ComponentContract})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].attempt < out[k].attempt })
	return out
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// otherLiveMigration returns a migration Job of another version than required that may still be
// migrating (see live), if any.
func (p *planner) otherLiveMigration(required string) *ownedJob {
	for i := range p.jobs {
		if oj := &p.jobs[i]; !schemaversion.Equal(oj.version, required) && live(oj.job) {
			return oj
		}
	}
	return nil
}

// live reports whether a migration Job may still be changing the database: it has not finished
// (or was not suspended) and still has, or may still start, pods; or it has pods that are active or
// terminating whatever its conditions say.
func live(j *batchv1.Job) bool {
	if !stopped(j) {
		return true
	}
	finished := jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil
	return !finished && !ptr.Deref(j.Spec.Suspend, false)
}

// ended reports whether an attempt is over without confirming the required version: failed, past
// schemagate's deadline, or succeeded (the gate is called only when nothing confirms it, and a
// success whose report is gone is handled as lost evidence before this is asked).
func (p *planner) ended(oj *ownedJob) bool {
	return jobCondition(oj.job, batchv1.JobComplete) != nil || jobCondition(oj.job, batchv1.JobFailed) != nil || p.pastDeadline(oj)
}

// migrationChanged reports whether spec.schema.migration.template differs from the one attempt oj
// was created from (its annotation). A Job without the annotation counts as unchanged.
func (p *planner) migrationChanged(oj *ownedJob) bool {
	recorded := oj.job.Annotations[annotationMigrationTemplate]
	return recorded != "" && recorded != migrationTemplateHash(p.rsvc)
}

func finishedAt(j *batchv1.Job, c *batchv1.JobCondition) *metav1.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.DeepCopy()
	}
	t := c.LastTransitionTime
	return &t
}

// jobDeadline is the deadline a migration Job was created with (its activeDeadlineSeconds), so a
// later change of spec.schema.migration.activeDeadlineSeconds does not move a running Job's deadline.
func jobDeadline(j *batchv1.Job) time.Duration {
	if j.Spec.ActiveDeadlineSeconds != nil {
		return time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second
	}
	return time.Duration(routingv1alpha1.DefaultMigrationActiveDeadlineSeconds) * time.Second
}

// pastDeadline reports whether schemagate's own deadline for a migration Job has passed (see
// deadlineAt). A Job suspended by someone else (queued) is never past it: its deadline does not
// run while it cannot.
func (p *planner) pastDeadline(oj *ownedJob) bool {
	if queued(oj.job) {
		return false
	}
	return p.now.After(deadlineAt(oj.job, p.now))
}

// stopped reports whether a migration Job has no pod that could still be migrating: none active
// and none terminating.
func stopped(j *batchv1.Job) bool {
	return j.Status.Active == 0 && (j.Status.Terminating == nil || *j.Status.Terminating == 0)
}

// stopSince is when a migration Job was asked to stop (its Failed or Suspended condition), or its
// creation when it says neither.
func stopSince(j *batchv1.Job) time.Time {
	since := j.CreationTimestamp.Time
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobSuspended) && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since
}

// strayMigrationPod returns a migration or contract pod of this RoutingService (both change the
// database) that may still run (not Succeeded or Failed) and whose Job is gone: orphaned (deleted
// with --cascade=orphan, so it has no controller) or still terminating after its Job was deleted
// (its controller is no Job this RoutingService controls now). Such a pod blocks every schema
// Job (a Job it controls that still has pods blocks them too, migrationStillRunning): two changes of the
// database never run at once, and a check never reads one half-way.
func (p *planner) strayMigrationPod() *corev1.Pod {
	jobs := map[types.UID]bool{}
	for _, j := range p.observed.Jobs {
		if j != nil && metav1.IsControlledBy(j, p.rsvc) {
			jobs[j.UID] = true
		}
	}
	for _, pod := range p.observed.Pods {
		if pod == nil || pod.Labels[LabelName] != p.rsvc.Name ||
			(pod.Labels[LabelComponent] != ComponentMigration && pod.Labels[LabelComponent] != ComponentContract) ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "Job" || !jobs[ref.UID] {
			return pod
		}
	}
	return nil
}

// strayText says what a stray pod (strayMigrationPod) is doing.
func strayText(pod *corev1.Pod) string {
	return fmt.Sprintf("pod %s of a %s Job that no longer exists is still %s", pod.Name, pod.Labels[LabelComponent], podPhase(pod))
}

// migrationStillRunning says which migration may still be changing the database, if any: a pod
// of a migration Job that is gone, or a migration Job this RoutingService controls (evidence or
// not: labels edited by hand, an earlier attempt) that still has pods. A check never starts
// then, since it would read a database half-way through a migration.
func (p *planner) migrationStillRunning() string {
	if pod := p.strayMigrationPod(); pod != nil {
		return strayText(pod)
	}
	for _, j := range p.observed.Jobs {
		if j != nil && metav1.IsControlledBy(j, p.rsvc) && (j.Labels[LabelComponent] == ComponentMigration || j.Labels[LabelComponent] == ComponentContract) && !stopped(j) {
			return fmt.Sprintf("%s Job %s still has pods", j.Labels[LabelComponent], j.Name)
		}
	}
	return ""
}

func podPhase(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "terminating"
	}
	if pod.Status.Phase == "" {
		return "pending"
	}
	return strings.ToLower(string(pod.Status.Phase))
}
