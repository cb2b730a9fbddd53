package rollout

import (
	"cmp"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
	"github.com/schemagate/schemagate/pkg/checkverdict"
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
	if prev != nil && prev.Revision == p.update && prev.StartTime != nil && !prev.StartTime.After(p.now) && checkverdict.Sane(prev, p.now) {
		st.StartTime, st.Message = prev.StartTime, prev.Message
		st.Count, st.Successful, st.Failed, st.Inconclusive, st.Errors, st.ConsecutiveErrors = prev.Count, prev.Successful, prev.Failed, prev.Inconclusive, prev.Errors, prev.ConsecutiveErrors
		st.Measurements = append([]routingv1alpha1.MeasurementResult(nil), prev.Measurements...)
		if prev.Phase == routingv1alpha1.CheckPhaseFailed && st.Message != "" && checkverdict.IsFatal(prev) {
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
	v := checkverdict.Decide(&st, m)
	st.Phase, st.Message = v.Phase, v.Message
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
	r = checkverdict.Tally(&st, r)
	if taken.Fatal {
		st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, checkverdict.Fatal(r)
		return st
	}
	v = checkverdict.Decide(&st, m)
	st.Phase, st.Message = v.Phase, v.Message
	if st.Phase == routingv1alpha1.CheckPhaseRunning {
		p.requeueAt(p.now.Add(m.Interval()))
	}
	return st
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
