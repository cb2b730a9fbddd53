package rollout

// One rolling step of a shard towards a revision within its budget, and the counts it reads.

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// counts reads a ReplicaSet's numbers for Step. Available pods above spec.replicas are being
// removed by the ReplicaSet controller (which removes unavailable pods first), so they are not
// counted: right after a scale-down from 3 to 2, status may still say 3 available, and counting 3
// would let the next step take away a pod that is already going (found by the I2 checker).
func counts(rs *appsv1.ReplicaSet) Counts {
	if rs == nil {
		return Counts{}
	}
	spec := replicasOf(rs)
	return Counts{Spec: spec, Available: min(rs.Status.AvailableReplicas, spec)}
}

// complete reports whether revision alone serves the shard (see completeRS); with no ReplicaSet
// for revision, only a shard of 0 replicas is complete.
func (s *shardSet) complete(revision string, replicas int32) bool {
	target := s.byRev[revision]
	if target == nil {
		for _, rs := range s.all {
			if replicasOf(rs) != 0 || rs.Status.Replicas != 0 {
				return false
			}
		}
		return replicas == 0
	}
	return s.completeRS(target, replicas)
}

// completeRS reports whether target alone serves the shard: it asks for replicas and has them all
// available (as of its current generation), and every other ReplicaSet of the shard is scaled to 0
// with no pods left.
func (s *shardSet) completeRS(target *appsv1.ReplicaSet, replicas int32) bool {
	for _, rs := range s.all {
		if rs == target {
			continue
		}
		if replicasOf(rs) != 0 || rs.Status.Replicas != 0 {
			return false
		}
	}
	return replicasOf(target) == replicas &&
		target.Status.ObservedGeneration >= target.Generation &&
		target.Status.AvailableReplicas >= replicas &&
		target.Status.Replicas == replicas
}

// rollTowards plans one rolling step of shard towards revision within budget: create revision's
// ReplicaSet if missing, else step towards it (rollTowardsRS).
func (p *planner) rollTowards(shard routingv1alpha1.ShardSpec, revision string, b Budget, why string) {
	target := p.set(shard.Name).byRev[revision]
	if target != nil {
		p.rollTowardsRS(shard, target, b, why, true)
		return
	}
	p.stepped[shard.Name] = true
	var others []Counts
	for _, rs := range p.set(shard.Name).all {
		others = append(others, counts(rs))
	}
	newTarget, _ := Step(b, Counts{}, others)
	if revision == p.update && !p.mayRunOn(p.updateRange()) {
		// I1: pods only on a schema inside their revision's range (the callers check it too).
		newTarget = 0
	}
	p.act(Action{Kind: CreateReplicaSet, ReplicaSet: NewReplicaSet(p.rsvc, shard, revision, newTarget),
		Note: fmt.Sprintf("%s: shard %s gets revision %s", why, shard.Name, revision)})
}

// rollTowardsRS plans one rolling step of shard towards the ReplicaSet target within budget:
// scale it up and the shard's other ReplicaSets down (Step). target is scaled up only if the
// schema its revision requires is confirmed (I1).
//
// With patient set (a promotion, not a rollback), a step that would change the replicas of a
// ReplicaSet the ReplicaSet controller has not caught up with waits for its status write instead
// (settled.go): the step is the same a moment later, and the controller's write does not conflict.
// A rollback never waits for it: restoring service comes before saving the controller requests.
func (p *planner) rollTowardsRS(shard routingv1alpha1.ShardSpec, target *appsv1.ReplicaSet, b Budget, why string, patient bool) {
	p.stepped[shard.Name] = true
	set := p.set(shard.Name)
	var others []*appsv1.ReplicaSet
	var otherCounts []Counts
	for _, rs := range set.all {
		if rs != target {
			others = append(others, rs)
			otherCounts = append(otherCounts, p.provenCounts(rs))
		}
	}
	newTarget, newOthers := Step(b, counts(target), otherCounts)
	if patient && p.unsettledChange(append([]*appsv1.ReplicaSet{target}, others...), append([]int32{newTarget}, newOthers...)) != nil {
		p.requeueAt(p.now.Add(settleRecheck))
		return
	}
	revision := target.Labels[LabelRevision]
	if newTarget != replicasOf(target) && (newTarget < replicasOf(target) || p.mayRun(target)) {
		p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: target, Replicas: newTarget,
			Note: fmt.Sprintf("%s: revision %s in shard %s (replicas %d, surge %d)", why, revision, shard.Name, b.Replicas, b.Surge)})
	}
	for i, rs := range others {
		if newOthers[i] != replicasOf(rs) && (newOthers[i] < replicasOf(rs) || p.mayRun(rs)) {
			verb := "scale down"
			if newOthers[i] > replicasOf(rs) {
				verb = "grow the serving set:"
			}
			p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: rs, Replicas: newOthers[i], RemovePods: patient && newOthers[i] == 0 && p.mayRun(rs),
				Note: fmt.Sprintf("%s: %s revision %s in shard %s, keeping %d available", why, verb, rs.Labels[LabelRevision], shard.Name, b.MinAvailable())})
		}
	}
}

// provenCounts are rs's counts for Step, with its available pods hidden when its schema is not
// confirmed, so that Step never grows it as the serving set (I1). A revision the database is
// ahead of keeps its available pods counted: they serve, and are not taken away faster than the
// shard's budget allows (I2); it is never grown either way (mayRun).
func (p *planner) provenCounts(rs *appsv1.ReplicaSet) Counts {
	c := counts(rs)
	if !p.mayRun(rs) && !p.databaseAheadOf(rs) {
		c.Available = 0
	}
	return c
}

// databaseAheadOf reports whether the database is confirmed at a schema above the newest rs's
// revision runs on.
func (p *planner) databaseAheadOf(rs *appsv1.ReplicaSet) bool {
	r, db := p.revisionRange(rs), p.confirmedNow()
	return r.Max != "" && db != "" && !schemaversion.AtLeast(r.Max, db)
}
