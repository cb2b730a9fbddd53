package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// View is what `get` computes from a RoutingService and the objects schemagate made for it: the
// tree prints it, and `-o json|yaml` prints it as it is. Times are absolute; the *Age and timer
// texts are relative to the moment the view was computed (Now).
type View struct {
	Name               string    `json:"name"`
	Namespace          string    `json:"namespace"`
	Now                time.Time `json:"now"`
	Generation         int64     `json:"generation"`
	ObservedGeneration int64     `json:"observedGeneration"`
	Created            time.Time `json:"created"`
	Age                string    `json:"age"`
	Paused             bool      `json:"paused"`
	// State is Ready, Stalled, Progressing, Paused, NotReady, or Pending (the controller has not
	// yet written a status for this generation).
	State string `json:"state"`
	// Condition is the condition State comes from ("Stalled=True", "Ready=False", ...); Reason
	// and Message are its own.
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// Done is true when the rollout of this generation is over: Ready=True or Stalled=True, both
	// for the current generation.
	Done       bool            `json:"done"`
	Conditions []ConditionView `json:"conditions,omitempty"`
	Schema     SchemaView      `json:"schema"`
	Revisions  RevisionsView   `json:"revisions"`
	Strategy   StrategyView    `json:"strategy"`
	Progress   ProgressView    `json:"progress"`
	Failure    *FailureView    `json:"failure,omitempty"`
	// Jobs are the migration and schema check Jobs, oldest first.
	Jobs []JobView `json:"jobs,omitempty"`
	// Shards are in spec order; a shard that has objects but is no longer in the spec comes last.
	Shards []ShardView `json:"shards"`
}

// ConditionView is one status condition, with whether it describes the current generation.
type ConditionView struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration"`
	Current            bool      `json:"current"`
	LastTransition     time.Time `json:"lastTransitionTime"`
}

// SchemaView is the schema gate.
type SchemaView struct {
	Required     string `json:"required"`
	Confirmed    string `json:"confirmed,omitempty"`
	ConfirmedBy  string `json:"confirmedBy,omitempty"`
	Reported     string `json:"reported,omitempty"`
	ReportedBy   string `json:"reportedBy,omitempty"`
	Evidence     string `json:"evidence"`
	MigrationJob string `json:"migrationJob,omitempty"`
	Attempt      int32  `json:"attempt,omitempty"`
	CheckJob     string `json:"checkJob,omitempty"`
	// Probe is status.schema.probe: the migration probe of the required version.
	Probe *routingv1alpha1.ProbeStatus `json:"probe,omitempty"`
	// Gate is the SchemaReady condition: "True SchemaConfirmed", "False Migrating", ...
	Gate string `json:"gate,omitempty"`
	// Lifecycle is the expand → roll out → contract lifecycle, when the status reports one.
	Lifecycle *LifecycleView `json:"lifecycle,omitempty"`
}

// RevisionsView names the stable (last-known-good) and update revisions.
type RevisionsView struct {
	Stable string `json:"stable,omitempty"`
	Update string `json:"update,omitempty"`
	// StableImages and UpdateImages are the container images of each revision, where people
	// look for a version: from a ReplicaSet of the revision, or for the update revision the
	// spec's template before any ReplicaSet of it exists.
	StableImages []string `json:"stableImages,omitempty"`
	UpdateImages []string `json:"updateImages,omitempty"`
}

// revisionImages fills the images of v's stable and update revisions (RevisionsView).
func revisionImages(v *RevisionsView, r *routingv1alpha1.RoutingService, sets []appsv1.ReplicaSet) {
	of := func(rev string) []string {
		for _, rs := range sets {
			if rev != "" && rs.Labels[rollout.LabelRevision] == rev {
				return containerImages(rs.Spec.Template.Spec.Containers)
			}
		}
		return nil
	}
	v.StableImages, v.UpdateImages = of(v.Stable), of(v.Update)
	if v.UpdateImages == nil && v.Update != "" && v.Update == rollout.Revision(&r.Spec) {
		v.UpdateImages = containerImages(r.Spec.Template.Spec.Containers)
	}
}

func containerImages(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Image)
	}
	return out
}

