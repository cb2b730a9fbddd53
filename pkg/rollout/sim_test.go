package rollout

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// fixture is the scenarios' rs-a: shards us-east, eu-west, ap-south (3 replicas each), image
// app:v1 needing schema 1, bake 10 s, progress deadline 60 s.
func fixture() *routingv1alpha1.RoutingService {
	shard := func(name string) routingv1alpha1.ShardSpec {
		return routingv1alpha1.ShardSpec{Name: name, Replicas: 3, NodeSelector: map[string]string{"topology.kubernetes.io/region": name}}
	}
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a", Namespace: "default", UID: types.UID("uid-rs-a"), Generation: 1},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}}},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "migrate", Image: "migrate:ok"}}}},
				ActiveDeadlineSeconds: ptr.To(int64(120)),
			}},
			Shards: []routingv1alpha1.ShardSpec{shard("us-east"), shard("eu-west"), shard("ap-south")},
			Strategy: routingv1alpha1.RolloutStrategy{BakeSeconds: ptr.To(int32(10)), ProgressDeadlineSeconds: ptr.To(int32(60)),
				FailurePolicy: routingv1alpha1.FailurePolicyRollback, RevisionHistoryLimit: ptr.To(int32(2))},
		},
	}
}

// world is an in-memory cluster for the planner: it applies actions, and plays the ReplicaSet and
// Job controllers and the database the migrations change. A ReplicaSet whose image contains
// "broken" never gets available pods. A migration Job whose image contains "fail" fails
// ("fail-once": only its first attempt), "hang" never finishes, anything else succeeds one tick
// after it is created and moves the database to its version. Each finished Job leaves a pod whose
// termination message is a schema report of the database, except that "noop" succeeds without
// migrating, "dirty" fails half-way (a dirty database), "dirty-ok" does the same and exits 0,
// "garbage" writes a message that is not a report and "silent" migrates and writes none. A check Job reports
// the database as it is.
type world struct {
	t    *testing.T
	now  time.Time
	rsvc *routingv1alpha1.RoutingService
	rss  map[string]*appsv1.ReplicaSet
	jobs map[string]*batchv1.Job
	// records are the ControllerRevisions (revision records, history.go).
	records map[string]*appsv1.ControllerRevision
	log     []string
	events  []Event
	seq     int
	// confirmed is the schema version the database is at (for I1); dirty is its dirty flag.
	confirmed string
	dirty     bool
	pods      map[string]*corev1.Pod
	// loseStatus, when set and true for a plan, drops that plan's status write (a 409), as the
	// API server would; the actions are applied.
	loseStatus func(Plan) bool
	// conflicts are handed to the planner as the reconciler would after an AlreadyExists.
	conflicts []Conflict
	// skipI1 and skipI2 turn off a check for a test whose database or spec changes outside
	// schemagate's control (a restored backup; replicas raised while the gate is held); the test
	// checks what schemagate did itself.
	skipI1, skipI2 bool
	// measure answers the planner's measurement requests (http and prometheus checks), as the
	// reconciler does; measured logs each request.
	measure  func(MeasurementRequest) TakenMeasurement
	measured []MeasurementRequest
	// refusals are handed to the planner on every reconcile (budgets the API server refused);
	// refuse, when it returns a refusal for an action, plays the API server refusing it: the
	// actions after it are not applied and the plan is computed again knowing it, as the
	// reconciler does (refusals.go).
	refusals []Refusal
	refuse   func(Action) *Refusal
	// clusters are handed to the planner as Observed.Clusters (shards in other clusters).
	clusters map[string]ClusterView
	// earlier are handed to the planner as Observed.EarlierPlaces (a shard's places before it moved).
	earlier []EarlierPlace
	// probe is handed to the planner as Observed.Probe (probe_test.go plays the probe Jobs).
	probe *ProbeImages
	// scales are handed to the planner as Observed.ShardScales (autoscaled shards' RoutingShards).
	scales map[string]ShardScale
}

func newWorld(t *testing.T) *world {
	return &world{t: t, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), rsvc: fixture(),
		rss: map[string]*appsv1.ReplicaSet{}, jobs: map[string]*batchv1.Job{}, records: map[string]*appsv1.ControllerRevision{}, pods: map[string]*corev1.Pod{}}
}

