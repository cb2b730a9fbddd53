package rollout

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
)

// measuredCheck advances an http or prometheus check of shard at when (issue 11). Its state is
// status.shards[].checks[] of the previous reconcile, kept only when it is for the same update
// revision and moment; the counters decide the phase on every reconcile (a hand-edited phase
// alone changes nothing). A measurement is due initialDelaySeconds after the check started, then
// every intervalSeconds; a due measurement taken by the reconciler (Observed.Measurements) is
// recorded, else it is requested (Plan.Measurements). The last MaxMeasurementsKept
// measurements are kept.
func (p *planner) measuredCheck(shard string, check *routingv1alpha1.ShardCheck, when routingv1alpha1.CheckWhen, prev *routingv1alpha1.ShardCheckStatus) routingv1alpha1.ShardCheckStatus {
	st := routingv1alpha1.ShardCheckStatus{Name: check.Name, When: when, DryRun: check.DryRun, Phase: routingv1alpha1.CheckPhaseRunning,
		Revision: p.update, StartTime: &metav1.Time{Time: p.now}, Message: "started"}
	if prev != nil && prev.Revision == p.update && prev.StartTime != nil && !prev.StartTime.After(p.now) && sane(prev, p.now) {
		st.StartTime, st.Message = prev.StartTime, prev.Message
		st.Count, st.Successful, st.Failed, st.Inconclusive, st.Errors, st.ConsecutiveErrors = prev.Count, prev.Successful, prev.Failed, prev.Inconclusive, prev.Errors, prev.ConsecutiveErrors
		st.Measurements = append([]routingv1alpha1.MeasurementResult(nil), prev.Measurements...)
		if prev.Phase == routingv1alpha1.CheckPhaseFailed && st.Message != "" && fatalMessage(prev) {
			// A fatal result (the check cannot run as written) stays until the spec changes,
			// which makes a new revision or a new check.
			st.Phase = routingv1alpha1.CheckPhaseFailed
			return st
		}
	}
	if st.StartTime.Equal(&metav1.Time{Time: p.now}) && st.Count == 0 {
		// The check starts: say once if its query's range will likely find no data.
		if msg := p.checkWarning(check.Name); msg != "" {
			p.checkEvent(check.Name, true, EventCheckWindowShort, "check %s in shard %s: %s", check.Name, shard, msg)
		}
	}
	m := &check.Measurement
	st.Phase, st.Message = measuredPhase(&st, m)
	if st.Phase != routingv1alpha1.CheckPhaseRunning {
		return st
	}
	due := st.StartTime.Add(m.InitialDelay())
	if n := len(st.Measurements); n > 0 {
		due = st.Measurements[n-1].Time.Add(m.Interval())
	}
	if p.now.Before(due) {
		p.requeueAt(due)
		return st
	}
	key := MeasurementKey{Shard: shard, Check: check.Name, Revision: p.update, When: when}
	taken, ok := p.takenMeasurement(key)
	if !ok {
		p.plan.Measurements = append(p.plan.Measurements, MeasurementRequest{MeasurementKey: key, Check: *check.DeepCopy(), Vars: map[string]string{
			"shard": shard, "revision": p.update, "stableRevision": cmp.Or(p.status.StableRevision, "none"),
			"namespace": p.rsvc.Namespace, "name": p.rsvc.Name, "schemaVersion": p.rsvc.Spec.Schema.Version,
		}})
		p.requeueAt(p.now.Add(m.Interval()))
		return st
	}
	r := taken.Result
	r.Time = metav1.Time{Time: p.now}
	r.Value, r.Message = clip(r.Value, 64), clip(r.Message, 1024)
	r = tally(&st, r)
	if taken.Fatal {
		st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, fatalPrefix+describe(r)
		return st
	}
	st.Phase, st.Message = measuredPhase(&st, m)
	if st.Phase == routingv1alpha1.CheckPhaseRunning {
		p.requeueAt(p.now.Add(m.Interval()))
	}
	return st
}

// tally counts r in st's counters and keeps it among st's last MaxMeasurementsKept
// measurements; a phase it does not know is an error. It returns r as recorded.
func tally(st *routingv1alpha1.ShardCheckStatus, r routingv1alpha1.MeasurementResult) routingv1alpha1.MeasurementResult {
	st.Count++
	switch r.Phase {
	case routingv1alpha1.MeasurementSuccessful:
		st.Successful++
		st.ConsecutiveErrors = 0
	case routingv1alpha1.MeasurementFailed:
		st.Failed++
		st.ConsecutiveErrors = 0
	case routingv1alpha1.MeasurementInconclusive:
		st.Inconclusive++
		st.ConsecutiveErrors = 0
	default:
		r.Phase = routingv1alpha1.MeasurementError
		st.Errors++
		st.ConsecutiveErrors++
	}
	st.Measurements = append(st.Measurements, r)
	if n := len(st.Measurements); n > routingv1alpha1.MaxMeasurementsKept {
		st.Measurements = st.Measurements[n-routingv1alpha1.MaxMeasurementsKept:]
	}
	return r
}

