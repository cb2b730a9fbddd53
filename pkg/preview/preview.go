// Package preview says what applying a RoutingService manifest would do, before it is applied
// (issue 12, `kubectl schemagate plan`): whether it starts a new revision, which migration runs,
// which shards re-roll and in what order, how many pods each replaces, the availability floor, a
// duration range from the deadlines, bake and checks, and the risky changes; and, asked with
// ComputeDecided, what the manager's own planner decides on the first reconcile (decision.go). It
// is pure: it reads the manifest and, when there is one, the live object (its spec and status)
// and what plan read of the cluster, at the time it is given, nothing else.
package preview

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Preview is what applying a manifest would do.
type Preview struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Live: the manifest was compared with the object in the cluster; otherwise with nothing
	// (a RoutingService that does not exist yet, or --offline).
	Live bool `json:"live"`
	// Rollout: applying it starts a new revision, and pods are replaced shard by shard.
	Rollout bool `json:"rollout"`
	// CurrentRevision is the live spec's revision ("" without a live object); NextRevision the
	// manifest's.
	CurrentRevision string `json:"currentRevision,omitempty"`
	NextRevision    string `json:"nextRevision"`
	// Migration says which migration Job runs before any pod of the new revision.
	Migration Migration `json:"migration"`
	// Shards are the manifest's shards in promotion order, then the removed ones.
	Shards []Shard `json:"shards"`
	// Duration is the range the whole rollout should take: migration, then each shard that
	// re-rolls (progress, bake, checks). Max is what the deadlines allow before a failure.
	Duration Range `json:"duration"`
	// Changes are the other changes (replicas, strategy, checks) that start no rollout.
	Changes []string `json:"changes,omitempty"`
	// Risks are the changes a reviewer should look at twice.
	Risks []Risk `json:"risks,omitempty"`
	// Lifecycle is the schema lifecycle: expand, roll out, contract, and the revisions' ranges.
	Lifecycle Lifecycle `json:"lifecycle"`
	// Probe is what the migration probe found (plan --migrations), nil without one.
	Probe *ProbeOutcome `json:"probe,omitempty"`
	// Decision is what the manager's first reconcile of the manifest decides (its planner run on
	// what plan read; decision.go); nil when it was not computed (Undecided says why) or not asked
	// for (Compute, ComputeWith).
	Decision *Decision `json:"decision,omitempty"`
	// Undecided says why no Decision was computed: a shard in another cluster, a list plan could
	// not read; "" otherwise.
	Undecided string `json:"undecided,omitempty"`
	// Refused says why the manager would refuse the manifest or stop on it: the Decision's
	// Stalled=True or IncompatibleRevision, or, with no Decision, a migration this preview's own
	// reading of the ranges finds refused (IncompatibleRevision); "" when nothing says so. plan
	// exits non-zero when it is set.
	Refused string `json:"refused,omitempty"`

	// returns: the manifest's revision ran in the cluster before (a revert).
	returns bool
}

// Migration is the schema part of a preview.
type Migration struct {
	// From is the confirmed schema version (status.schema.confirmedVersion of the live object;
	// "" when unknown); To is the manifest's spec.schema.version.
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// Runs: a migration Job runs (the confirmed version is below To, or unknown).
	Runs bool `json:"runs"`
	// Deadline bounds it: activeDeadlineSeconds (plus a schema check after it, when configured).
	Deadline time.Duration `json:"deadline"`
	// Attempt is the attempt that runs when applying the manifest starts the next attempt of a
	// failed migration of the same version (retriedAttempt); 0 otherwise. Failed is the reason the
	// live attempt failed with.
	Attempt int32  `json:"attempt,omitempty"`
	Failed  string `json:"failed,omitempty"`
}

