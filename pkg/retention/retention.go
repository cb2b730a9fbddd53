// Package retention decides which of a RoutingService's finished objects go, under a history
// limit: the scaled-down ReplicaSets of old revisions in a shard (spec.strategy.revisionHistoryLimit)
// and the finished Jobs of one kind (spec.strategy.jobHistoryLimit). The rule is the same for
// both, and the planner (pkg/rollout: cleanup.go, jobs_history.go) decides which objects still
// matter; this package only counts.
package retention

import "time"

// Item is one object under the limit.
type Item struct {
	// Keep: it still matters (a rollback target, the schema evidence, ...) and is never
	// deleted; it counts towards the limit all the same.
	Keep bool
	// Ripe is when it may be deleted (zero: at once): before that it is kept for now, and the
	// verdict says when to look again.
	Ripe time.Time
}

// Verdict is what Prune decided.
type Verdict struct {
	// Delete are the indexes of the items to delete, oldest first.
	Delete []int
	// Recheck is the earliest Ripe of an item kept only because it was not ripe (zero: none).
	Recheck time.Time
}

// Prune takes items oldest first and deletes the oldest until at most limit remain, passing over
// those to keep and those not ripe at now (a limit below 0 is taken as 0). So the newest limit
// items always stay, and more stay while kept ones are among the oldest.
func Prune(items []Item, limit int, now time.Time) Verdict {
	var v Verdict
	excess := len(items) - max(limit, 0)
	for i, it := range items {
		if excess <= 0 {
			break
		}
		if it.Keep {
			continue
		}
		if now.Before(it.Ripe) {
			if v.Recheck.IsZero() || it.Ripe.Before(v.Recheck) {
				v.Recheck = it.Ripe
			}
			continue
		}
		excess--
		v.Delete = append(v.Delete, i)
	}
	return v
}
