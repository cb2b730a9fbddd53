package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// resize applies spec.shards[].replicas at once to every shard that no rolling step or rollback
// acted on in this reconcile: while the migration runs or has failed, while stalled, in a shard the
// rollout has not reached, and in a promoted shard (scenario S-18; paused excepted: Compute does
// not call it then). A shard served by one ReplicaSet is scaled to replicas. A shard with several
// live ReplicaSets (halted mid-step, or left mixed by a superseded revision) is resized without
// rolling (Resize). A ReplicaSet whose revision's schema is not confirmed (the gate closed, or
// closed again while evidence is re-established) is never scaled up: its pods keep serving and
// count for the floor, and with replicas unchanged nothing in the shard moves. Available=False
// therefore reports a shortage schemagate is acting on, except in a shard that only such a
// ReplicaSet serves, which grows once the gate opens again.
func (p *planner) resize() {
	for _, shard := range p.rsvc.Spec.Shards {
		if p.stepped[shard.Name] {
			continue
		}
		var live []*appsv1.ReplicaSet
		var cs []Counts
		var grows []bool
		for _, rs := range p.set(shard.Name).all {
			if replicasOf(rs) > 0 {
				live = append(live, rs)
				// Real counts: pods of a revision whose schema is not (or no longer) confirmed
				// still serve, and counting them as unavailable would grow another set and take
				// them away while the gate is closed. They only never grow (I1).
				cs = append(cs, counts(rs))
				grows = append(grows, p.mayRun(rs))
			}
		}
		if len(live) == 0 {
			// Scaled to 0 earlier: the ReplicaSet that served the shard last serves it again.
			if rs := p.lastServed(shard.Name, nil); rs != nil && shard.Replicas > 0 && p.mayRun(rs) {
				p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: rs, Replicas: shard.Replicas,
					Note: fmt.Sprintf("shard %s asks for %d replicas: revision %s served it last", shard.Name, shard.Replicas, rs.Labels[LabelRevision])})
				p.event(false, EventShardResized, "shard %s: replicas %d → %d%s, applied to revision %s, which served it last", shard.Name, max(0, p.storedReplicas(shard.Name)), shard.Replicas, p.scaledBy(shard.Name), rs.Labels[LabelRevision])
			}
			continue
		}
		out := resizeGrowing(p.budget(shard), cs, grows)
		changed := false
		for i, rs := range live {
			if out[i] == replicasOf(rs) || (out[i] > replicasOf(rs) && !p.mayRun(rs)) {
				continue
			}
			changed = true
			p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: rs, Replicas: out[i],
				Note: fmt.Sprintf("shard %s asks for %d replicas: revision %s", shard.Name, shard.Replicas, rs.Labels[LabelRevision])})
		}
		if changed && p.storedReplicas(shard.Name) != shard.Replicas {
			p.event(false, EventShardResized, "shard %s: replicas %d → %d%s, applied to the revisions serving it", shard.Name, p.storedReplicas(shard.Name), shard.Replicas, p.scaledBy(shard.Name))
		}
	}
}

// storedReplicas is the shard's replicas as the stored status last reported them (-1 if none).
func (p *planner) storedReplicas(shard string) int32 {
	for _, ss := range p.rsvc.Status.Shards {
		if ss.Name == shard {
			return ss.Replicas
		}
	}
	return -1
}

// Resize computes new spec.replicas for the live ReplicaSets of a shard that is not stepping, in
// the order given. One ReplicaSet: replicas. Several: the serving set (the one with the most
// available pods) grows until it, with the pods available elsewhere, covers MinAvailable and the
// shard asks for at least replicas; above replicas+surge, pods go in this
// order: unavailable pods of the non-serving ReplicaSets (newest first), the serving set's
// unavailable pods, then the non-serving ones' available pods while at least MinAvailable stay.
//
// Example, replicas 3→8, surge 2, v1 3/3 (serving) and v2 1/0 (never ready): v1 → 8, v2 stays 1.
// Then 8→3, surge 1: v2's unready pod goes first (→0), then v1 8→4 (= replicas+surge).
//
// With replicas unchanged nothing moves: a shard at the end of a step (v1 1/1, v2 3/3, replicas
// 3, surge 1) asks for 4 = replicas+surge and has 4 available, so no pod is added or taken.
func Resize(b Budget, live []Counts) []int32 {
	grows := make([]bool, len(live))
	for i := range grows {
		grows[i] = true
	}
	return resizeGrowing(b, live, grows)
}

// resizeGrowing is Resize where only the ReplicaSets with grows[i] may be scaled up: the serving
// set is the one of them with the most available pods. The others are revisions whose schema is
// not confirmed (the gate is closed, or closed again): their available pods count towards the
// floor, as they serve, but they never get more pods (I1). A shard where none may grow is only
// ever scaled down, and only above replicas+surge.
//
// Example, the gate closes with v1 1/1 and v2 3/3 (v2 may not grow), replicas 3, surge 1: the
// floor of 3 is covered by v2's pods, nothing above 4: nothing changes. Replicas 3→5 (surge 2):
// v1 grows 1→2, so that v2's 3 available pods and v1's 2 cover the floor of 5; v2 stays at 3.
func resizeGrowing(b Budget, live []Counts, grows []bool) []int32 {
	out := make([]int32, len(live))
	total, available := int32(0), int32(0)
	serving := -1
	for i, c := range live {
		out[i] = c.Spec
		total += c.Spec
		available += c.Available
		if grows[i] && c.Available > 0 && (serving < 0 || c.Available >= live[serving].Available) {
			serving = i
		}
	}
	if len(live) == 1 {
		if grows[0] || b.Replicas < out[0] {
			out[0] = b.Replicas
		}
		return out
	}
	if serving >= 0 {
		// The floor rests on the serving set's pods, once ready, and on pods already available
		// elsewhere, never on unproven ones; and the shard asks for at least replicas.
		need := b.MinAvailable() - (available - live[serving].Available) - live[serving].Spec
		grow := max(need, b.Replicas-total, 0)
		out[serving] += grow
		total += grow
	}
	excess := total - (b.Replicas + b.Surge)
	take := func(i int, n int32) {
		d := min(excess, n)
		if d > 0 {
			out[i] -= d
			excess -= d
		}
	}
	for i := len(live) - 1; i >= 0 && excess > 0; i-- {
		if i != serving {
			take(i, max(0, live[i].Spec-live[i].Available))
		}
	}
	if serving >= 0 && excess > 0 {
		take(serving, max(0, live[serving].Spec-live[serving].Available))
	}
	spare := available - b.MinAvailable()
	for i := 0; i < len(live) && excess > 0 && spare > 0; i++ {
		if i == serving {
			continue
		}
		d := min(excess, spare, out[i], live[i].Available)
		out[i] -= d
		excess -= d
		spare -= d
	}
	if serving >= 0 && excess > 0 && spare > 0 {
		d := min(excess, spare, out[serving])
		out[serving] -= d
	}
	return out
}

// scaledBy is ", set by <manager> through RoutingShard <name>" for an autoscaled shard whose size
// its scaler set, "" otherwise: the ShardResized Event names who changed the number.
func (p *planner) scaledBy(shard string) string {
	st := p.scaling[shard]
	if st == nil || st.ScaledBy == "" || st.ScaledBy == ScaledBySchemagate {
		return ""
	}
	return fmt.Sprintf(", set by %s through RoutingShard %s", st.ScaledBy, st.RoutingShard)
}