// Shard is one shard's part of a preview.
type Shard struct {
	Name string `json:"name"`
	// Order is its place in promotion order, from 1; 0 for a removed shard.
	Order int `json:"order"`
	// Replicas: the manifest's (the live one's for a removed shard); LiveReplicas: the live spec's.
	Replicas     int32 `json:"replicas"`
	LiveReplicas int32 `json:"liveReplicas,omitempty"`
	// Action is "re-roll" (every pod replaced by the new revision), "create" (a new shard),
	// "scale" (replicas only), "remove" (scaled to 0 and deleted at once), or "none".
	Action string `json:"action"`
	// Replaced is how many pods the new revision replaces; Floor the fewest available pods the
	// shard keeps meanwhile (replicas - maxUnavailable); Surge the extra pods it may run.
	Replaced int32 `json:"replaced"`
	Floor    int32 `json:"floor"`
	Surge    int32 `json:"surge"`
	// Duration is this shard's step: progress, then bake and checks (pre-checks before).
	Duration Range `json:"duration"`
	// Cluster is the cluster the shard runs in (spec.shards[].cluster.name of the manifest, of the
	// live spec for a removed shard); "" for the RoutingService's own cluster. LiveCluster is the
	// live spec's, and Moved says they differ.
	Cluster     string `json:"cluster,omitempty"`
	LiveCluster string `json:"liveCluster,omitempty"`
	Moved       bool   `json:"moved,omitempty"`
}

// Touches says whether applying the manifest writes to the shard's cluster: it changes the shard,
// moves it there, or removes it from there (a shard removed from, or moved out of, another cluster
// is deleted there once the rollout is complete: schemagate.io/clusters-used records where it ran).
func (s Shard) Touches() bool {
	return s.Action != "none" || s.Moved
}

// clusterName is a shard's spec.shards[].cluster.name, "" for the RoutingService's own cluster.
func clusterName(s routingv1alpha1.ShardSpec) string {
	if s.Cluster == nil {
		return ""
	}
	return s.Cluster.Name
}

// Range is a duration range.
type Range struct {
	Min time.Duration `json:"min"`
	Max time.Duration `json:"max"`
}

func (r Range) add(o Range) Range { return Range{Min: r.Min + o.Min, Max: r.Max + o.Max} }

