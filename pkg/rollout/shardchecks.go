package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
)

// shardCheckAttempts returns the Jobs of check for shard, the update revision and when that this
// RoutingService controls, by attempt: each one labelled for them and named exactly as
// ShardCheckJobName gives for its attempt label (a Job of an earlier schemagate, without the
// label, as attempt 0), so neither a hand-made Job nor a relabelled one counts.
func (p *planner) shardCheckAttempts(shard, check string, when routingv1alpha1.CheckWhen) map[int32]*batchv1.Job {
	out := map[int32]*batchv1.Job{}
	for _, j := range p.observed.Jobs {
		if j == nil || !metav1.IsControlledBy(j, p.rsvc) || j.Labels[LabelComponent] != ComponentShardCheck ||
			j.Labels[LabelShard] != shard || j.Labels[LabelCheck] != check || j.Labels[LabelRevision] != p.update ||
			j.Labels[LabelCheckWhen] != string(when) {
			continue
		}
		attempt := int32(0)
		if v, ok := j.Labels[LabelCheckAttempt]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxShardCheckAttempt {
				continue
			}
			attempt = int32(n)
		}
		if j.Name == ShardCheckJobName(p.rsvc.Name, shard, check, p.update, when, attempt) {
			out[attempt] = j
		}
	}
	return out
}

// shardCheckAttempt chooses the attempt of a job check that this step of the shard runs, and its
// Job if it exists. The attempt is the one the stored status names for this revision and moment
// (or a later one found in the cluster: a status write that was lost after it was created);
// with none named (the first run, a retry, the revision applied again later: each starts its
// checks over) it is a new attempt, after every attempt in the cluster, so a new run never reads
// an earlier run's result. ok is false when no attempt number is left (MaxShardCheckAttempt).
func (p *planner) shardCheckAttempt(shard, check string, when routingv1alpha1.CheckWhen, prev *routingv1alpha1.ShardCheckStatus) (attempt int32, job *batchv1.Job, ok bool) {
	attempts := p.shardCheckAttempts(shard, check, when)
	latest := int32(-1)
	for n := range attempts {
		latest = max(latest, n)
	}
	if prev != nil && prev.Revision == p.update && prev.Job != "" {
		if named, known := attemptNamed(prev.Job, p.rsvc.Name, shard, check, p.update, when); known {
			attempt = max(named, latest)
			return attempt, attempts[attempt], true
		}
	}
	if latest+1 > MaxShardCheckAttempt {
		return 0, nil, false
	}
	return max(latest+1, 1), nil, true
}

// attemptNamed returns the attempt whose Job name is name, if name is one of check's Job names.
func attemptNamed(name, rsvcName, shard, check, revision string, when routingv1alpha1.CheckWhen) (int32, bool) {
	base := ShardCheckJobName(rsvcName, shard, check, revision, when, 0)
	if name == base {
		return 0, true
	}
	suffix, found := strings.CutPrefix(name, base+"-")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 1 || n > MaxShardCheckAttempt || ShardCheckJobName(rsvcName, shard, check, revision, when, int32(n)) != name {
		return 0, false
	}
	return int32(n), true
}

