// Package shardstep decides the next step of one shard during a rollout, from a small input: the
// shard's step and its times, whether the update revision alone serves it fully available, the
// bake and the progress deadline, the checks' tally and whether a person's promote is waiting.
//
// It owns the time arithmetic of a shard's steps (when a bake ends, when the progress deadline
// passes, when a promote ends a bake early) and nothing else: the orchestrator in pkg/rollout
// runs the gates before it (pod health, checks at PodReady, the schema re-check, pre-checks),
// applies the verdict (steps, Events, actions) and sets the conditions. The three functions follow
// the steps of a shard:
//
//	Pending/Progressing, complete     → Complete: Promoted at once, or Baking until a time
//	Pending/Progressing, not complete → Progress: keep rolling until a deadline, or Failed
//	Baking, complete                  → Bake: Promoted, or wait for the bake or its checks
//
// A Baking shard that stops being complete is regressed to Progressing by the orchestrator (it
// keeps its progress deadline) and then decided by Progress.
package shardstep

import "time"

// CompleteInput is a shard the update revision now serves alone, fully available, on its first
// reconcile so (its step is Pending or Progressing).
type CompleteInput struct {
	// Revert: the update revision is the stable one (a revert to the last known good), which
	// needs no bake.
	Revert bool
	// Bake is spec.strategy.bakeSeconds as a duration (0: none).
	Bake time.Duration
	// BakeChecks: the spec has checks that run while a shard bakes.
	BakeChecks bool
	// Promote: a person's promote is waiting to be used.
	Promote bool
}

// CompleteVerdict says what a complete shard does now.
type CompleteVerdict struct {
	// Promoted: the shard is promoted now; otherwise it starts baking for BakeFor.
	Promoted bool
	// BakeFor is how long the bake lasts (0 with Promoted, or when a promote ended it while
	// bake checks still have to run).
	BakeFor time.Duration
	// UsedPromote: the waiting promote ended the bake before it started.
	UsedPromote bool
}

// Complete decides a shard that just became complete: a revert is promoted at once; a promote
// that waited (it came while paused, or before the shard was complete) ends the bake before it
// starts; with no bake left and no check to run while baking, the shard is promoted; otherwise it
// bakes for what is left of the bake (checks run even when a promote made that 0).
func Complete(in CompleteInput) CompleteVerdict {
	bake := in.Bake
	used := false
	if in.Promote && !in.Revert && bake > 0 {
		used, bake = true, 0
	}
	if in.Revert || (bake == 0 && !in.BakeChecks) {
		return CompleteVerdict{Promoted: true, UsedPromote: used}
	}
	return CompleteVerdict{BakeFor: bake, UsedPromote: used}
}

// ProgressInput is a shard on its way to the update revision, not yet complete.
type ProgressInput struct {
	// Start is when its progress began: status.shards[].progressStartTime, or stepStartTime
	// when that is unset (zero: now).
	Start time.Time
	// Deadline is spec.strategy.progressDeadlineSeconds as a duration; 0 or less is taken as
	// the default (a stored 0 never fails every step at once).
	Deadline time.Duration
	Now      time.Time
}

// DefaultDeadline is the progress deadline when the spec's is not positive (the API's default,
// progressDeadlineSeconds 600).
const DefaultDeadline = 600 * time.Second

// ProgressVerdict says whether a shard missed its deadline, and when it is due.
type ProgressVerdict struct {
	// Due is when the progress deadline passes.
	Due time.Time
	// Exceeded: Due is not after Now; the shard fails with ProgressDeadlineExceeded.
	Exceeded bool
}

// Progress decides a shard that is not yet complete: it fails once its progress deadline passed,
// and otherwise keeps rolling until Due.
func Progress(in ProgressInput) ProgressVerdict {
	deadline := in.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	start := in.Start
	if start.IsZero() {
		start = in.Now
	}
	due := start.Add(deadline)
	return ProgressVerdict{Due: due, Exceeded: !in.Now.Before(due)}
}

// BakeInput is a Baking shard that is still complete, with the tally of its checks at bake.
type BakeInput struct {
	// Start is when the bake began (the step's start time).
	Start time.Time
	Bake  time.Duration
	Now   time.Time
	// Failed names a check at bake that failed ("": none).
	Failed string
	// Running is how many checks at bake have no verdict yet.
	Running int
	// Held: a check holds the shard (its Job's name is taken, or it was inconclusive); only
	// a person or a fix ends that.
	Held bool
	// Promote: a person's promote is waiting to be used.
	Promote bool
}

// BakeOutcome is what a Baking shard does now.
type BakeOutcome int

const (
	// Baking: the bake has not ended; look again at Until.
	Baking BakeOutcome = iota
	// BakeFailed: a check failed; the shard fails with ShardCheckFailed.
	BakeFailed
	// BakeHeld: a check holds the shard (BakeInput.Held) while checks still run.
	BakeHeld
	// BakedChecksRunning: the bake ended; Running checks still have no verdict.
	BakedChecksRunning
	// BakePromoted: the bake ended and no check runs; the shard is promoted.
	BakePromoted
)

// String is the outcome's name.
func (o BakeOutcome) String() string {
	switch o {
	case Baking:
		return "Baking"
	case BakeFailed:
		return "BakeFailed"
	case BakeHeld:
		return "BakeHeld"
	case BakedChecksRunning:
		return "BakedChecksRunning"
	case BakePromoted:
		return "BakePromoted"
	}
	return "BakeOutcome(?)"
}

// BakeVerdict is the outcome of a bake, with when it ends and what a promote ended early.
type BakeVerdict struct {
	Outcome BakeOutcome
	// Until is when the bake ends (Now when a promote ended it).
	Until time.Time
	// UsedPromote: the waiting promote ended the bake now; Early is how much of it was left, and
	// SkippedChecks how many checks still ran (their verdicts no longer count).
	UsedPromote   bool
	Early         time.Duration
	SkippedChecks int
}

// Bake decides a Baking shard that is still complete. A failed check fails it at once, before a
// promote is considered; a waiting promote ends the bake, and the checks still running, now; a
// check that holds keeps the shard while checks run; after the bake the shard waits for the
// checks still running, then is promoted.
func Bake(in BakeInput) BakeVerdict {
	if in.Failed != "" {
		return BakeVerdict{Outcome: BakeFailed, Until: in.Start.Add(in.Bake)}
	}
	v := BakeVerdict{Until: in.Start.Add(in.Bake)}
	running := in.Running
	if in.Promote && (in.Now.Before(v.Until) || running > 0) {
		v.UsedPromote, v.Early, v.SkippedChecks = true, max(0, v.Until.Sub(in.Now)), running
		v.Until, running = in.Now, 0
	}
	switch {
	case running > 0 && in.Held:
		v.Outcome = BakeHeld
	case in.Now.Before(v.Until):
		v.Outcome = Baking
	case running > 0:
		v.Outcome = BakedChecksRunning
	default:
		v.Outcome = BakePromoted
	}
	return v
}