// Risk is a change worth a second look, with the field it comes from.
type Risk struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Compute compares next (the manifest, CRD defaults applied or not) with live (nil: no object
// in the cluster).
func Compute(live, next *routingv1alpha1.RoutingService) Preview { return ComputeWith(live, next, nil) }

// ComputeWith is Compute with the live object's ReplicaSets (those labelled with its name): the
// schema ranges they record decide which migrations and rollbacks the revisions they run allow.
// It computes no Decision (ComputeDecided does).
func ComputeWith(live, next *routingv1alpha1.RoutingService, replicaSets []appsv1.ReplicaSet) Preview {
	return compute(live, next, replicaSets, nil, "")
}

// compute is the preview, with the manager's Decision d when there is one (undecided says why
// not, "" when none was asked for).
func compute(live, next *routingv1alpha1.RoutingService, replicaSets []appsv1.ReplicaSet, d *Decision, undecided string) Preview {
	p := Preview{Namespace: next.Namespace, Name: next.Name, Live: live != nil, NextRevision: rollout.Revision(&next.Spec),
		Decision: d, Undecided: undecided}
	if live != nil {
		p.CurrentRevision = rollout.Revision(&live.Spec)
	}
	p.migration(live, next)
	if p.CurrentRevision == p.NextRevision {
		p.Migration.Attempt, p.Migration.Failed = retriedAttempt(live, next)
	}
	p.shards(live, next)
	p.Rollout = false
	for _, s := range p.Shards {
		p.Rollout = p.Rollout || s.Action == "re-roll" || s.Action == "create"
	}
	p.changes(live, next)
	p.risks(live, next)
	p.Duration = Range{Max: p.Migration.Deadline}
	for _, s := range p.Shards {
		p.Duration = p.Duration.add(s.Duration)
	}
	p.lifecycle(live, next, replicaSets)
	if d != nil {
		p.Refused = d.Refusal()
	}
	return p
}

func (p *Preview) migration(live, next *routingv1alpha1.RoutingService) {
	m := Migration{To: next.Spec.Schema.Version}
	if live != nil {
		m.From = live.Status.Schema.ConfirmedVersion
	}
	m.Runs = m.From == "" || !schemaversion.AtLeast(m.From, m.To)
	if m.Runs {
		m.Deadline = seconds(next.Spec.Schema.Migration.ActiveDeadlineSecondsOrDefault()) + rollout.MigrationGrace
		if c := next.Spec.Schema.Check; c != nil && c.AfterMigration {
			m.Deadline += seconds(c.ActiveDeadlineSecondsOrDefault()) + rollout.MigrationGrace
		}
	}
	p.Migration = m
}

func (p *Preview) shards(live, next *routingv1alpha1.RoutingService) {
	live, next = withScaledSizes(live, live), withScaledSizes(live, next)
	liveShards := map[string]routingv1alpha1.ShardSpec{}
	if live != nil {
		for _, s := range live.Spec.Shards {
			liveShards[s.Name] = s
		}
	}
	served := servedRevisions(live, p.CurrentRevision)
	newRevision := p.CurrentRevision != p.NextRevision
	// Back to the stable revision (a revert of a rollout that failed or is under way): a shard
	// already fully on it is promoted at once, without bake or checks (the planner's rule for the
	// stable revision), and only pods of the live spec's revision are replaced.
	toStable := live != nil && newRevision && p.NextRevision == live.Status.StableRevision
	st := next.Spec.Strategy
	for i, s := range next.Spec.Shards {
		b := rollout.ResolveBudget(s.Replicas, st.MaxSurge, st.MaxUnavailable)
		sh := Shard{Name: s.Name, Order: i + 1, Replicas: s.Replicas, Floor: b.MinAvailable(), Surge: b.Surge, Action: "none", Cluster: clusterName(s)}
		old, existed := liveShards[s.Name]
		if existed {
			sh.LiveReplicas = old.Replicas
			sh.LiveCluster = clusterName(old)
			sh.Moved = sh.LiveCluster != sh.Cluster
		}
		now, known := served[s.Name]
		switch {
		case !existed:
			sh.Action, sh.Replaced = "create", 0
			sh.Duration = stepDuration(next, s, b, i == 0, toStable)
		case newRevision && known && now.Revision == p.NextRevision && now.Updated == 0:
			// It serves the manifest's revision with no pod of the live spec's: nothing to replace.
			if old.Replicas != s.Replicas {
				sh.Action = "scale"
			}
		case newRevision:
			sh.Action, sh.Replaced = "re-roll", old.Replicas
			if known && now.Revision == p.NextRevision {
				// Only the live revision's pods go (a shard rolled back, or part way through).
				sh.Replaced = min(now.Updated, old.Replicas)
			}
			sh.Duration = stepDuration(next, s, b, i == 0, toStable)
		case p.Migration.Attempt > 0 && !(known && now.Revision == p.NextRevision && now.Updated == 0):
			// The same revision, whose rollout waited for a failed migration: the next attempt
			// runs, and the rollout goes on into every shard that does not serve it yet.
			sh.Action, sh.Replaced = "re-roll", old.Replicas
			sh.Duration = stepDuration(next, s, b, i == 0, false)
		case old.Replicas != s.Replicas:
			sh.Action = "scale"
		}
		p.Shards = append(p.Shards, sh)
	}
	if live == nil {
		return
	}
	for _, s := range live.Spec.Shards {
		if !slices.ContainsFunc(next.Spec.Shards, func(n routingv1alpha1.ShardSpec) bool { return n.Name == s.Name }) {
			p.Shards = append(p.Shards, Shard{Name: s.Name, Replicas: s.Replicas, LiveReplicas: s.Replicas, Action: "remove",
				Cluster: clusterName(s), LiveCluster: clusterName(s)})
		}
	}
}

// servedRevisions returns, by shard name, what the live object's status says each shard serves:
// its revision and how many pods it has of the live spec's revision (currentRevision). Nothing
// when the status is not of the live spec (status.updateRevision differs: not reconciled yet).
func servedRevisions(live *routingv1alpha1.RoutingService, currentRevision string) map[string]routingv1alpha1.ShardStatus {
	out := map[string]routingv1alpha1.ShardStatus{}
	if live == nil || live.Status.UpdateRevision != currentRevision {
		return out
	}
	for _, s := range live.Status.Shards {
		if s.Revision != "" {
			out[s.Name] = s
		}
	}
	return out
}

// stepDuration is a shard step's range. Min: one rolling wave per surge-and-unavailable batch
// of minReadySeconds, then the bake and the shortest the checks can take; Max: the progress
// deadline (past it the step fails), then the longer of the bake and the longest the checks may
// take. Pre-checks come before either. Towards the stable revision (toStable) there is no bake,
// check or pre-check: the progress alone.
func stepDuration(rsvc *routingv1alpha1.RoutingService, s routingv1alpha1.ShardSpec, b rollout.Budget, first, toStable bool) Range {
	st := rsvc.Spec.Strategy
	batch := max(1, b.Surge+b.Unavailable)
	waves := (s.Replicas + batch - 1) / batch
	r := Range{Min: time.Duration(waves) * seconds(int64(st.MinReadySecondsOrDefault())), Max: st.ProgressDeadline()}
	if toStable {
		return r
	}
	bake := st.Bake()
	var checkMin, checkMax, preMin, preMax time.Duration
	for i := range st.Checks {
		c := &st.Checks[i]
		lo, hi := checkRange(c)
		if c.Runs(routingv1alpha1.CheckWhenBake) && !c.DryRun {
			checkMin, checkMax = max(checkMin, lo), max(checkMax, hi)
		}
		if c.Runs(routingv1alpha1.CheckWhenBeforeStart) && !c.DryRun {
			preMin, preMax = max(preMin, lo), max(preMax, hi)
		}
	}
	if sc := rsvc.Spec.Schema.Check; sc != nil && sc.BeforeEachShard && !first {
		preMax = max(preMax, seconds(sc.ActiveDeadlineSecondsOrDefault())+rollout.MigrationGrace)
	}
	r.Min += preMin + max(bake, checkMin)
	r.Max += preMax + max(bake, checkMax)
	return r
}

// checkRange is how long one check takes: a measured check takes initialDelaySeconds plus
// count-1 intervals at least, and at most that plus consecutiveErrorLimit more intervals each
// ending in a timeout; a Job check takes anything up to activeDeadlineSeconds + 10 s.
func checkRange(c *routingv1alpha1.ShardCheck) (time.Duration, time.Duration) {
	if c.Job != nil {
		return 0, seconds(c.Job.ActiveDeadlineSecondsOrDefault()) + rollout.MigrationGrace
	}
	m := &c.Measurement
	lo := m.InitialDelay() + time.Duration(m.CountOrDefault()-1)*m.Interval()
	extra := m.ConsecutiveErrorLimitOrDefault() + m.InconclusiveLimitOrDefault() + m.FailureLimitOrDefault()
	hi := m.InitialDelay() + time.Duration(m.CountOrDefault()-1+extra)*m.Interval() + time.Duration(m.CountOrDefault()+extra)*m.Timeout()
	return lo, hi
}

func (p *Preview) changes(live, next *routingv1alpha1.RoutingService) {
	if live == nil {
		return
	}
	l, n := live.Spec, next.Spec
	if !equality.Semantic.DeepEqual(l.Strategy.Checks, n.Strategy.Checks) {
		p.Changes = append(p.Changes, fmt.Sprintf("spec.strategy.checks: %d → %d checks (they apply from the next shard step)", len(l.Strategy.Checks), len(n.Strategy.Checks)))
	}
	ls, ns := l.Strategy, n.Strategy
	ls.Checks, ns.Checks = nil, nil
	if !equality.Semantic.DeepEqual(ls, ns) {
		p.Changes = append(p.Changes, "spec.strategy changes (surge, bake, deadlines or failure policy): no new revision")
	}
	switch {
	case p.Migration.Attempt > 0:
		p.Changes = append(p.Changes, fmt.Sprintf("spec.schema.migration.template changes after attempt %d of schema %s failed (%s): attempt %d runs, and the rollout of revision %s goes on",
			p.Migration.Attempt-1, n.Schema.Version, p.Migration.Failed, p.Migration.Attempt, p.NextRevision))
	case !equality.Semantic.DeepEqual(l.Schema.Migration, n.Schema.Migration) && l.Schema.Version == n.Schema.Version:
		p.Changes = append(p.Changes, "spec.schema.migration changes without a new spec.schema.version: no migration runs for it (the version is migrated once)")
	}
	if l.Paused != n.Paused {
		p.Changes = append(p.Changes, fmt.Sprintf("spec.paused: %v → %v", l.Paused, n.Paused))
	}
	if orDefault(l.Schema.Evidence) != orDefault(n.Schema.Evidence) {
		p.Changes = append(p.Changes, fmt.Sprintf("spec.schema.evidence: %s → %s (what confirms the next schema version)", orDefault(l.Schema.Evidence), orDefault(n.Schema.Evidence)))
	}
	for _, s := range p.Shards {
		if s.Action != "create" && s.Action != "remove" && s.LiveReplicas != s.Replicas {
			note := ""
			if s.Action == "re-roll" {
				note = " (the new revision's ReplicaSet is sized to it)"
			}
			p.Changes = append(p.Changes, fmt.Sprintf("shard %s: replicas %d → %d%s", s.Name, s.LiveReplicas, s.Replicas, note))
		}
	}
}

func (p *Preview) risks(live, next *routingv1alpha1.RoutingService) {
	n := next.Spec
	if next.Spec.Strategy.FailurePolicyOrDefault() == routingv1alpha1.FailurePolicyHalt && p.Rollout {
		p.Risks = append(p.Risks, Risk{"spec.strategy.failurePolicy", "Halt: a failed shard stays on the failed revision until a person acts"})
	}
	if n.Schema.Evidence == routingv1alpha1.SchemaEvidenceJobSuccess {
		p.Risks = append(p.Risks, Risk{"spec.schema.evidence", "JobSuccess: a migration Job that succeeds without a schema report opens the gate, so a Job that exits 0 without migrating lets pods needing schema " + n.Schema.Version + " run on an older database; Report (the default) waits for the database to confirm it"})
	}
	if !n.Strategy.PodHealthEnforced() && p.Rollout {
		p.Risks = append(p.Risks, Risk{"spec.strategy.podHealth.mode", "Off: a container of the new revision that restarts, crash-loops or is OOM-killed does not fail its shard; readiness and the checks alone judge it"})
	}
	for _, w := range checkspec.Warnings(&n) {
		p.Risks = append(p.Risks, Risk{w.Field, w.Message})
	}
	for _, s := range p.Shards {
		if (s.Action == "re-roll" || s.Action == "create") && s.Replicas > 0 && s.Floor < s.Replicas {
			p.Risks = append(p.Risks, Risk{"spec.strategy.maxUnavailable", fmt.Sprintf("shard %s may drop to %d of %d available pods while it re-rolls", s.Name, s.Floor, s.Replicas)})
		}
	}
	if live == nil {
		return
	}
	l := live.Spec
	// A lower version on a revision that declares no range (one that declares it says which
	// schemas it runs on, which the lifecycle's risks check against the database).
	if n.Schema.Compatibility == nil && schemaversion.Valid(l.Schema.Version) && schemaversion.Valid(n.Schema.Version) && !schemaversion.AtLeast(n.Schema.Version, l.Schema.Version) {
		p.Risks = append(p.Risks, Risk{"spec.schema.version", fmt.Sprintf("goes down from %s to %s: schemagate never migrates down, so the new revision runs on a schema-%s database; safe only if that change was expand-only",
			l.Schema.Version, n.Schema.Version, maxVersion(live.Status.Schema.ConfirmedVersion, l.Schema.Version))})
	}
	var liveOrder, nextOrder []string
	for _, s := range l.Shards {
		if slices.ContainsFunc(n.Shards, func(x routingv1alpha1.ShardSpec) bool { return x.Name == s.Name }) {
			liveOrder = append(liveOrder, s.Name)
		}
	}
	for _, s := range n.Shards {
		if slices.Contains(liveOrder, s.Name) {
			nextOrder = append(nextOrder, s.Name)
		}
	}
	if !slices.Equal(liveOrder, nextOrder) {
		p.Risks = append(p.Risks, Risk{"spec.shards", fmt.Sprintf("the shard order changes (%v → %v): the revision covers every shard's nodeSelector in order, so every shard re-rolls, in the new order", liveOrder, nextOrder)})
	}
	for _, s := range n.Shards {
		for _, o := range l.Shards {
			if o.Name == s.Name && !equality.Semantic.DeepEqual(o.NodeSelector, s.NodeSelector) && !(len(o.NodeSelector) == 0 && len(s.NodeSelector) == 0) {
				p.Risks = append(p.Risks, Risk{"spec.shards[" + s.Name + "].nodeSelector", fmt.Sprintf("changes: every shard re-rolls, not only %s (the revision covers every shard's nodeSelector)", s.Name)})
			}
		}
	}
	for _, s := range p.Shards {
		switch {
		case s.Action == "remove" && s.LiveCluster != "":
			p.Risks = append(p.Risks, Risk{"spec.shards", fmt.Sprintf("shard %s is removed from cluster %s: its %d pods there are deleted, all at once, when the rollout is complete everywhere else (while %s does not answer, they keep running)", s.Name, s.LiveCluster, s.Replicas, s.LiveCluster)})
		case s.Action == "remove":
			p.Risks = append(p.Risks, Risk{"spec.shards", fmt.Sprintf("shard %s is removed: its %d pods are scaled to 0 and its ReplicaSets deleted at once, not step by step", s.Name, s.Replicas)})
		case s.Replicas == 0 && s.LiveReplicas > 0:
			p.Risks = append(p.Risks, Risk{"spec.shards[" + s.Name + "].replicas", fmt.Sprintf("0: shard %s stops serving", s.Name)})
		}
	}
	p.unreachableRisks(live, next)
	for _, s := range p.Shards {
		if s.Moved {
			fate := "is left running there, neither scaled down nor deleted"
			if s.LiveCluster != "" {
				fate = "is deleted there once the rollout is complete"
			}
			p.Risks = append(p.Risks, Risk{"spec.shards[" + s.Name + "].cluster", fmt.Sprintf("%s → %s: the shard is started in %s; what it runs in %s %s",
				ClusterText(s.LiveCluster), ClusterText(s.Cluster), ClusterText(s.Cluster), ClusterText(s.LiveCluster), fate)})
		}
	}
	if len(l.Strategy.Checks) > 0 && len(n.Strategy.Checks) == 0 {
		p.Risks = append(p.Risks, Risk{"spec.strategy.checks", "every check is removed: shards are judged by pod readiness and the pod-health gate alone"})
	}
}

// unreachableRisks flags each shard the apply changes whose cluster the live status reports as
// not Reachable: nothing is written there until it answers, and under unreachablePolicy Hold
// (the default) the rollout waits at that shard.
func (p *Preview) unreachableRisks(live, next *routingv1alpha1.RoutingService) {
	reported := map[string]*routingv1alpha1.ShardClusterStatus{}
	for i := range live.Status.Shards {
		if c := live.Status.Shards[i].Cluster; c != nil {
			reported[live.Status.Shards[i].Name] = c
		}
	}
	policy := next.Spec.Strategy.UnreachablePolicyOrDefault()
	for _, s := range p.Shards {
		c := reported[s.Name]
		if !s.Touches() || s.Cluster == "" || c == nil || c.Name != s.Cluster || c.State == routingv1alpha1.ClusterReachable {
			continue
		}
		then := "the rollout holds at shard " + s.Name + " (unreachablePolicy Hold)"
		if policy == routingv1alpha1.UnreachableSkip {
			then = "the shards after " + s.Name + " go on, and it is rolled when its cluster answers (unreachablePolicy Skip)"
		}
		msg := fmt.Sprintf("cluster %s is %s", c.Name, c.State)
		if c.UnreachableSince != nil {
			msg += " since " + c.UnreachableSince.UTC().Format(time.RFC3339)
		}
		if c.Message != "" {
			msg += " (" + c.Message + ")"
		}
		p.Risks = append(p.Risks, Risk{"spec.shards[" + s.Name + "].cluster", msg + ": nothing is written there until it answers; " + then})
	}
}

func orDefault(e routingv1alpha1.SchemaEvidence) routingv1alpha1.SchemaEvidence {
	if e == "" {
		return routingv1alpha1.SchemaEvidenceReport
	}
	return e
}

func maxVersion(a, b string) string {
	if a != "" && schemaversion.Valid(a) && schemaversion.AtLeast(a, b) {
		return a
	}
	return b
}

func seconds[T int32 | int64](n T) time.Duration { return time.Duration(n) * time.Second }

// retriedAttempt is the migration attempt that applying next starts without a new revision, and
// the reason the live attempt failed with: the manager starts attempt n+1 of a failed migration of
// the same version when spec.schema.migration.template changed since attempt n (a fix applied
// through Git), unless the database is dirty (only a person may clear that, with a retry). It
// reads the live object's status (SchemaReady and status.schema.attempt): 0 and "" when the live
// migration did not fail, or the template is the same.
func retriedAttempt(live, next *routingv1alpha1.RoutingService) (int32, string) {
	if live == nil || live.Status.Schema.Attempt <= 0 || !schemaversion.Equal(live.Spec.Schema.Version, next.Spec.Schema.Version) ||
		equality.Semantic.DeepEqual(live.Spec.Schema.Migration.Template, next.Spec.Schema.Migration.Template) {
		return 0, ""
	}
	c := meta.FindStatusCondition(live.Status.Conditions, routingv1alpha1.ConditionSchemaReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != live.Generation {
		return 0, ""
	}
	switch c.Reason {
	case routingv1alpha1.ReasonMigrationFailed, routingv1alpha1.ReasonMigrationDeadline,
		routingv1alpha1.ReasonSchemaMismatch, routingv1alpha1.ReasonInvalidSchemaReport:
		return live.Status.Schema.Attempt + 1, c.Reason
	}
	return 0, ""
}

// withScaledSizes returns r, or a copy of it in which each shard with spec.shards[].autoscaling
// has the size its scaler set, as live's status reports it (status.shards[].replicas of a shard
// with scaling): an autoscaled shard keeps that size whatever its spec.shards[].replicas says
// (docs/autoscaling.md), so the plan neither scales it to the spec's number nor counts that
// number as its pods. A shard the status reports no scaling for keeps its spec size.
func withScaledSizes(live, r *routingv1alpha1.RoutingService) *routingv1alpha1.RoutingService {
	if live == nil || r == nil {
		return r
	}
	scaled := map[string]int32{}
	for _, ss := range live.Status.Shards {
		if ss.Scaling != nil {
			scaled[ss.Name] = max(ss.Replicas, 0)
		}
	}
	var out *routingv1alpha1.RoutingService
	for i, s := range r.Spec.Shards {
		n, ok := scaled[s.Name]
		if s.Autoscaling == nil || !ok || n == s.Replicas {
			continue
		}
		if out == nil {
			out = r.DeepCopy()
		}
		out.Spec.Shards[i].Replicas = n
	}
	if out == nil {
		return r
	}
	return out
}