func (w *world) observed() Observed {
	o := Observed{RoutingService: w.rsvc.DeepCopy(), Now: w.now, Conflicts: w.conflicts, Refusals: w.refusals, Clusters: w.clusters, EarlierPlaces: w.earlier, Probe: w.probe, ShardScales: w.scales}
	for _, rs := range w.rss {
		if v, ok := w.clusters[rs.Labels[LabelShard]]; ok && v.State != routingv1alpha1.ClusterReachable {
			// As the reconciler: a cluster that does not answer has no fresh list, and none is
			// shown (controllers/spoke_observe.go).
			continue
		}
		o.ReplicaSets = append(o.ReplicaSets, rs.DeepCopy())
	}
	// The schema Jobs run with spec.schema.runWithShard: while its cluster does not answer, they
	// and their pods are not shown either (controllers/schema_place.go).
	hideSchema := false
	if shard := w.rsvc.Spec.Schema.RunWithShard; shard != "" {
		v, ok := w.clusters[shard]
		hideSchema = ok && v.State != routingv1alpha1.ClusterReachable
	}
	for _, j := range w.jobs {
		if hideSchema && IsSchemaComponent(j.Labels[LabelComponent]) {
			continue
		}
		o.Jobs = append(o.Jobs, j.DeepCopy())
	}
	for _, pod := range w.pods {
		if hideSchema && IsSchemaComponent(pod.Labels[LabelComponent]) {
			continue
		}
		o.Pods = append(o.Pods, pod.DeepCopy())
	}
	for _, cr := range w.records {
		o.ControllerRevisions = append(o.ControllerRevisions, cr.DeepCopy())
	}
	return o
}

// reconcile runs the planner once and applies its plan.
func (w *world) reconcile() Plan {
	o := w.observed()
	plan := Compute(o)
	if len(plan.Measurements) > 0 {
		if w.measure == nil {
			w.t.Fatalf("the planner asks for measurements and the test answers none: %+v", plan.Measurements)
		}
		for _, req := range plan.Measurements {
			w.measured = append(w.measured, req)
			o.Measurements = append(o.Measurements, w.measure(req))
		}
		plan = Compute(o)
		if len(plan.Measurements) > 0 {
			w.t.Fatalf("the planner asks again for measurements it was given: %+v", plan.Measurements)
		}
	}
	for i, a := range plan.Actions {
		if w.refuse == nil {
			break
		}
		if r := w.refuse(a); r != nil {
			applied := plan.Actions[:i]
			o.Refusals = append(o.Refusals, *r)
			plan = Compute(o)
			plan.Actions = applied
			break
		}
	}
	for _, a := range plan.Actions {
		w.log = append(w.log, w.now.Format("15:04:05")+" "+a.String())
		before := w.shardAvailable()
		w.checkTrusted(a)
		w.apply(a)
		w.checkActionI2(a, before, plan)
	}
	for _, e := range plan.Events {
		w.log = append(w.log, w.now.Format("15:04:05")+" event "+e.Reason)
		w.events = append(w.events, e)
	}
	if w.loseStatus == nil || !w.loseStatus(plan) {
		w.rsvc.Status = plan.Status
	}
	w.checkInvariants()
	return plan
}