// StrategyView is spec.strategy with its defaults applied, and a one-line summary.
type StrategyView struct {
	Summary                 string   `json:"summary"`
	MaxSurge                string   `json:"maxSurge"`
	MaxUnavailable          string   `json:"maxUnavailable"`
	BakeSeconds             int32    `json:"bakeSeconds"`
	ProgressDeadlineSeconds int32    `json:"progressDeadlineSeconds"`
	FailurePolicy           string   `json:"failurePolicy"`
	Checks                  []string `json:"checks,omitempty"`
}

// ProgressView counts the shards promoted to the update revision and names the current one.
type ProgressView struct {
	Promoted     int    `json:"promoted"`
	Total        int    `json:"total"`
	CurrentShard string `json:"currentShard,omitempty"`
	CurrentStep  string `json:"currentStep,omitempty"`
	// NextShard is the first shard not promoted yet, when none is current.
	NextShard string `json:"nextShard,omitempty"`
	Summary   string `json:"summary"`
}

// FailureView is status.failure.
type FailureView struct {
	Revision string    `json:"revision"`
	Reason   string    `json:"reason"`
	Shard    string    `json:"shard,omitempty"`
	Message  string    `json:"message"`
	Time     time.Time `json:"time"`
	Age      string    `json:"age"`
}

// ShardView is one shard: its step in the rollout of the update revision, its timer, its checks
// and its ReplicaSets.
type ShardView struct {
	Name      string `json:"name"`
	InSpec    bool   `json:"inSpec"`
	Replicas  int32  `json:"replicas"`
	Step      string `json:"step,omitempty"`
	StepRev   string `json:"stepRevision,omitempty"`
	Serving   string `json:"servingRevision,omitempty"`
	Updated   int32  `json:"updatedReplicas"`
	Ready     int32  `json:"readyReplicas"`
	Available int32  `json:"availableReplicas"`
	// Current is the shard the rollout is working on (or failed in).
	Current   bool         `json:"current"`
	StepStart *time.Time   `json:"stepStartTime,omitempty"`
	StepAge   string       `json:"stepAge,omitempty"`
	Timer     *TimerView   `json:"timer,omitempty"`
	Checks    []CheckView  `json:"checks,omitempty"`
	RSs       []RSView     `json:"replicaSets,omitempty"`
	Jobs      []JobView    `json:"jobs,omitempty"`
	Pods      []PodView    `json:"pods,omitempty"`
	Failure   *FailureView `json:"failure,omitempty"`
	// Cluster is the cluster the shard runs in, when it is not the RoutingService's own.
	Cluster *ClusterView `json:"cluster,omitempty"`
	// Scaling says who sets an autoscaled shard's size (status.shards[].scaling).
	Scaling *ScalingView `json:"scaling,omitempty"`
}

// ScalingView is an autoscaled shard's size and who sets it.
type ScalingView struct {
	// RoutingShard is the scale target's name.
	RoutingShard string `json:"routingShard"`
	// ScaledBy is the field manager that set the size last ("schemagate": the starting size).
	ScaledBy string `json:"scaledBy,omitempty"`
	// Desired is what the scaler asks for; -1 when not known yet.
	Desired int32 `json:"desiredReplicas"`
	// Held says why the shard runs more than Desired.
	Held string `json:"held,omitempty"`
}

// text is what get shows after the shard's replicas.
func (s *ScalingView) text() string {
	by := s.ScaledBy
	if by == "" {
		by = "nobody yet"
	}
	out := fmt.Sprintf("autoscaled (RoutingShard %s, set by %s)", s.RoutingShard, by)
	if s.Held != "" {
		out += fmt.Sprintf("; %d asked, held: %s", s.Desired, s.Held)
	}
	return out
}

// TimerView is a shard's progress deadline or bake countdown.
type TimerView struct {
	// Kind is "deadline" or "bake".
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Remaining is negative once At has passed.
	RemainingSeconds int64  `json:"remainingSeconds"`
	Text             string `json:"text"`
}

// CheckView is one shard check (status.shards[].checks), or a check of the spec that has not
// started yet in the current shard (phase Pending).
type CheckView struct {
	Name         string           `json:"name"`
	When         string           `json:"when"`
	Provider     string           `json:"provider,omitempty"`
	Phase        string           `json:"phase"`
	DryRun       bool             `json:"dryRun,omitempty"`
	Revision     string           `json:"revision,omitempty"`
	Count        int32            `json:"count"`
	Required     int32            `json:"required,omitempty"`
	Successful   int32            `json:"successful,omitempty"`
	Failed       int32            `json:"failed,omitempty"`
	Inconclusive int32            `json:"inconclusive,omitempty"`
	Errors       int32            `json:"errors,omitempty"`
	Message      string           `json:"message,omitempty"`
	Last         *MeasurementView `json:"last,omitempty"`
	Job          *JobView         `json:"job,omitempty"`
	StartAge     string           `json:"startAge,omitempty"`
}

