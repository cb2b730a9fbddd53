// Package checkverdict decides what a measured check's results say: the counters a measurement
// moves (Tally), whether stored counters can be believed (Sane), and the verdict the counters give
// against the check's limits (Decide). It is pure: it reads only its arguments, and the counters
// it is given come from status, which is untrusted input.
package checkverdict

import (
	"fmt"
	"strings"
	"time"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Verdict is what a check's counters say: its phase and the message that explains it.
type Verdict struct {
	Phase   routingv1alpha1.CheckPhase
	Message string
}

// Tally counts r in st's counters and keeps it among st's last MaxMeasurementsKept measurements;
// a phase it does not know is an error. It returns r as recorded.
func Tally(st *routingv1alpha1.ShardCheckStatus, r routingv1alpha1.MeasurementResult) routingv1alpha1.MeasurementResult {
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

// Decide is the verdict the counters give, checked in the order Argo Rollouts users know:
// failures beyond failureLimit, then errors in a row beyond consecutiveErrorLimit, then
// inconclusive results beyond inconclusiveLimit, then count reached with at least minSuccessful
// successes. Count reached with fewer goes on measuring: no data is not a pass.
func Decide(st *routingv1alpha1.ShardCheckStatus, m *routingv1alpha1.Measurement) Verdict {
	last := "no measurement yet"
	if n := len(st.Measurements); n > 0 {
		last = "last: " + Describe(st.Measurements[n-1])
	}
	decided := st.Successful + st.Failed + st.Inconclusive
	switch {
	case st.Failed > m.FailureLimitOrDefault():
		return Verdict{routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("%d of %d measurements failed (failureLimit %d); %s", st.Failed, st.Count, m.FailureLimitOrDefault(), last)}
	case st.ConsecutiveErrors > m.ConsecutiveErrorLimitOrDefault():
		return Verdict{routingv1alpha1.CheckPhaseFailed, fmt.Sprintf("%d measurements in a row ended in an error (consecutiveErrorLimit %d); %s", st.ConsecutiveErrors, m.ConsecutiveErrorLimitOrDefault(), last)}
	case st.Inconclusive > m.InconclusiveLimitOrDefault():
		return Verdict{routingv1alpha1.CheckPhaseInconclusive, fmt.Sprintf("%d of %d measurements were inconclusive (inconclusiveLimit %d); %s; promote to go on, or abort", st.Inconclusive, st.Count, m.InconclusiveLimitOrDefault(), last)}
	case decided >= m.CountOrDefault() && st.Successful >= m.MinSuccessfulOrDefault():
		return Verdict{routingv1alpha1.CheckPhasePassed, fmt.Sprintf("%d of %d measurements successful; %s", st.Successful, st.Count, last)}
	case decided >= m.CountOrDefault():
		return Verdict{routingv1alpha1.CheckPhaseRunning, fmt.Sprintf("%d measurements taken, %d successful: a pass needs %d (minSuccessful); %s", decided, st.Successful, m.MinSuccessfulOrDefault(), last)}
	}
	return Verdict{routingv1alpha1.CheckPhaseRunning, fmt.Sprintf("%d of %d measurements taken; %s", decided, m.CountOrDefault(), last)}
}

// fatalPrefix starts the message of a check failed by a fatal measurement.
const fatalPrefix = "the check cannot run as written: "

// Fatal is the message of a check failed by r, a result no retry can change (a condition that
// does not compile, a URL that does not parse).
func Fatal(r routingv1alpha1.MeasurementResult) string { return fatalPrefix + Describe(r) }

// IsFatal reports whether st failed by a fatal result (Fatal): it stays failed until the spec
// changes.
func IsFatal(st *routingv1alpha1.ShardCheckStatus) bool {
	return strings.HasPrefix(st.Message, fatalPrefix)
}

// Describe says what one measurement found, for messages.
func Describe(r routingv1alpha1.MeasurementResult) string {
	s := string(r.Phase)
	if r.Value != "" {
		s += " " + r.Value
	}
	if r.Message != "" {
		s += " (" + r.Message + ")"
	}
	return s
}

// Sane reports whether stored counters can be believed: none negative, the split adds up, and no
// measurement is before the check started, out of order, or after now. Anything else starts the
// check over (status may be hand-edited or restored from a backup).
func Sane(st *routingv1alpha1.ShardCheckStatus, now time.Time) bool {
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