// apply applies one action to the world, as the API server would.
func (w *world) apply(a Action) {
	switch a.Kind {
	case CreateReplicaSet:
		rs := a.ReplicaSet.DeepCopy()
		w.seq++
		rs.CreationTimestamp = metav1.Time{Time: w.now.Add(time.Duration(w.seq) * time.Millisecond)}
		rs.Generation = 1
		rs.UID = types.UID("uid-" + rs.Name)
		w.rss[rs.Name] = rs
	case ScaleReplicaSet:
		rs := w.rss[a.ReplicaSet.Name]
		rs.Spec.Replicas = ptr.To(a.Replicas)
		rs.Generation++
	case DeleteReplicaSet:
		delete(w.rss, a.ReplicaSet.Name)
	case CreateJob:
		j := a.Job.DeepCopy()
		j.CreationTimestamp = metav1.Time{Time: w.now}
		j.UID = types.UID("uid-" + j.Name)
		w.jobs[j.Name] = j
	case SuspendJob:
		w.jobs[a.Job.Name].Spec.Suspend = ptr.To(true)
	case StopJob:
		w.jobs[a.Job.Name].Spec.Parallelism = ptr.To(int32(0))
	case DeleteJob:
		w.deleteJob(a.Job.Name)
	case AdoptReplicaSet:
		w.rss[a.ReplicaSet.Name].OwnerReferences = append(w.rss[a.ReplicaSet.Name].OwnerReferences, ControllerRef(w.rsvc))
		MarkAdopted(w.rss[a.ReplicaSet.Name])
	case CreateRecord:
		if _, ok := w.records[a.Record.Name]; ok {
			w.t.Fatalf("%v: the record exists (AlreadyExists)", a)
		}
		w.records[a.Record.Name] = a.Record.DeepCopy()
	case AdoptRecord:
		w.records[a.Record.Name].OwnerReferences = append(w.records[a.Record.Name].OwnerReferences, ControllerRef(w.rsvc))
	case DeleteRecord:
		delete(w.records, a.Record.Name)
	case AnnotateJob:
		j := w.jobs[a.Job.Name]
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		for k, v := range a.Annotations {
			j.Annotations[k] = v
		}
	case AdoptJob:
		w.jobs[a.Job.Name].OwnerReferences = append(w.jobs[a.Job.Name].OwnerReferences, HistoryRef(w.rsvc))
	case MarkServed:
		SetServedOrder(w.rss[a.ReplicaSet.Name], a.Order)
	case RecordControls:
		SetAnnotations(w.rss[a.ReplicaSet.Name], a.Annotations)
	case SetPodCheck:
		w.setPodCheck(a)
	}
}

// checkTrusted checks, before a is applied, that a scale-up of a ReplicaSet schemagate adopted
// (orphaned, or marked adopted) goes only to one a verified revision record vouches for: a record
// in the world, labelled and named for its revision, whose data hashes to that revision and gives
// its template. A ReplicaSet schemagate created itself needs none.
func (w *world) checkTrusted(a Action) {
	w.t.Helper()
	if a.Kind != ScaleReplicaSet {
		return
	}
	rs := w.rss[a.ReplicaSet.Name]
	if rs == nil || a.Replicas <= *rs.Spec.Replicas {
		return
	}
	_, adopted := rs.Annotations[annotationAdopted]
	if !adopted && metav1.IsControlledBy(rs, w.rsvc) {
		return
	}
	rev := rs.Labels[LabelRevision]
	cr := w.records[RevisionRecordName(w.rsvc.Name, rev)]
	var spec *routingv1alpha1.RoutingServiceSpec
	if cr != nil && cr.Labels[LabelRevision] == rev {
		spec = verifyRecord(cr, rev)
	}
	if spec == nil {
		w.t.Fatalf("%v scales up adopted ReplicaSet %s with no verified record of revision %s\nlog:\n%s", a, rs.Name, rev, strings.Join(w.log, "\n"))
	}
	for _, shard := range spec.Shards {
		if shard.Name == rs.Labels[LabelShard] {
			recorded := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Name: w.rsvc.Name, Namespace: w.rsvc.Namespace}, Spec: *spec}
			if ok, diff := TemplateMatches(NewReplicaSet(recorded, shard, rev, 0).Spec.Template, rs.Spec.Template); !ok {
				w.t.Fatalf("%v scales up adopted ReplicaSet %s whose template is not its record's: %s", a, rs.Name, diff)
			}
			return
		}
	}
	w.t.Fatalf("%v scales up adopted ReplicaSet %s: its record has no shard %s", a, rs.Name, rs.Labels[LabelShard])
}

// shardAvailable counts, per shard, the pods that are available and that no ReplicaSet is asked to
// remove: each ReplicaSet's available pods, capped at its spec.replicas (a scale-down takes pods
// away at once; a scale-up adds available pods only later, at a tick).
func (w *world) shardAvailable() map[string]int32 {
	out := map[string]int32{}
	for _, rs := range w.rss {
		out[rs.Labels[LabelShard]] += min(rs.Status.AvailableReplicas, *rs.Spec.Replicas)
	}
	return out
}