// MeasurementView is a check's last measurement.
type MeasurementView struct {
	Time    time.Time `json:"time"`
	Age     string    `json:"age"`
	Phase   string    `json:"phase"`
	Value   string    `json:"value,omitempty"`
	Message string    `json:"message,omitempty"`
}

// RSView is one of a shard's ReplicaSets.
type RSView struct {
	Name      string    `json:"name"`
	Revision  string    `json:"revision"`
	Tags      []string  `json:"tags,omitempty"`
	Desired   int32     `json:"desired"`
	Current   int32     `json:"current"`
	Ready     int32     `json:"ready"`
	Available int32     `json:"available"`
	Images    []string  `json:"images,omitempty"`
	Created   time.Time `json:"created"`
	Age       string    `json:"age"`
	Pods      []PodView `json:"pods,omitempty"`
}

// JobView is a migration, schema check or shard check Job.
type JobView struct {
	Name string `json:"name"`
	// Component is migration, check or shard-check.
	Component     string    `json:"component"`
	SchemaVersion string    `json:"schemaVersion,omitempty"`
	Attempt       string    `json:"attempt,omitempty"`
	Status        string    `json:"status"`
	Reason        string    `json:"reason,omitempty"`
	Message       string    `json:"message,omitempty"`
	Active        int32     `json:"active"`
	Succeeded     int32     `json:"succeeded"`
	Failed        int32     `json:"failed"`
	Created       time.Time `json:"created"`
	Age           string    `json:"age"`
	Duration      string    `json:"duration,omitempty"`
	Pods          []PodView `json:"pods,omitempty"`
}

// PodView is one pod, with the STATUS kubectl would print for it.
type PodView struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Ready is "<ready containers>/<containers>"; Finished says the pod is over (phase Succeeded
	// or Failed, as a Job's pods end), when Exited ("<terminated containers>/<containers>") says
	// more than readiness, which a finished pod never has.
	Ready    string    `json:"ready"`
	Finished bool      `json:"finished,omitempty"`
	Exited   string    `json:"exited,omitempty"`
	IsReady  bool      `json:"isReady"`
	Restarts int32     `json:"restarts"`
	Node     string    `json:"node,omitempty"`
	Created  time.Time `json:"created"`
	Age      string    `json:"age"`
	Message  string    `json:"message,omitempty"`
}

// Objects are what schemagate made for one RoutingService, found by the label schemagate.io/name.
type Objects struct {
	ReplicaSets []appsv1.ReplicaSet
	Jobs        []batchv1.Job
	Pods        []corev1.Pod
}

// State names.
const (
	StateReady       = "Ready"
	StateStalled     = "Stalled"
	StateProgressing = "Progressing"
	StatePaused      = "Paused"
	StateNotReady    = "NotReady"
	StatePending     = "Pending"
)

// currentCondition returns condition t if it describes the RoutingService's current generation.
func currentCondition(r *routingv1alpha1.RoutingService, t string) *metav1.Condition {
	if r.Status.ObservedGeneration != r.Generation {
		return nil
	}
	c := meta.FindStatusCondition(r.Status.Conditions, t)
	if c == nil || c.ObservedGeneration != r.Generation {
		return nil
	}
	return c
}

// Summary is the RoutingService's state in one word, with the reason and message it comes from.
type Summary struct {
	State, Condition, Reason, Message string
	// Done: Ready=True or Stalled=True for the current generation.
	Done bool
}

