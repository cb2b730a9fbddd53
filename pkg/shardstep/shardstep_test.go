package shardstep

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestComplete(t *testing.T) {
	for _, c := range []struct {
		name string
		in   CompleteInput
		want CompleteVerdict
	}{
		{"bakes for the spec's bake", CompleteInput{Bake: time.Minute}, CompleteVerdict{BakeFor: time.Minute}},
		{"no bake, no checks: promoted at once", CompleteInput{}, CompleteVerdict{Promoted: true}},
		{"no bake but bake checks: bakes 0 s for its checks", CompleteInput{BakeChecks: true}, CompleteVerdict{}},
		{"a revert skips the bake and its checks", CompleteInput{Revert: true, Bake: time.Hour, BakeChecks: true}, CompleteVerdict{Promoted: true}},
		{"a revert leaves a promote waiting", CompleteInput{Revert: true, Bake: time.Hour, Promote: true}, CompleteVerdict{Promoted: true}},
		{"a waiting promote ends the bake before it starts", CompleteInput{Bake: time.Hour, Promote: true}, CompleteVerdict{Promoted: true, UsedPromote: true}},
		{"a waiting promote ends the bake, the checks still run", CompleteInput{Bake: time.Hour, BakeChecks: true, Promote: true}, CompleteVerdict{UsedPromote: true}},
		{"a promote with no bake to end is left for the bake's own end", CompleteInput{Promote: true}, CompleteVerdict{Promoted: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Complete(c.in); got != c.want {
				t.Errorf("Complete(%+v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	for _, c := range []struct {
		name string
		in   ProgressInput
		want ProgressVerdict
	}{
		{"within the deadline", ProgressInput{Start: at(0), Deadline: time.Minute, Now: at(59)}, ProgressVerdict{Due: at(60)}},
		{"at the deadline: exceeded", ProgressInput{Start: at(0), Deadline: time.Minute, Now: at(60)}, ProgressVerdict{Due: at(60), Exceeded: true}},
		{"past the deadline", ProgressInput{Start: at(0), Deadline: time.Minute, Now: at(3600)}, ProgressVerdict{Due: at(60), Exceeded: true}},
		{"a stored 0 is the default, not an instant failure", ProgressInput{Start: at(0), Now: at(1)}, ProgressVerdict{Due: at(600)}},
		{"a negative deadline is the default", ProgressInput{Start: at(0), Deadline: -time.Second, Now: at(1)}, ProgressVerdict{Due: at(600)}},
		{"no start: it starts now", ProgressInput{Deadline: time.Minute, Now: at(5)}, ProgressVerdict{Due: at(65)}},
		{"a start in the future counts from there", ProgressInput{Start: at(30), Deadline: time.Minute, Now: at(0)}, ProgressVerdict{Due: at(90)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Progress(c.in); got != c.want {
				t.Errorf("Progress(%+v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestBake(t *testing.T) {
	base := BakeInput{Start: at(0), Bake: time.Minute}
	with := func(now int, edit func(*BakeInput)) BakeInput {
		in := base
		in.Now = at(now)
		if edit != nil {
			edit(&in)
		}
		return in
	}
	for _, c := range []struct {
		name string
		in   BakeInput
		want BakeVerdict
	}{
		{"bakes until start + bake", with(10, nil), BakeVerdict{Outcome: Baking, Until: at(60)}},
		{"promoted when the bake ends", with(60, nil), BakeVerdict{Outcome: BakePromoted, Until: at(60)}},
		{"baked, a check still runs", with(61, func(in *BakeInput) { in.Running = 1 }), BakeVerdict{Outcome: BakedChecksRunning, Until: at(60)}},
		{"a running check does not end the bake early", with(10, func(in *BakeInput) { in.Running = 2 }), BakeVerdict{Outcome: Baking, Until: at(60)}},
		{"a failed check fails at once", with(10, func(in *BakeInput) { in.Failed = "errors" }), BakeVerdict{Outcome: BakeFailed, Until: at(60)}},
		{"a failed check wins over a promote", with(10, func(in *BakeInput) { in.Failed = "errors"; in.Promote = true }), BakeVerdict{Outcome: BakeFailed, Until: at(60)}},
		{"a held check holds while checks run", with(10, func(in *BakeInput) { in.Running = 1; in.Held = true }), BakeVerdict{Outcome: BakeHeld, Until: at(60)}},
		{"held after the bake too", with(600, func(in *BakeInput) { in.Running = 1; in.Held = true }), BakeVerdict{Outcome: BakeHeld, Until: at(60)}},
		{"a hold with no check running holds nothing", with(60, func(in *BakeInput) { in.Held = true }), BakeVerdict{Outcome: BakePromoted, Until: at(60)}},
		{"a promote ends the bake now", with(15, func(in *BakeInput) { in.Promote = true }),
			BakeVerdict{Outcome: BakePromoted, Until: at(15), UsedPromote: true, Early: 45 * time.Second}},
		{"a promote sets running checks aside", with(70, func(in *BakeInput) { in.Promote = true; in.Running = 2; in.Held = true }),
			BakeVerdict{Outcome: BakePromoted, Until: at(70), UsedPromote: true, SkippedChecks: 2}},
		{"a promote after the bake with nothing running is not used here", with(60, func(in *BakeInput) { in.Promote = true }),
			BakeVerdict{Outcome: BakePromoted, Until: at(60)}},
		{"no bake: promoted at its start", BakeInput{Start: at(0), Now: at(0)}, BakeVerdict{Outcome: BakePromoted, Until: at(0)}},
		{"a clock behind the start bakes until the end", with(-3, nil), BakeVerdict{Outcome: Baking, Until: at(60)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Bake(c.in); got != c.want {
				t.Errorf("Bake(%+v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestBakeOutcomeString(t *testing.T) {
	seen := map[string]bool{}
	for o := Baking; o <= BakePromoted; o++ {
		s := o.String()
		if s == "BakeOutcome(?)" || seen[s] {
			t.Errorf("outcome %d is named %q", o, s)
		}
		seen[s] = true
	}
	if got := BakeOutcome(99).String(); got != "BakeOutcome(?)" {
		t.Errorf("an unknown outcome is named %q", got)
	}
}