// checkActionI2 checks I2 after each single action, so the states between two actions of one plan
// count too: no action may take a shard's available pods below replicas - maxUnavailable, unless
// the shard was already below that and the action takes nothing away.
func (w *world) checkActionI2(a Action, before map[string]int32, plan Plan) {
	w.t.Helper()
	if w.skipI2 {
		return
	}
	after := w.shardAvailable()
	for _, shard := range w.rsvc.Spec.Shards {
		floor := ResolveBudget(shard.Replicas, w.rsvc.Spec.Strategy.MaxSurge, w.rsvc.Spec.Strategy.MaxUnavailable).MinAvailable()
		if b, n := before[shard.Name], after[shard.Name]; n < b && n < floor {
			w.t.Fatalf("I2: %v leaves shard %s with %d available pods (it had %d), below its floor of %d; plan %v\nlog:\n%s",
				a, shard.Name, n, b, floor, plan.Actions, strings.Join(w.log, "\n"))
		}
	}
}

// tick plays the workload controllers: pods of scaled-up ReplicaSets become available, scaled-down
// ones go away, Jobs finish.
func (w *world) tick() {
	for _, rs := range w.rss {
		want := *rs.Spec.Replicas
		broken := strings.Contains(rs.Spec.Template.Spec.Containers[0].Image, "broken")
		// "flap": all pods available for 5 s out of every 8 (ready, then crashing under load).
		if strings.Contains(rs.Spec.Template.Spec.Containers[0].Image, "flap") && w.now.Unix()%8 >= 5 {
			broken = true
		}
		rs.Status.Replicas = want
		rs.Status.ObservedGeneration = rs.Generation
		if broken {
			rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0
		} else {
			rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = want, want
		}
		if hasPodCheckGate(&rs.Spec.Template.Spec) {
			// Its pods are Ready only once their readiness gate is True (podcheck_test.go).
			n := w.gatedPods(rs, want, !broken)
			rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = n, n
		}
	}
	for _, j := range w.jobs {
		if ptr.Deref(j.Spec.Suspend, false) {
			j.Status.Active = 0 // the Job controller stops a suspended Job's pods
			continue
		}
		if len(j.Status.Conditions) > 0 {
			continue
		}
		image := j.Spec.Template.Spec.Containers[0].Image
		j.Status.Active = 1
		if j.Labels[LabelComponent] == ComponentShardCheck {
			// A shard check: "hang" never ends ("hang-in-<shard>": only there), "fail" fails
			// ("fail-in-<shard>": only there).
			switch {
			case strings.Contains(image, "hang-in-") && !strings.Contains(image, "hang-in-"+j.Labels[LabelShard]):
				j.Status.Active, j.Status.Succeeded = 0, 1
				j.Status.Conditions = completeConditions()
			case strings.Contains(image, "hang"):
			case strings.Contains(image, "fail-in-") && !strings.Contains(image, "fail-in-"+j.Labels[LabelShard]):
				j.Status.Active, j.Status.Succeeded = 0, 1
				j.Status.Conditions = completeConditions()
			case strings.Contains(image, "fail"):
				j.Status.Active = 0
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
			default:
				j.Status.Active, j.Status.Succeeded = 0, 1
				j.Status.Conditions = completeConditions()
			}
			continue
		}
		if j.Labels[LabelComponent] == ComponentProbe {
			w.playProbe(j)
			continue
		}
		failed := false
		message := ""
		switch {
		case strings.Contains(image, "hang"):
			continue
		case j.Labels[LabelComponent] == ComponentCheck:
			message = w.report()
		case strings.Contains(image, "fail-once") && j.Labels[LabelAttempt] == "1", strings.Contains(image, "fail") && !strings.Contains(image, "fail-once"):
			failed = true
		case strings.Contains(image, "dirty"):
			w.dirty = true
			failed = !strings.Contains(image, "dirty-ok")
			message = w.report()
		case strings.Contains(image, "noop"):
			message = w.report()
		case strings.Contains(image, "garbage"):
			message = "migrated OK"
		case strings.Contains(image, "silent"):
			// Migrates, but writes no report.
			if v := j.Labels[LabelSchemaVersion]; !w.dirty && (schemaversion.AtLeast(v, w.confirmed) || w.confirmed == "") {
				w.confirmed = v
			}
		default:
			if v := j.Labels[LabelSchemaVersion]; !w.dirty && (schemaversion.AtLeast(v, w.confirmed) || w.confirmed == "") {
				w.confirmed = v
			}
			message = w.report()
		}
		j.Status.Active = 0
		phase := corev1.PodSucceeded
		if failed {
			phase = corev1.PodFailed
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
		} else {
			j.Status.Succeeded = 1
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: w.now}}}
		}
		w.seq++
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", j.Name, w.seq), Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
				UID: types.UID(fmt.Sprintf("pod-%d", w.seq)), CreationTimestamp: metav1.Time{Time: w.now},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: j.Spec.Template.Spec.Containers[0].Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: map[bool]int32{true: 1, false: 0}[failed], Message: message}}}}},
		}
		w.pods[pod.Name] = pod
	}
	w.checkInvariants()
}