// Summarize reads the conditions of the current generation only: a condition of an older one
// says nothing about the spec that was applied last (what kubectl wait and kstatus also do).
func Summarize(r *routingv1alpha1.RoutingService) Summary {
	if r.Status.ObservedGeneration != r.Generation || currentCondition(r, routingv1alpha1.ConditionReady) == nil {
		return Summary{State: StatePending, Reason: "NotObserved", Message: fmt.Sprintf(
			"the controller has not yet reported on generation %d (status describes generation %d)", r.Generation, r.Status.ObservedGeneration)}
	}
	if c := currentCondition(r, routingv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return Summary{State: StateStalled, Condition: "Stalled=True", Reason: c.Reason, Message: c.Message, Done: true}
	}
	ready := currentCondition(r, routingv1alpha1.ConditionReady)
	if ready.Status == metav1.ConditionTrue {
		return Summary{State: StateReady, Condition: "Ready=True", Reason: ready.Reason, Message: ready.Message, Done: true}
	}
	if r.Spec.Paused {
		return Summary{State: StatePaused, Condition: "Ready=False", Reason: ready.Reason, Message: ready.Message}
	}
	if c := currentCondition(r, routingv1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		return Summary{State: StateProgressing, Condition: "Reconciling=True", Reason: c.Reason, Message: c.Message}
	}
	return Summary{State: StateNotReady, Condition: "Ready=False", Reason: ready.Reason, Message: ready.Message}
}

