package rollout

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Counts are one ReplicaSet's replica numbers as the planner needs them.
type Counts struct {
	// Spec is spec.replicas: what the ReplicaSet is asked to run.
	Spec int32
	// Available is status.availableReplicas (ready for minReadySeconds).
	Available int32
}

// Budget is a shard's surge and unavailability allowance in replicas, resolved from the strategy
// with Deployment semantics: maxSurge is a number or a percentage of replicas rounded up,
// maxUnavailable rounded down; if both resolve to 0, surge becomes 1 so that a rollout can move.
// Example: replicas 3, maxSurge 25%, maxUnavailable 0 → Surge 1 (0.75 rounded up), Unavailable 0.
type Budget struct {
	Replicas    int32
	Surge       int32
	Unavailable int32
}

// ResolveBudget resolves maxSurge and maxUnavailable against replicas. Nil values take the
// defaults 25% and 0. Values the CRD would reject resolve as 0.
func ResolveBudget(replicas int32, maxSurge, maxUnavailable *intstr.IntOrString) Budget {
	surgeDefault, unavailDefault := intstr.FromString(routingv1alpha1.DefaultMaxSurge), intstr.FromInt32(routingv1alpha1.DefaultMaxUnavailable)
	if maxSurge == nil {
		maxSurge = &surgeDefault
	}
	if maxUnavailable == nil {
		maxUnavailable = &unavailDefault
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(replicas), true)
	if err != nil || surge < 0 {
		surge = 0
	}
	unavail, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(replicas), false)
	if err != nil || unavail < 0 {
		unavail = 0
	}
	if int32(unavail) > replicas {
		unavail = int(replicas)
	}
	if surge == 0 && unavail == 0 {
		surge = 1
	}
	return Budget{Replicas: replicas, Surge: int32(surge), Unavailable: int32(unavail)}
}

// MinAvailable is the fewest available replicas the shard may have because of schemagate (I2).
func (b Budget) MinAvailable() int32 { return b.Replicas - b.Unavailable }

// Step computes one rolling step of a shard towards target, the way the Deployment controller's
// rolling update does (kubernetes pkg/controller/deployment/rolling.go), from the counts observed
// now. It returns target's new spec.replicas and each of the others' (same order as others).
//
//  1. The floor never rests on unproven pods: when the others' pods (once ready) and target's
//     available pods together cannot cover MinAvailable — the shard's replicas grew mid-step, or
//     target lost pods — the serving set (the other with the most available pods) grows first,
//     and target does not grow in this step (S-18: a resize never puts new capacity on the
//     revision being proven first).
//  2. Never more than Replicas+Surge pods asked for: above it (the shard shrank mid-step),
//     target's unavailable pods go first.
//  3. Scale up: target may grow until all ReplicaSets together ask for Replicas+Surge pods.
//  4. Scale down: first the others' unavailable replicas (the ReplicaSet controller deletes
//     unready pods first), then available ones while at least MinAvailable stay available. Both
//     limits use the counts observed before this step, so a stale count errs on the side of fewer
//     pods removed.
//
// Worked example, replicas 3, surge 1, unavailable 0, old at 3/3 available:
//
//	step 1: new 0→1 (total 4 = 3+1); old stays 3 (available 3, none spare)
//	step 2: new 1/1 available → 4 available, 1 spare → old 3→2; total 3 → new 1→2
//	…until new 3/3 and old 0.
//
// Resized mid-step, old 3/3 and new 1 never ready: replicas 3→8 (surge 2) grows old 3→8 and
// leaves new at 1; back 8→3 (surge 1) takes new's unready pod first and old 8→3, never above 4.
func Step(b Budget, target Counts, others []Counts) (int32, []int32) {
	total := target.Spec
	available := target.Available
	othersSpec := int32(0)
	serving := -1
	for i, o := range others {
		total += o.Spec
		available += o.Available
		othersSpec += o.Spec
		if o.Available > 0 && (serving < 0 || o.Available >= others[serving].Available) {
			serving = i
		}
	}
	out := make([]int32, len(others))
	for i, o := range others {
		out[i] = o.Spec
	}
	newTarget := min(target.Spec, b.Replicas)

	// 1. Grow the serving set to cover the floor.
	if need := b.MinAvailable() - target.Available - othersSpec; serving >= 0 && need > 0 {
		out[serving] += need
		if excess := newTarget + othersSpec + need - (b.Replicas + b.Surge); excess > 0 {
			newTarget -= min(excess, max(0, newTarget-target.Available))
		}
		return newTarget, out
	}

	// 2. Never above Replicas+Surge: target's unavailable pods first.
	cut := int32(0)
	if excess := newTarget + othersSpec - (b.Replicas + b.Surge); excess > 0 {
		cut = min(excess, max(0, newTarget-target.Available))
		newTarget -= cut
	}

	// 3. Scale up within the surge.
	if newTarget < b.Replicas {
		if room := b.Replicas + b.Surge - (newTarget + othersSpec); room > 0 {
			newTarget = min(b.Replicas, newTarget+room)
		}
	}

	// 4. Scale the others down. Unavailable replicas first: removing them costs no availability,
	// but never so many that the shard's pods (minus target's unavailable ones) fall below
	// MinAvailable.
	targetUnavailable := max(0, target.Spec-cut-target.Available)
	cleanup := total - cut - b.MinAvailable() - targetUnavailable
	for i, o := range others {
		if cleanup <= 0 {
			break
		}
		unhealthy := max(0, o.Spec-o.Available)
		d := min(unhealthy, cleanup)
		out[i] -= d
		cleanup -= d
	}

	// Available replicas of the others, while MinAvailable stay available.
	spare := available - b.MinAvailable()
	for i, o := range others {
		if spare <= 0 {
			break
		}
		d := min(out[i], spare, o.Available)
		out[i] -= d
		spare -= d
	}
	return newTarget, out
}