// report is the schema report of the database as it is now (version "0" before any migration).
func (w *world) report() string {
	b, err := schemareport.Encode(schemareport.Report{Version: cmp.Or(w.confirmed, "0"), Dirty: w.dirty, Tool: "sim", Time: w.now})
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// deleteJob deletes a Job and its pods, as a ttlSecondsAfterFinished or a person would.
func (w *world) deleteJob(name string) {
	uid := w.jobs[name].UID
	delete(w.jobs, name)
	for podName, pod := range w.pods {
		if metav1.IsControlledBy(pod, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: uid}}) {
			delete(w.pods, podName)
		}
	}
}

// run alternates reconcile and tick, advancing the clock by a second each round (or to the
// planner's requeue when nothing changed), until done says stop or limit rounds pass.
func (w *world) run(limit int, done func() bool) {
	for i := 0; i < limit; i++ {
		plan := w.reconcile()
		if done() {
			return
		}
		w.tick()
		step := time.Second
		if len(plan.Actions) == 0 && plan.RequeueAfter > step {
			step = plan.RequeueAfter
		}
		w.now = w.now.Add(step)
	}
	w.t.Fatalf("not done after %d rounds; log:\n%s\nstatus: %+v", limit, strings.Join(w.log, "\n"), w.rsvc.Status)
}

// checkInvariants checks I1 and I2 on the world as it is now. I1: a ReplicaSet asks for pods only
// while the database is at a schema inside the range its revision runs on (for a revision without
// a declared range: at or above the schema it requires).
func (w *world) checkInvariants() {
	w.t.Helper()
	for _, rs := range w.rss {
		if lo, hi := RecordedRange(rs); !w.skipI1 && *rs.Spec.Replicas > 0 &&
			(!schemaversion.AtLeast(w.confirmed, lo) || (hi != "" && !schemaversion.AtLeast(hi, w.confirmed))) {
			w.t.Fatalf("I1: %s has %d replicas but the database is at schema %q, outside the range [%s, %s] its revision runs on", rs.Name, *rs.Spec.Replicas, w.confirmed, lo, hi)
		}
	}
	for _, shard := range w.rsvc.Spec.Shards {
		var avail, spec int32
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] == shard.Name {
				avail += rs.Status.AvailableReplicas
				spec += *rs.Spec.Replicas
			}
		}
		// I2 applies once the shard has been served; a shard being created has nothing to keep.
		// While paused, a shard whose replicas were raised is short because nothing is scaled,
		// not because schemagate removed pods.
		if !w.skipI2 && w.rsvc.Status.StableRevision != "" && !w.rsvc.Spec.Paused && avail < shard.Replicas && spec < shard.Replicas {
			w.t.Fatalf("I2: shard %s asks for %d pods and has %d available, below %d", shard.Name, spec, avail, shard.Replicas)
		}
	}
}

func (w *world) condition(t string) *metav1.Condition {
	return meta.FindStatusCondition(w.rsvc.Status.Conditions, t)
}

func (w *world) isTrue(t string) bool {
	c := w.condition(t)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.rsvc.Generation
}

func (w *world) update(image, version, migrationImage string) {
	w.rsvc.Spec.Template.Spec.Containers[0].Image = image
	w.rsvc.Spec.Schema.Version = version
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = migrationImage
	w.rsvc.Generation++
}

// shardImages says, per shard, which images have pods asked for: "us-east=app:v2:3".
func (w *world) shardImages() string {
	var out []string
	for _, shard := range w.rsvc.Spec.Shards {
		var here []string
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] == shard.Name && *rs.Spec.Replicas > 0 {
				here = append(here, fmt.Sprintf("%s=%s:%d", shard.Name, rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas))
			}
		}
		sort.Strings(here)
		out = append(out, here...)
	}
	return strings.Join(out, " ")
}

func completeConditions() []batchv1.JobCondition {
	return []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
}

func equalStatus(a, b *routingv1alpha1.RoutingServiceStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