// BuildView computes the view of r and its objects at now.
func BuildView(r *routingv1alpha1.RoutingService, objs Objects, now time.Time) *View {
	s := Summarize(r)
	v := &View{
		Name: r.Name, Namespace: r.Namespace, Now: now.UTC(),
		Generation: r.Generation, ObservedGeneration: r.Status.ObservedGeneration,
		Created: r.CreationTimestamp.UTC(), Age: age(now, r.CreationTimestamp.Time),
		Paused: r.Spec.Paused, State: s.State, Condition: s.Condition, Reason: s.Reason, Message: s.Message, Done: s.Done,
		Revisions: RevisionsView{Stable: r.Status.StableRevision, Update: r.Status.UpdateRevision},
		Strategy:  strategyView(r),
	}
	revisionImages(&v.Revisions, r, objs.ReplicaSets)
	for _, c := range r.Status.Conditions {
		v.Conditions = append(v.Conditions, ConditionView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			ObservedGeneration: c.ObservedGeneration, Current: c.ObservedGeneration == r.Generation && r.Status.ObservedGeneration == r.Generation,
			LastTransition: c.LastTransitionTime.UTC()})
	}
	st := r.Status.Schema
	v.Schema = SchemaView{Required: r.Spec.Schema.Version, Confirmed: st.ConfirmedVersion, ConfirmedBy: st.ConfirmedBy,
		Reported: st.ReportedVersion, ReportedBy: st.ReportedBy, Evidence: string(r.Spec.Schema.EvidenceOrDefault()),
		MigrationJob: st.MigrationJob, Attempt: st.Attempt, CheckJob: st.CheckJob, Probe: st.Probe}
	if c := currentCondition(r, routingv1alpha1.ConditionSchemaReady); c != nil {
		v.Schema.Gate = string(c.Status) + " " + c.Reason
	}
	v.Schema.Lifecycle = lifecycleView(r, now)
	if f := r.Status.Failure; f != nil {
		v.Failure = &FailureView{Revision: f.Revision, Reason: f.Reason, Shard: f.Shard, Message: f.Message, Time: f.Time.UTC(), Age: age(now, f.Time.Time)}
	}

	pods := podsByOwner(objs.Pods)
	used := map[string]bool{}
	// Migration, probe, schema check and contract Jobs, oldest first.
	var shardJobs []batchv1.Job
	for _, j := range sortedJobs(objs.Jobs) {
		switch j.Labels[rollout.LabelComponent] {
		case rollout.ComponentMigration, rollout.ComponentCheck, rollout.ComponentContract, rollout.ComponentProbe:
			v.Jobs = append(v.Jobs, jobView(j, pods, used, now))
		case rollout.ComponentShardCheck:
			shardJobs = append(shardJobs, j)
		}
	}

	statusOf := map[string]*routingv1alpha1.ShardStatus{}
	for i := range r.Status.Shards {
		statusOf[r.Status.Shards[i].Name] = &r.Status.Shards[i]
	}
	rsByShard := map[string][]appsv1.ReplicaSet{}
	for _, rs := range objs.ReplicaSets {
		rsByShard[rs.Labels[rollout.LabelShard]] = append(rsByShard[rs.Labels[rollout.LabelShard]], rs)
	}
	names := []string{}
	inSpec := map[string]bool{}
	for _, sh := range r.Spec.Shards {
		names = append(names, sh.Name)
		inSpec[sh.Name] = true
	}
	var extra []string
	for name := range rsByShard {
		if !inSpec[name] && name != "" {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	names = append(names, extra...)

	current := currentShard(r)
	for i, name := range names {
		sv := ShardView{Name: name, InSpec: inSpec[name]}
		if sv.InSpec {
			sv.Replicas = r.Spec.Shards[i].Replicas
			sv.Cluster = clusterView(r, &r.Spec.Shards[i], statusOf[name], now)
		}
		if ss := statusOf[name]; ss != nil {
			if sc := ss.Scaling; sc != nil && sv.InSpec {
				// An autoscaled shard's size is the scaler's, not the spec's.
				sv.Replicas = ss.Replicas
				sv.Scaling = &ScalingView{RoutingShard: sc.RoutingShard, ScaledBy: sc.ScaledBy, Desired: ptr.Deref(sc.DesiredReplicas, -1), Held: sc.Held}
			}
			sv.Step, sv.StepRev, sv.Serving = string(ss.Step), ss.StepRevision, ss.Revision
			sv.Updated, sv.Ready, sv.Available = ss.Updated, ss.Ready, ss.Available
			if ss.StepStartTime != nil {
				t := ss.StepStartTime.UTC()
				sv.StepStart, sv.StepAge = &t, age(now, t)
			}
		}
		sv.Current = name == current
		if f := v.Failure; f != nil && f.Shard == name && f.Revision == r.Status.UpdateRevision {
			sv.Failure = f
		}
		sv.Timer = shardTimer(r, statusOf[name], now)
		sv.Checks = shardChecks(r, statusOf[name], name, shardJobs, pods, used, now)
		for _, rs := range sortedReplicaSets(rsByShard[name]) {
			sv.RSs = append(sv.RSs, rsView(r, rs, statusOf[name], pods, used, now))
		}
		for _, j := range shardJobs {
			if j.Labels[rollout.LabelShard] == name && !used["Job/"+j.Name] {
				used["Job/"+j.Name] = true
				sv.Jobs = append(sv.Jobs, jobView(j, pods, used, now))
			}
		}
		v.Shards = append(v.Shards, sv)
	}
	// Pods whose owner is not among the objects (a ReplicaSet being deleted, an orphan): under
	// their shard, so that nothing running is hidden.
	for _, p := range sortedPods(objs.Pods) {
		if used["Pod/"+p.Name] {
			continue
		}
		for i := range v.Shards {
			if v.Shards[i].Name == p.Labels[rollout.LabelShard] {
				v.Shards[i].Pods = append(v.Shards[i].Pods, podView(p, now))
			}
		}
	}
	v.Progress = progressView(r, current)
	return v
}

// currentShard is the shard the rollout works on: the one that is progressing, baking, failed
// or rolling back, or the shard the failure names; "" when none is (a migration runs, the
// rollout is paused or complete).
func currentShard(r *routingv1alpha1.RoutingService) string {
	update := r.Status.UpdateRevision
	for _, ss := range r.Status.Shards {
		if ss.StepRevision != update {
			continue
		}
		switch ss.Step {
		case routingv1alpha1.ShardStepProgressing, routingv1alpha1.ShardStepBaking, routingv1alpha1.ShardStepFailed, routingv1alpha1.ShardStepRollingBack:
			return ss.Name
		}
	}
	if f := r.Status.Failure; f != nil && f.Revision == update && f.Shard != "" {
		return f.Shard
	}
	return ""
}

func progressView(r *routingv1alpha1.RoutingService, current string) ProgressView {
	p := ProgressView{Total: len(r.Spec.Shards), CurrentShard: current}
	promoted := map[string]bool{}
	for _, ss := range r.Status.Shards {
		if ss.StepRevision == r.Status.UpdateRevision && ss.Step == routingv1alpha1.ShardStepPromoted {
			p.Promoted++
			promoted[ss.Name] = true
		}
		if ss.Name == current {
			p.CurrentStep = string(ss.Step)
		}
	}
	p.Summary = fmt.Sprintf("%d/%d promoted", p.Promoted, p.Total)
	if current != "" {
		p.Summary += fmt.Sprintf(", current shard %s (%s)", current, p.CurrentStep)
	} else {
		for _, sh := range r.Spec.Shards {
			if !promoted[sh.Name] {
				p.NextShard = sh.Name
				p.Summary += ", next shard " + sh.Name
				break
			}
		}
	}
	if r.Status.ObservedGeneration != r.Generation {
		p.Summary += fmt.Sprintf(" (as of generation %d)", r.Status.ObservedGeneration)
	}
	return p
}

func strategyView(r *routingv1alpha1.RoutingService) StrategyView {
	s := &r.Spec.Strategy
	surge, unavail := s.MaxSurgeOrDefault(), s.MaxUnavailableOrDefault()
	v := StrategyView{MaxSurge: surge.String(), MaxUnavailable: unavail.String(), BakeSeconds: s.BakeSecondsOrDefault(),
		ProgressDeadlineSeconds: s.ProgressDeadlineSecondsOrDefault(), FailurePolicy: string(s.FailurePolicyOrDefault())}
	for _, c := range s.Checks {
		d := c.Name + " (" + checkProvider(&c)
		if c.DryRun {
			d += ", dry run"
		}
		v.Checks = append(v.Checks, d+")")
	}
	v.Summary = fmt.Sprintf("%d shards, maxSurge %s, maxUnavailable %s, bake %ds, progress deadline %ds, failurePolicy %s",
		len(r.Spec.Shards), v.MaxSurge, v.MaxUnavailable, v.BakeSeconds, v.ProgressDeadlineSeconds, v.FailurePolicy)
	if len(v.Checks) > 0 {
		v.Summary += ", checks " + strings.Join(v.Checks, ", ")
	}
	return v
}

func checkProvider(c *routingv1alpha1.ShardCheck) string {
	switch {
	case c.Job != nil:
		return "job"
	case c.HTTP != nil:
		return "http"
	case c.Prometheus != nil:
		return "prometheus"
	}
	return ""
}

// shardTimer is the countdown of a shard that works on the update revision: its progress deadline
// while progressing, its bake while baking.
func shardTimer(r *routingv1alpha1.RoutingService, ss *routingv1alpha1.ShardStatus, now time.Time) *TimerView {
	if ss == nil || ss.StepStartTime == nil || ss.StepRevision != r.Status.UpdateRevision || r.Spec.Paused {
		return nil
	}
	s := &r.Spec.Strategy
	switch ss.Step {
	case routingv1alpha1.ShardStepProgressing:
		start := ss.StepStartTime
		if ss.ProgressStartTime != nil {
			start = ss.ProgressStartTime
		}
		at := start.Add(s.ProgressDeadline())
		t := &TimerView{Kind: "deadline", At: at.UTC(), RemainingSeconds: remaining(at, now)}
		if t.RemainingSeconds > 0 {
			t.Text = "deadline in " + countdown(at.Sub(now))
		} else {
			t.Text = "deadline passed " + age(now, at) + " ago"
		}
		return t
	case routingv1alpha1.ShardStepBaking:
		at := ss.StepStartTime.Add(s.Bake())
		t := &TimerView{Kind: "bake", At: at.UTC(), RemainingSeconds: remaining(at, now)}
		waiting := 0
		held := ""
		for _, c := range ss.Checks {
			if c.When != routingv1alpha1.CheckWhenBake || (c.Revision != "" && c.Revision != ss.StepRevision) {
				continue
			}
			switch c.Phase {
			case routingv1alpha1.CheckPhaseRunning:
				waiting++
			case routingv1alpha1.CheckPhaseInconclusive:
				if !c.DryRun {
					held = c.Name
				}
			}
		}
		switch {
		case held != "":
			t.Text = fmt.Sprintf("held: check %s is inconclusive (promote to go on, or abort)", held)
		case t.RemainingSeconds > 0:
			t.Text = "bake ends in " + countdown(at.Sub(now))
		case waiting > 0:
			t.Text = fmt.Sprintf("baked; waiting for %d %s", waiting, plural(waiting, "check", "checks"))
		default:
			t.Text = "baked"
		}
		return t
	}
	return nil
}

// shardChecks lists the shard's checks from its status; for the shard being rolled out, the
// spec's checks that have not started yet are listed as Pending.
func shardChecks(r *routingv1alpha1.RoutingService, ss *routingv1alpha1.ShardStatus, shard string, jobs []batchv1.Job,
	pods map[string][]corev1.Pod, used map[string]bool, now time.Time) []CheckView {
	var out []CheckView
	spec := map[string]*routingv1alpha1.ShardCheck{}
	for i := range r.Spec.Strategy.Checks {
		spec[r.Spec.Strategy.Checks[i].Name] = &r.Spec.Strategy.Checks[i]
	}
	seen := map[string]bool{}
	if ss != nil {
		for _, c := range ss.Checks {
			cv := CheckView{Name: c.Name, When: string(c.When), Phase: string(c.Phase), DryRun: c.DryRun, Revision: c.Revision,
				Count: c.Count, Successful: c.Successful, Failed: c.Failed, Inconclusive: c.Inconclusive, Errors: c.Errors, Message: c.Message}
			if sc := spec[c.Name]; sc != nil {
				cv.Provider = checkProvider(sc)
				if sc.Measured() {
					cv.Required = sc.CountOrDefault()
				}
			}
			if c.StartTime != nil {
				cv.StartAge = age(now, c.StartTime.Time)
			}
			if n := len(c.Measurements); n > 0 {
				m := c.Measurements[n-1]
				cv.Last = &MeasurementView{Time: m.Time.UTC(), Age: age(now, m.Time.Time), Phase: string(m.Phase), Value: m.Value, Message: m.Message}
			}
			for _, j := range jobs {
				if !used["Job/"+j.Name] && (j.Name == c.Job || (c.Job == "" && j.Labels[rollout.LabelShard] == shard &&
					j.Labels[rollout.LabelCheck] == c.Name && j.Labels[rollout.LabelCheckWhen] == string(c.When) && j.Labels[rollout.LabelRevision] == c.Revision)) {
					used["Job/"+j.Name] = true
					jv := jobView(j, pods, used, now)
					cv.Job = &jv
					break
				}
			}
			seen[c.Name+"/"+string(c.When)] = true
			out = append(out, cv)
		}
	}
	if ss != nil && ss.StepRevision == r.Status.UpdateRevision && r.Status.UpdateRevision != r.Status.StableRevision &&
		(ss.Step == routingv1alpha1.ShardStepBaking || ss.Step == routingv1alpha1.ShardStepProgressing || ss.Step == routingv1alpha1.ShardStepPending) {
		for _, sc := range r.Spec.Strategy.Checks {
			for _, w := range []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart, routingv1alpha1.CheckWhenBake} {
				if !sc.Runs(w) || seen[sc.Name+"/"+string(w)] {
					continue
				}
				// A bake check is due once the shard bakes; a pre-check while the shard waits to start.
				if (w == routingv1alpha1.CheckWhenBake && ss.Step != routingv1alpha1.ShardStepBaking) ||
					(w == routingv1alpha1.CheckWhenBeforeStart && ss.Step != routingv1alpha1.ShardStepPending) {
					continue
				}
				cv := CheckView{Name: sc.Name, When: string(w), Provider: checkProvider(&sc), Phase: "Pending", DryRun: sc.DryRun}
				if sc.Measured() {
					cv.Required = sc.CountOrDefault()
				}
				out = append(out, cv)
			}
		}
	}
	return out
}

