package checkverdict

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The verdict of the counters against the limits, one rule at a time and in the order the rules
// are read (a failure beyond the limit wins over a count reached).
func TestDecide(t *testing.T) {
	m := &routingv1alpha1.Measurement{Count: ptr.To(int32(3)), FailureLimit: ptr.To(int32(0)), InconclusiveLimit: ptr.To(int32(1)),
		ConsecutiveErrorLimit: ptr.To(int32(2)), MinSuccessful: ptr.To(int32(3))}
	cases := []struct {
		name                                       string
		count, ok, failed, inconclusive, errs, row int32
		phase                                      routingv1alpha1.CheckPhase
		says                                       string
	}{
		{"nothing yet", 0, 0, 0, 0, 0, 0, routingv1alpha1.CheckPhaseRunning, "0 of 3 measurements taken; no measurement yet"},
		{"under way", 1, 1, 0, 0, 0, 0, routingv1alpha1.CheckPhaseRunning, "1 of 3 measurements taken"},
		{"passed", 3, 3, 0, 0, 0, 0, routingv1alpha1.CheckPhasePassed, "3 of 3 measurements successful"},
		{"a failure beyond the limit", 1, 0, 1, 0, 0, 0, routingv1alpha1.CheckPhaseFailed, "(failureLimit 0)"},
		{"a failure wins over a count reached", 3, 2, 1, 0, 0, 0, routingv1alpha1.CheckPhaseFailed, "failureLimit"},
		{"errors in a row beyond the limit", 3, 0, 0, 0, 3, 3, routingv1alpha1.CheckPhaseFailed, "(consecutiveErrorLimit 2)"},
		{"errors not in a row", 6, 3, 0, 0, 3, 1, routingv1alpha1.CheckPhasePassed, "3 of 6 measurements successful"},
		{"inconclusive beyond the limit", 2, 0, 0, 2, 0, 0, routingv1alpha1.CheckPhaseInconclusive, "promote to go on, or abort"},
		{"count reached without enough successes", 3, 2, 0, 1, 0, 0, routingv1alpha1.CheckPhaseRunning, "a pass needs 3 (minSuccessful)"},
		{"errors count towards nothing decided", 3, 1, 0, 0, 2, 2, routingv1alpha1.CheckPhaseRunning, "1 of 3 measurements taken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &routingv1alpha1.ShardCheckStatus{Count: tc.count, Successful: tc.ok, Failed: tc.failed, Inconclusive: tc.inconclusive,
				Errors: tc.errs, ConsecutiveErrors: tc.row}
			v := Decide(st, m)
			if v.Phase != tc.phase || !strings.Contains(v.Message, tc.says) {
				t.Fatalf("Decide = %+v, want %s saying %q", v, tc.phase, tc.says)
			}
		})
	}
}

// Tally moves the counters one result at a time, an unknown phase counts as an error, and only
// the last MaxMeasurementsKept results are kept.
func TestTally(t *testing.T) {
	st := &routingv1alpha1.ShardCheckStatus{}
	for _, phase := range []routingv1alpha1.MeasurementPhase{routingv1alpha1.MeasurementError, "Bogus", routingv1alpha1.MeasurementSuccessful,
		routingv1alpha1.MeasurementFailed, routingv1alpha1.MeasurementInconclusive, routingv1alpha1.MeasurementError} {
		Tally(st, routingv1alpha1.MeasurementResult{Phase: phase})
	}
	if st.Count != 6 || st.Successful != 1 || st.Failed != 1 || st.Inconclusive != 1 || st.Errors != 3 || st.ConsecutiveErrors != 1 {
		t.Fatalf("counters %+v", st)
	}
	if got := st.Measurements[1].Phase; got != routingv1alpha1.MeasurementError {
		t.Fatalf("an unknown phase recorded as %q, want Error", got)
	}
	for range routingv1alpha1.MaxMeasurementsKept {
		Tally(st, routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementSuccessful})
	}
	if len(st.Measurements) != routingv1alpha1.MaxMeasurementsKept || !Sane(st, time.Now()) {
		t.Fatalf("%d kept (sane %v), want %d", len(st.Measurements), Sane(st, time.Now()), routingv1alpha1.MaxMeasurementsKept)
	}
}

// Stored counters are believed only when they add up and their times are in order and not ahead.
func TestSane(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) routingv1alpha1.MeasurementResult {
		return routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementSuccessful, Time: metav1.Time{Time: now.Add(d)}}
	}
	start := &metav1.Time{Time: now.Add(-time.Minute)}
	cases := []struct {
		name string
		st   routingv1alpha1.ShardCheckStatus
		want bool
	}{
		{"empty", routingv1alpha1.ShardCheckStatus{}, true},
		{"adds up", routingv1alpha1.ShardCheckStatus{StartTime: start, Count: 2, Successful: 2, Measurements: []routingv1alpha1.MeasurementResult{at(-30 * time.Second), at(-10 * time.Second)}}, true},
		{"a negative counter", routingv1alpha1.ShardCheckStatus{Count: 0, Successful: 1, Failed: -1}, false},
		{"a split that does not add up", routingv1alpha1.ShardCheckStatus{Count: 3, Successful: 1}, false},
		{"more errors in a row than errors", routingv1alpha1.ShardCheckStatus{Count: 1, Errors: 1, ConsecutiveErrors: 2}, false},
		{"more results than the count", routingv1alpha1.ShardCheckStatus{StartTime: start, Count: 1, Successful: 1, Measurements: []routingv1alpha1.MeasurementResult{at(-30 * time.Second), at(-10 * time.Second)}}, false},
		{"a result in the future", routingv1alpha1.ShardCheckStatus{StartTime: start, Count: 1, Successful: 1, Measurements: []routingv1alpha1.MeasurementResult{at(time.Hour)}}, false},
		{"a result before the start", routingv1alpha1.ShardCheckStatus{StartTime: start, Count: 1, Successful: 1, Measurements: []routingv1alpha1.MeasurementResult{at(-time.Hour)}}, false},
		{"results out of order", routingv1alpha1.ShardCheckStatus{StartTime: start, Count: 2, Successful: 2, Measurements: []routingv1alpha1.MeasurementResult{at(-10 * time.Second), at(-30 * time.Second)}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sane(&tc.st, now); got != tc.want {
				t.Fatalf("Sane = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFatal(t *testing.T) {
	r := routingv1alpha1.MeasurementResult{Phase: routingv1alpha1.MeasurementError, Message: "condition does not compile"}
	st := &routingv1alpha1.ShardCheckStatus{Message: Fatal(r)}
	if !IsFatal(st) || st.Message != "the check cannot run as written: Error (condition does not compile)" {
		t.Fatalf("Fatal = %q, IsFatal %v", st.Message, IsFatal(st))
	}
	if IsFatal(&routingv1alpha1.ShardCheckStatus{Message: "3 of 3 measurements failed"}) {
		t.Fatal("an ordinary failure read as fatal")
	}
}
