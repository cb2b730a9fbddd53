package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// maxClockBehind is how far behind the newest time the stored status records the planner's clock
// may be and still be taken as that time: a new leader whose clock is a few seconds behind the
// last writer's (S-44). Within it, the planner's now is the newest recorded time, so a bake, a
// check or a count started by the last writer a moment ago is neither restarted (a start "in the
// future" is otherwise read as an edited status: sanitizeStatus) nor shortened (the stored times
// are kept as they are). Beyond it, a recorded time is an edit or a restore from elsewhere, and
// the rules for a future time apply. 10 s bounds what an edited status can move the clock by.
const maxClockBehind = 10 * time.Second

// plannerClock is the time the planner decides at: the reconciler's clock truncated to the second,
// or the newest time the stored status records when that is ahead of it by at most
// maxClockBehind. It never goes back, for one RoutingService, by less than maxClockBehind.
func plannerClock(st *routingv1alpha1.RoutingServiceStatus, now time.Time) time.Time {
	now = now.Truncate(time.Second)
	newest := now
	see := func(t *metav1.Time) {
		if t != nil && t.After(newest) && !t.After(now.Add(maxClockBehind)) {
			newest = t.Time.Truncate(time.Second)
		}
	}
	for i := range st.Shards {
		ss := &st.Shards[i]
		see(ss.StepStartTime)
		see(ss.ProgressStartTime)
		for j := range ss.Checks {
			c := &ss.Checks[j]
			see(c.StartTime)
			for k := range c.Measurements {
				see(&c.Measurements[k].Time)
			}
		}
	}
	for i := range st.Conditions {
		see(&st.Conditions[i].LastTransitionTime)
	}
	if f := st.Failure; f != nil {
		see(&f.Time)
	}
	see(st.Schema.StartTime)
	see(st.Schema.CompletionTime)
	see(st.Schema.PhaseSince)
	return newest
}
