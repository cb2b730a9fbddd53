package rollout

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// annotationBeforeShard records, on a check Job run for spec.schema.check.beforeEachShard, the
// shard and revision it clears: "<shard>/<revision>".
const annotationBeforeShard = "schemagate.io/before-shard"

// shardCheckPassed reports whether shard may start promoting the update revision as far as
// spec.schema.check.beforeEachShard is concerned: the option is off, or a check Job created for
// this shard and revision reported the required schema (clean). Otherwise it starts that check,
// waits for it, or, when the check failed or left no usable report, stalls with the reason (a
// retry annotation runs the check again). A report below the required version or dirty never
// gets here: it is the latest reading, so the gate itself closes (afterCheck).
func (p *planner) shardCheckPassed(shard string) bool {
	c := p.rsvc.Spec.Schema.Check
	if c == nil || !c.BeforeEachShard {
		return true
	}
	required := p.rsvc.Spec.Schema.Version
	key := shard + "/" + p.update
	var check *ownedJob
	for i := range p.checks {
		if oj := &p.checks[i]; schemaversion.Equal(oj.version, required) && oj.job.Annotations[annotationBeforeShard] == key {
			check = oj
		}
	}
	if check == nil {
		p.startShardCheck(shard, key, fmt.Sprintf("shard %s is next", shard))
		return false
	}
	r := readingOf(p.readings, check)
	failed := jobCondition(check.job, batchv1.JobFailed)
	running, wake := p.checkRunning(check, r)
	switch {
	case r.confirms(required):
		return true
	case running:
		p.setActivity(routingv1alpha1.ReasonCheckingSchema, fmt.Sprintf("shard %s starts once check Job %s confirms schema %s in the database", shard, check.job.Name, required))
		p.requeueAt(wake)
		return false
	case p.retry != "":
		why := fmt.Sprintf("retry %q", p.retry)
		if p.startShardCheck(shard, key, fmt.Sprintf("%s after check Job %s", why, check.job.Name)) {
			p.useRetry()
		}
		return false
	}
	reason, cause := routingv1alpha1.ReasonSchemaCheckFailed, ""
	switch {
	case r != nil && r.invalid != "":
		reason, cause = routingv1alpha1.ReasonInvalidSchemaReport, fmt.Sprintf("succeeded, but its schema report cannot be used: %s", r.invalid)
	case failed != nil:
		cause = fmt.Sprintf("failed (%s: %s)%s", failed.Reason, failed.Message, p.podCause(check))
	case r != nil && r.usable():
		cause = r.describe()
	default:
		cause = fmt.Sprintf("did not finish within activeDeadlineSeconds (%ds)%s", int64(jobDeadline(check.job)/time.Second), p.podCause(check))
	}
	msg := fmt.Sprintf("check Job %s before shard %s %s; shard %s and the shards after it do not start (annotate %s to run the check again)",
		check.job.Name, shard, cause, shard, routingv1alpha1.AnnotationRetry)
	if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Reason != reason || old.Message != msg {
		p.event(true, reason, "%s", msg)
	}
	p.stall(reason, msg)
	return false
}

// startShardCheck creates the next check Job for the required version, annotated for key
// ("<shard>/<revision>"), unless a migration may still run or the name is taken (then it waits or
// stalls). It reports whether the Job is created.
func (p *planner) startShardCheck(shard, key, why string) bool {
	required := p.rsvc.Spec.Schema.Version
	job := NewCheckJob(p.rsvc, schemaversion.Canonical(required), p.nextCheck())
	after := int32(0)
	if latest := p.latestAttempt(required); latest != nil {
		after = latest.attempt
	}
	job.Annotations = map[string]string{annotationAfterAttempt: strconv.Itoa(int(after)), annotationBeforeShard: key}
	if running := p.migrationStillRunning(); running != "" {
		p.setActivity(routingv1alpha1.ReasonCheckingSchema, fmt.Sprintf("shard %s waits: %s, and its check Job %s starts when it has ended", shard, running, job.Name))
		p.requeueAt(p.now.Add(5 * time.Second))
		return false
	}
	if holder := p.taken("Job", job.Name); holder != "" {
		msg := fmt.Sprintf("check Job %s/%s before shard %s cannot be created: %s; delete or rename it and the check starts", p.rsvc.Namespace, job.Name, shard, holder)
		if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Message != msg {
			p.event(true, routingv1alpha1.ReasonNameConflict, "%s", msg)
		}
		p.stall(routingv1alpha1.ReasonNameConflict, msg)
		p.requeueAt(p.now.Add(conflictRecheck))
		return false
	}
	p.act(Action{Kind: CreateJob, Job: job, Note: fmt.Sprintf("%s: check schema %s before it starts", why, required)})
	p.event(false, EventCheckStarted, "%s: started check Job %s to confirm schema %s before shard %s starts", why, job.Name, required, shard)
	p.setActivity(routingv1alpha1.ReasonCheckingSchema, fmt.Sprintf("shard %s starts once check Job %s confirms schema %s in the database", shard, job.Name, required))
	p.requeueAt(p.now.Add(time.Duration(p.rsvc.Spec.Schema.Check.ActiveDeadlineSecondsOrDefault())*time.Second + migrationGrace))
	return true
}