func rsView(r *routingv1alpha1.RoutingService, rs appsv1.ReplicaSet, ss *routingv1alpha1.ShardStatus, pods map[string][]corev1.Pod, used map[string]bool, now time.Time) RSView {
	rev := rs.Labels[rollout.LabelRevision]
	v := RSView{Name: rs.Name, Revision: rev, Desired: ptr.Deref(rs.Spec.Replicas, 1), Current: rs.Status.Replicas,
		Ready: rs.Status.ReadyReplicas, Available: rs.Status.AvailableReplicas, Created: rs.CreationTimestamp.UTC(), Age: age(now, rs.CreationTimestamp.Time)}
	if rev != "" && rev == r.Status.StableRevision {
		v.Tags = append(v.Tags, "stable")
	}
	if rev != "" && rev == r.Status.UpdateRevision {
		v.Tags = append(v.Tags, "update")
	}
	if ss != nil && rev != "" && rev == ss.Revision {
		v.Tags = append(v.Tags, "serving")
	}
	v.Images = containerImages(rs.Spec.Template.Spec.Containers)
	for _, p := range pods["ReplicaSet/"+rs.Name] {
		used["Pod/"+p.Name] = true
		v.Pods = append(v.Pods, podView(p, now))
	}
	return v
}

func jobView(j batchv1.Job, pods map[string][]corev1.Pod, used map[string]bool, now time.Time) JobView {
	v := JobView{Name: j.Name, Component: j.Labels[rollout.LabelComponent], SchemaVersion: j.Labels[rollout.LabelSchemaVersion],
		Attempt: j.Labels[rollout.LabelAttempt], Active: j.Status.Active, Succeeded: j.Status.Succeeded, Failed: j.Status.Failed,
		Created: j.CreationTimestamp.UTC(), Age: age(now, j.CreationTimestamp.Time)}
	v.Status = "Pending"
	if j.Status.Active > 0 {
		v.Status = "Running"
	}
	if ptr.Deref(j.Spec.Suspend, false) {
		v.Status = "Suspended"
	}
	end := now
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			v.Status, v.Reason, v.Message, end = "Complete", c.Reason, c.Message, c.LastTransitionTime.Time
		case batchv1.JobFailed:
			v.Status, v.Reason, v.Message, end = "Failed", c.Reason, c.Message, c.LastTransitionTime.Time
		case batchv1.JobSuspended:
			v.Status, v.Reason, v.Message = "Suspended", c.Reason, c.Message
		}
	}
	if j.Status.CompletionTime != nil {
		end = j.Status.CompletionTime.Time
	}
	if j.DeletionTimestamp != nil {
		v.Status = "Terminating"
	}
	if j.Status.StartTime != nil && !end.IsZero() {
		v.Duration = duration.HumanDuration(end.Sub(j.Status.StartTime.Time))
	}
	for _, p := range pods["Job/"+j.Name] {
		used["Pod/"+p.Name] = true
		v.Pods = append(v.Pods, podView(p, now))
	}
	return v
}

