package rollout

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// shardCheckJob returns the Job of check for shard and the update revision, if this
// RoutingService controls one named and labelled for it.
func (p *planner) shardCheckJob(shard, check string, when routingv1alpha1.CheckWhen) *batchv1.Job {
	name := ShardCheckJobName(p.rsvc.Name, shard, check, p.update, when)
	for _, j := range p.observed.Jobs {
		if j != nil && j.Name == name && metav1.IsControlledBy(j, p.rsvc) && j.Labels[LabelComponent] == ComponentShardCheck &&
			j.Labels[LabelShard] == shard && j.Labels[LabelCheck] == check && j.Labels[LabelRevision] == p.update &&
			j.Labels[LabelCheckWhen] == string(when) {
			return j
		}
	}
	return nil
}

// runChecks runs the checks of spec.strategy.checks that run at when for a shard (issue 11):
// during its bake, or before it starts. It creates each check's Job for the shard, the update
// revision and the moment when missing, and reports each check in
// status.shards[].checks, read from its Job on every reconcile (Complete: Passed; Failed, or past
// activeDeadlineSeconds + 10 s: Failed; else Running). It returns how many checks that count
// (not dryRun) still run, and the message of the first that failed, if any. An Event records
// each check's pass or failure once.
func (p *planner) runChecks(shard string, ss *routingv1alpha1.ShardStatus, when routingv1alpha1.CheckWhen) (running int, failed string) {
	previous := map[string]*routingv1alpha1.ShardCheckStatus{}
	var out []routingv1alpha1.ShardCheckStatus
	for i, c := range ss.Checks {
		if c.When == when {
			previous[c.Name] = &ss.Checks[i]
		} else if c.When != "" {
			out = append(out, c)
		}
	}
	moment := "during its bake"
	if when == routingv1alpha1.CheckWhenBeforeStart {
		moment = "before it starts"
	}
	for i := range p.rsvc.Spec.Strategy.Checks {
		check := &p.rsvc.Spec.Strategy.Checks[i]
		if !check.Runs(when) {
			continue
		}
		st := routingv1alpha1.ShardCheckStatus{Name: check.Name, When: when, DryRun: check.DryRun, Phase: routingv1alpha1.CheckPhaseRunning, Revision: p.update}
		var job *batchv1.Job
		if check.Job != nil {
			job = p.shardCheckJob(shard, check.Name, when)
		}
		switch {
		case check.Job == nil && !check.Measured():
			// No provider (the CRD requires exactly one): nothing can pass it.
			st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, "the check has no provider: set job, http or prometheus"
		case check.Measured():
			st = p.measuredCheck(shard, check, when, previous[check.Name])
		case job == nil:
			want := NewShardCheckJob(p.rsvc, shard, *check, p.update, when)
			st.Job = want.Name
			if holder := p.taken("Job", want.Name); holder != "" {
				st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("its Job cannot be created: %s", holder)
				break
			}
			p.act(Action{Kind: CreateJob, Job: want, Note: fmt.Sprintf("check %s of shard %s %s on revision %s", check.Name, shard, moment, p.update)})
			st.Message = "started"
			p.requeueAt(p.now.Add(time.Duration(check.Job.ActiveDeadlineSecondsOrDefault())*time.Second + migrationGrace))
		case jobCondition(job, batchv1.JobComplete) != nil:
			st.Job, st.Phase, st.Message = job.Name, routingv1alpha1.CheckPhasePassed, fmt.Sprintf("Job %s succeeded", job.Name)
		case jobCondition(job, batchv1.JobFailed) != nil:
			c := jobCondition(job, batchv1.JobFailed)
			st.Job, st.Phase = job.Name, routingv1alpha1.CheckPhaseFailed
			st.Message = fmt.Sprintf("Job %s failed (%s: %s)%s", job.Name, c.Reason, c.Message, p.podCause(&ownedJob{job: job}))
		case p.now.After(job.CreationTimestamp.Add(jobDeadline(job) + migrationGrace)):
			st.Job, st.Phase = job.Name, routingv1alpha1.CheckPhaseFailed
			st.Message = fmt.Sprintf("Job %s did not finish within activeDeadlineSeconds (%ds)%s", job.Name, int64(jobDeadline(job)/time.Second), p.podCause(&ownedJob{job: job}))
		default:
			st.Job, st.Message = job.Name, fmt.Sprintf("Job %s runs", job.Name)
			p.requeueAt(job.CreationTimestamp.Add(jobDeadline(job) + migrationGrace))
		}
		prevPhase := routingv1alpha1.CheckPhase("")
		if prev := previous[check.Name]; prev != nil && prev.Revision == st.Revision {
			prevPhase = prev.Phase
		}
		if st.Phase != prevPhase {
			switch st.Phase {
			case routingv1alpha1.CheckPhasePassed:
				p.checkEvent(check.Name, false, EventShardCheckPassed, "check %s passed in shard %s %s on revision %s: %s", check.Name, shard, moment, p.update, st.Message)
			case routingv1alpha1.CheckPhaseFailed:
				dry := ""
				if check.DryRun {
					dry = " (dryRun: reported only, the shard goes on)"
				}
				p.checkEvent(check.Name, true, routingv1alpha1.ReasonShardCheckFailed, "check %s failed in shard %s %s on revision %s: %s%s", check.Name, shard, moment, p.update, st.Message, dry)
			case routingv1alpha1.CheckPhaseInconclusive:
				p.checkEvent(check.Name, true, routingv1alpha1.ReasonShardCheckInconclusive, "check %s is inconclusive in shard %s %s on revision %s: %s", check.Name, shard, moment, p.update, st.Message)
			}
		}
		switch {
		case check.DryRun:
		case st.Phase == routingv1alpha1.CheckPhaseRunning:
			running++
		case st.Phase == routingv1alpha1.CheckPhaseInconclusive:
			// Argo Rollouts pauses on an inconclusive analysis; the shard holds the same way
			// until a person promotes (the bake and its checks end) or aborts.
			running++
			if p.inconclusive == "" {
				p.inconclusive = fmt.Sprintf("check %s is inconclusive in shard %s %s on revision %s: %s", check.Name, shard, moment, p.update, st.Message)
			}
		case st.Phase == routingv1alpha1.CheckPhaseFailed && failed == "":
			failed = fmt.Sprintf("check %s failed in shard %s %s on revision %s: %s", check.Name, shard, moment, p.update, st.Message)
		}
		out = append(out, st)
	}
	ss.Checks = out
	return running, failed
}

// hasChecks reports whether any check runs at when.
func (p *planner) hasChecks(when routingv1alpha1.CheckWhen) bool {
	for i := range p.rsvc.Spec.Strategy.Checks {
		if p.rsvc.Spec.Strategy.Checks[i].Runs(when) {
			return true
		}
	}
	return false
}

// checkEvent records an Event of a check's outcome, naming the check for the metrics.
func (p *planner) checkEvent(check string, warning bool, reason, format string, args ...any) {
	p.event(warning, reason, format, args...)
	p.plan.Events[len(p.plan.Events)-1].Check = check
}