// checkWarning is what checkspec.Warnings says of the check named name ("" when nothing).
func (p *planner) checkWarning(name string) string {
	for i := range p.rsvc.Spec.Strategy.Checks {
		if p.rsvc.Spec.Strategy.Checks[i].Name != name {
			continue
		}
		at := fmt.Sprintf("spec.strategy.checks[%d].", i)
		for _, w := range checkspec.Warnings(&p.rsvc.Spec) {
			if strings.HasPrefix(w.Field, at) {
				return w.String()
			}
		}
	}
	return ""
}

// fatalPrefix starts the message of a check failed by a fatal measurement.
const fatalPrefix = "the check cannot run as written: "

func fatalMessage(st *routingv1alpha1.ShardCheckStatus) bool {
	return len(st.Message) >= len(fatalPrefix) && st.Message[:len(fatalPrefix)] == fatalPrefix
}

// measuredPhase is the phase the counters give, and its message, in the order Argo Rollouts
// users know: failures beyond failureLimit, then errors in a row beyond consecutiveErrorLimit,
// then inconclusive results beyond inconclusiveLimit, then count reached with at least
// minSuccessful successes (count reached with fewer measures on: no data is not a pass).
func measuredPhase(st *routingv1alpha1.ShardCheckStatus, m *routingv1alpha1.Measurement) (routingv1alpha1.CheckPhase, string) {
	last := "no measurement yet"
	if n := len(st.Measurements); n > 0 {
		last = "last: " + describe(st.Measurements[n-1])
	}
	decided := st.Successful + st.Failed + st.Inconclusive
	switch {
	case st.Failed > m.FailureLimitOrDefault():
		return routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("%d of %d measurements failed (failureLimit %d); %s", st.Failed, st.Count, m.FailureLimitOrDefault(), last)
	case st.ConsecutiveErrors > m.ConsecutiveErrorLimitOrDefault():
		return routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("%d measurements in a row ended in an error (consecutiveErrorLimit %d); %s", st.ConsecutiveErrors, m.ConsecutiveErrorLimitOrDefault(), last)
	case st.Inconclusive > m.InconclusiveLimitOrDefault():
		return routingv1alpha1.CheckPhaseInconclusive, fmt.Sprintf("%d of %d measurements were inconclusive (inconclusiveLimit %d); %s; promote to go on, or abort", st.Inconclusive, st.Count, m.InconclusiveLimitOrDefault(), last)
	case decided >= m.CountOrDefault() && st.Successful >= m.MinSuccessfulOrDefault():
		return routingv1alpha1.CheckPhasePassed, fmt.Sprintf("%d of %d measurements successful; %s", st.Successful, st.Count, last)
	case decided >= m.CountOrDefault():
		// No data is not a pass: it measures on until minSuccessful or a limit decides.
		return routingv1alpha1.CheckPhaseRunning, fmt.Sprintf("%d measurements taken, %d successful: a pass needs %d (minSuccessful); %s", decided, st.Successful, m.MinSuccessfulOrDefault(), last)
	}
	return routingv1alpha1.CheckPhaseRunning, fmt.Sprintf("%d of %d measurements taken; %s", decided, m.CountOrDefault(), last)
}

// describe says what one measurement found, for messages.
func describe(r routingv1alpha1.MeasurementResult) string {
	s := string(r.Phase)
	if r.Value != "" {
		s += " " + r.Value
	}
	if r.Message != "" {
		s += " (" + r.Message + ")"
	}
	return s
}

// sane reports whether stored counters can be believed: none negative, the split adds up, and no
// measurement is in the future. Anything else starts the check over (status may be hand-edited or
// restored from a backup).
func sane(st *routingv1alpha1.ShardCheckStatus, now time.Time) bool {
	for _, n := range []int32{st.Count, st.Successful, st.Failed, st.Inconclusive, st.Errors, st.ConsecutiveErrors} {
		if n < 0 {
			return false
		}
	}
	if int64(st.Successful)+int64(st.Failed)+int64(st.Inconclusive)+int64(st.Errors) != int64(st.Count) || st.ConsecutiveErrors > st.Errors {
		return false
	}
	if len(st.Measurements) > int(st.Count) || len(st.Measurements) > routingv1alpha1.MaxMeasurementsKept {
		return false
	}
	var last time.Time
	for _, m := range st.Measurements {
		if m.Time.Before(st.StartTime) || m.Time.Time.Before(last) || m.Time.After(now) {
			return false
		}
		last = m.Time.Time
	}
	return true
}

// takenMeasurement returns the measurement the reconciler took for key, if any.
func (p *planner) takenMeasurement(key MeasurementKey) (TakenMeasurement, bool) {
	for _, t := range p.observed.Measurements {
		if t.MeasurementKey == key {
			return t, true
		}
	}
	return TakenMeasurement{}, false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