// podView computes the pod's status as kubectl's STATUS column shows it: the reason a container
// waits or terminated with, Terminating, or the phase.
func podView(p corev1.Pod, now time.Time) PodView {
	v := PodView{Name: p.Name, Node: p.Spec.NodeName, Created: p.CreationTimestamp.UTC(), Age: age(now, p.CreationTimestamp.Time)}
	status := string(p.Status.Phase)
	if p.Status.Reason != "" {
		status = p.Status.Reason
	}
	ready, total := 0, len(p.Spec.Containers)
	for _, cs := range p.Status.ContainerStatuses {
		v.Restarts += cs.RestartCount
		if cs.Ready {
			ready++
		}
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			status = cs.State.Waiting.Reason
			v.Message = cs.State.Waiting.Message
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			status = cs.State.Terminated.Reason
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				status = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			} else {
				status = "Completed"
			}
		}
	}
	if status == "" {
		status = "Pending"
	}
	if p.DeletionTimestamp != nil {
		status = "Terminating"
	}
	v.Status = status
	v.Ready = fmt.Sprintf("%d/%d", ready, total)
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		exited := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				exited++
			}
		}
		v.Finished, v.Exited = true, fmt.Sprintf("%d/%d", exited, total)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			v.IsReady = true
		}
	}
	return v
}