// restartChecks makes every shard that the update revision left (it failed there, or rolled it
// back) run its checks afresh when the revision is tried again: the recorded checks are dropped,
// so each job check gets a new attempt (a Job of its own) and each measured check starts from
// zero counts. Promoted shards keep theirs.
func (p *planner) restartChecks() {
	for i := range p.status.Shards {
		switch ss := &p.status.Shards[i]; ss.Step {
		case routingv1alpha1.ShardStepFailed, routingv1alpha1.ShardStepRollingBack, routingv1alpha1.ShardStepRolledBack:
			ss.Checks = nil
		}
	}
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
		attempt, attemptOK := int32(0), true
		if check.Job != nil {
			attempt, job, attemptOK = p.shardCheckAttempt(shard, check.Name, when, previous[check.Name])
		}
		switch {
		case check.Job == nil && !check.Measured():
			// No provider (the CRD requires exactly one): nothing can pass it.
			st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, "the check has no provider: set job, http or prometheus"
		case check.Measured():
			st = p.measuredCheck(shard, check, when, previous[check.Name])
		case job == nil:
			if !attemptOK {
				st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("no attempt is left: %d Jobs of this check ran in shard %s on revision %s", MaxShardCheckAttempt, shard, p.update)
				break
			}
			want := NewShardCheckJob(p.rsvc, shard, *check, p.update, when, attempt)
			st.Job = want.Name
			if holder := p.taken("Job", want.Name); holder != "" {
				// Like every name schemagate needs (S-21): stalled until the name is free; the
				// revision neither fails nor rolls back.
				st.Message = fmt.Sprintf("its Job cannot be created: %s", holder)
				if p.checkConflict == "" {
					p.checkConflict = fmt.Sprintf("check %s of shard %s %s on revision %s: Job %s/%s cannot be created: %s; schemagate never takes it as the check's result; delete or rename it and the check starts",
						check.Name, shard, moment, p.update, p.rsvc.Namespace, want.Name, holder)
				}
				break
			}
			p.act(Action{Kind: CreateJob, Job: want, Note: fmt.Sprintf("check %s of shard %s %s on revision %s (attempt %d)", check.Name, shard, moment, p.update, attempt)})
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
				p.inconclusiveSince = inconclusiveSince(&st)
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

// checksHold applies what holds a shard whose checks have not all passed, once the caller knows
// no promote set them aside: a check Job's name held by another object (Stalled, NameConflict,
// until the name is free; nothing fails or rolls back), or an inconclusive check, which waits for
// a person (promote sets it aside, abort rolls back) and, like every wait (I3), not for ever:
// Reconciling while it waits, Stalled once it waited progressDeadlineSeconds. It reports whether
// one of them holds the shard.
func (p *planner) checksHold() bool {
	switch {
	case p.checkConflict != "":
		if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Reason != routingv1alpha1.ReasonNameConflict || old.Message != p.checkConflict {
			p.event(true, EventNameConflict, "%s", p.checkConflict)
		}
		p.stall(routingv1alpha1.ReasonNameConflict, p.checkConflict)
		p.requeueAt(p.now.Add(conflictRecheck))
		return true
	case p.inconclusive != "":
		limit := p.rsvc.Spec.Strategy.ProgressDeadline()
		if limit <= 0 {
			limit = time.Duration(routingv1alpha1.DefaultProgressDeadlineSeconds) * time.Second
		}
		due := p.inconclusiveSince.Add(limit)
		if p.now.Before(due) {
			p.setActivity(routingv1alpha1.ReasonShardCheckInconclusive, fmt.Sprintf("%s (held until %s, then Stalled)", p.inconclusive, due.UTC().Format(time.RFC3339)))
			p.requeueAt(due)
			return true
		}
		msg := fmt.Sprintf("%s; held since %s, longer than progressDeadlineSeconds (%ds): a person must decide (promote to set the check aside and go on, or abort to roll back)",
			p.inconclusive, p.inconclusiveSince.UTC().Format(time.RFC3339), int64(limit/time.Second))
		if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Status != metav1.ConditionTrue || old.Reason != routingv1alpha1.ReasonShardCheckInconclusive {
			p.event(true, routingv1alpha1.ReasonShardCheckInconclusive, "%s", msg)
		}
		p.stall(routingv1alpha1.ReasonShardCheckInconclusive, msg)
		return true
	}
	return false
}

// inconclusiveSince is when an inconclusive check began to hold its shard: the measurement that
// made it inconclusive (no measurement is taken after it), else the check's start. Both come
// from the stored status, whose times sane bounds by now.
func inconclusiveSince(st *routingv1alpha1.ShardCheckStatus) time.Time {
	if n := len(st.Measurements); n > 0 {
		return st.Measurements[n-1].Time.Time
	}
	if st.StartTime != nil {
		return st.StartTime.Time
	}
	return time.Time{}
}

// checksInvalid refuses a spec whose checks can never be measured as written
// (checkspec.Problems: a CEL condition that does not compile, an address, URL or JSONPath that
// does not parse), which the API server's validation cannot tell: Stalled=True, reason
// InvalidCheck, naming each such field, and no shard starts or steps the update revision, rather
// than failing the first shard after it rolled. It is dispatched after a failed revision, so a
// rollback is never held by it; replica changes still apply. It reports whether it refused.
func (p *planner) checksInvalid() bool {
	problems := p.specProblems()
	if problems == "" {
		return false
	}
	msg := fmt.Sprintf("%s; no shard starts revision %s until the spec is fixed", problems, p.update)
	if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Status != metav1.ConditionTrue || old.Reason != routingv1alpha1.ReasonInvalidCheck || old.Message != msg {
		p.event(true, routingv1alpha1.ReasonInvalidCheck, "%s", msg)
	}
	p.stall(routingv1alpha1.ReasonInvalidCheck, msg)
	return true
}

// specProblems names what in the spec can never be measured as written (checkspec.Problems), or
// "": such a spec cannot roll out, so nothing of it touches the database either (no migration,
// probe or contract Job starts; startMigration, startContract).
func (p *planner) specProblems() string {
	problems := checkspec.Problems(&p.rsvc.Spec)
	parts := make([]string, len(problems))
	for i, pr := range problems {
		parts[i] = pr.String()
	}
	return strings.Join(parts, "; ")
}