// podsByOwner groups pods by their controller ("ReplicaSet/name", "Job/name"), newest last.
func podsByOwner(pods []corev1.Pod) map[string][]corev1.Pod {
	out := map[string][]corev1.Pod{}
	for _, p := range sortedPods(pods) {
		if ref := metav1.GetControllerOf(&p); ref != nil {
			out[ref.Kind+"/"+ref.Name] = append(out[ref.Kind+"/"+ref.Name], p)
			continue
		}
		if job := p.Labels[batchv1.JobNameLabel]; job != "" {
			out["Job/"+job] = append(out["Job/"+job], p)
		}
	}
	return out
}

func sortedPods(pods []corev1.Pod) []corev1.Pod { return byCreation(pods) }

func sortedJobs(jobs []batchv1.Job) []batchv1.Job { return byCreation(jobs) }

func sortedReplicaSets(rss []appsv1.ReplicaSet) []appsv1.ReplicaSet { return byCreation(rss) }

// byCreation returns a copy of items oldest first, then by name, as kubectl lists objects.
func byCreation[T any, P interface {
	*T
	metav1.Object
}](items []T) []T {
	out := slices.Clone(items)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := P(&out[i]), P(&out[j])
		if ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time; !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return a.GetName() < b.GetName()
	})
	return out
}

// age is how long ago t was, as kubectl prints ages ("7s", "5m", "2d3h").
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration.HumanDuration(now.Sub(t))
}

// countdown is d rounded up to the second, so that a timer reads 0s only once it expired.
func countdown(d time.Duration) string {
	secs := int64(math.Ceil(d.Seconds()))
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", secs)
	case secs < 3600:
		if secs%60 == 0 {
			return fmt.Sprintf("%dm", secs/60)
		}
		return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
	}
	return duration.HumanDuration(time.Duration(secs) * time.Second)
}

func remaining(at, now time.Time) int64 {
	return int64(math.Ceil(at.Sub(now).Seconds()))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
