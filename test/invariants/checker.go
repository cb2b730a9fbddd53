// Package invariants checks the safety invariants of ../shared/docs/scenarios.md on every event a
// test observes from a real API server, not only at the end of a test:
//
//	I1: no ReplicaSet has replicas > 0 before a schema inside the range its revision runs on
//	    (the schemagate.io/schema-min and schema-max annotations; without them, schema >= the
//	    version it requires, N) is confirmed: a migration or check Job the RoutingService
//	    controls succeeded (or, for a migration Job, a pod of it shows its migration container
//	    terminated with exit code 0 while a sidecar keeps the Job active) and a pod that Job
//	    controls left a schema report saying that version and not dirty (with
//	    spec.schema.evidence JobSuccess, the migration Job's success alone).
//	I2: in each shard, once it has served, available replicas never drop below
//	    replicas - maxUnavailable (as the RoutingService's spec says at that moment).
//	I4: status.observedGeneration never runs ahead of metadata.generation, and every condition
//	    carries the generation the status was computed for.
//
// Events of different kinds arrive on different watches, so I1 is decided by etcd's global
// ordering: the ReplicaSet's scale-up must have a resourceVersion above that of the evidence
// that confirmed its schema (the pod update with the report, the Job's Complete), whichever
// informer delivered it first. (resourceVersions are opaque to clients in general; on
// a single etcd, as in these tests, they are its revision numbers, and this checker relies on it.)
package invariants

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// Checker records violations seen on the watched objects. It is safe for concurrent use.
type Checker struct {
	mu sync.Mutex
	// confirmedAt[ns/rsvc-uid][version] is the resourceVersion at which that version was first
	// seen confirmed.
	confirmedAt map[string]map[string]int64
	// jobs[job-uid] is what is known of each migration or check Job: its RoutingService, when it
	// was first seen complete, and its pods' clean report.
	jobs   map[string]*jobEvidence
	rsvcs  map[string]*routingv1alpha1.RoutingService // by ns/name
	rss    map[string]*appsv1.ReplicaSet              // by ns/name
	served map[string]bool                            // ns/rsvc/shard → reached its minimum once
	// exemptI2 are namespaces whose pods fail by design (a revision that crashes under load):
	// there, a dip in availability is the scenario, not schemagate's doing.
	exemptI2   map[string]string
	pendingI1  []pendingCheck
	violations []string
	events     int
	// watchBroken are the times a Job or Pod watch of this checker failed (the reflector then
	// waits, up to 30 s, and lists again: the states an object passed through meanwhile are never
	// delivered); undecided are the I1 checks that such a gap made undecidable (Report prints them).
	watchBroken []time.Time
	undecided   []string
	// replicaSetsAt reads the API server's ReplicaSets at a past revision (nil in unit tests);
	// pendingI2 are the dips of this checker's view still to be checked against it, rsHigh the
	// highest ReplicaSet resourceVersion seen so far, and correctedI2 the dips it did not confirm
	// (dips.go).
	replicaSetsAt ReplicaSetsAt
	pendingI2     []dip
	rsHigh        int64
	correctedI2   []string
	// jobsAndPodsAt reads the API server's Jobs and schema pods at a past revision (nil in unit
	// tests); i1Reads are the scale-ups whose evidence this checker has not seen 5 s on, to be
	// read there; heldAt records what those reads found, and correctedI1 the scale-ups they
	// cleared (confirm_at.go).
	jobsAndPodsAt JobsAndPodsAt
	i1Reads       []pendingCheck
	heldAt        map[string]string
	correctedI1   []string

	// confirmedWall[ns/rsvc-uid][version] is when this checker first saw that version confirmed
	// (its clock): what a region's checker compares its ReplicaSets with (Follow).
	confirmedWall map[string]map[string]time.Time
	// hub is set on a region cluster's checker (Follow): its ReplicaSets controlled by a spoke
	// anchor are checked against the hub's RoutingServices and confirmations.
	hub          *Checker
	pendingSpoke []pendingCheck
	spokeChecked int              // spoke I1 checks decided
	servedGen    map[string]int64 // spoke I2 key → the RoutingService generation it was judged on
}

type jobEvidence struct {
	ns, rsvcName, rsvcUID string
	check                 bool
	version               string // the Job's schema-version label
	completeAt            int64  // 0 until seen complete
	reported              string // the version a clean report of one of its pods gave
	reportedAt            int64
	// migration names the migration container (the Job template's first container); doneAt is
	// when a pod showed it terminated with exit code 0 and a clean report (early, the version it
	// reported) while the Job was still active: a migration Job counts as done then
	// (docs/schema-report.md, sidecars).
	migration string
	doneAt    int64
	early     string
}

type pendingCheck struct {
	// asked is set once the API server's state at rsRV has been asked for (confirm_at.go).
	asked bool
	due   time.Time
	rsRV  int64
	rs    *appsv1.ReplicaSet
	// seen is when a region's checker saw the scale-up, and uid the RoutingService it belongs to
	// once found in the hub (spoke checks only).
	seen time.Time
	uid  string
}

// spokeSlack bounds how much later the hub's checker may see a confirmation than a region's
// checker sees the scale-up it allowed: resourceVersions of two etcds cannot be compared, so
// across clusters I1 is judged by this checker's clock. A spoke ReplicaSet scaled up more than
// spokeSlack before the hub saw its schema confirmed, or never confirmed, is a violation; one
// scaled up less than spokeSlack early is not caught (the weaker, cross-cluster form of I1).
const spokeSlack = 10 * time.Second

// settleDelay is how long an I1 check waits before it is first looked at; one that is not
// confirmed then is looked at again until the end (informers of different kinds lag each other,
// more so on a loaded machine or after an outage).
const settleDelay = 5 * time.Second

// ExemptI2 stops checking I2 in namespace ns, for a scenario whose new pods crash by design, so
// that availability dips without any action of schemagate's; why is printed in the report.
func (k *Checker) ExemptI2(ns, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.exemptI2 == nil {
		k.exemptI2 = map[string]string{}
	}
	k.exemptI2[ns] = why
}

// New returns an empty Checker.
func New() *Checker {
	return &Checker{
		confirmedAt: map[string]map[string]int64{},
		jobs:        map[string]*jobEvidence{},
		rsvcs:       map[string]*routingv1alpha1.RoutingService{},
		rss:         map[string]*appsv1.ReplicaSet{},
		served:      map[string]bool{},

		confirmedWall: map[string]map[string]time.Time{},
		servedGen:     map[string]int64{},
		heldAt:        map[string]string{},
	}
}

// Follow makes k a region cluster's checker for hub: ReplicaSets in k's cluster that a spoke
// anchor controls (the ConfigMap <name>-schemagate) are checked for I1 against hub's
// confirmations and for I2 against hub's RoutingService of the same namespace and name (the
// tests' spokes use the hub's namespace names). Call it before Watch delivers events.
func (k *Checker) Follow(hub *Checker) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hub = hub
}

// hubView returns a copy of the hub's RoutingService ns/name and its confirmations' first-seen
// times (nil, nil when the hub has no such RoutingService).
func (k *Checker) hubView(ns, name string) (*routingv1alpha1.RoutingService, map[string]time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rsvc := k.rsvcs[ns+"/"+name]
	if rsvc == nil {
		return nil, nil
	}
	out := map[string]time.Time{}
	for v, at := range k.confirmedWall[ns+"/"+string(rsvc.UID)] {
		out[v] = at
	}
	return rsvc.DeepCopy(), out
}

// anchored reports whether rs is controlled by a spoke anchor (spoke.AnchorName of its
// RoutingService's name).
func anchored(rs *appsv1.ReplicaSet) bool {
	ref := metav1.GetControllerOf(rs)
	return ref != nil && ref.Kind == "ConfigMap" && ref.Name == rs.Labels[rollout.LabelName]+"-schemagate"
}

// Watch registers the checker on c's informers for RoutingServices, ReplicaSets, Jobs and Pods. c must
// be started by the caller; the checker sees every add and update the informers deliver.
func (k *Checker) Watch(ctx context.Context, c cache.Cache) error {
	for _, obj := range []client.Object{&routingv1alpha1.RoutingService{}, &appsv1.ReplicaSet{}, &batchv1.Job{}, &corev1.Pod{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { k.observe(o) },
			UpdateFunc: func(_, o any) { k.observe(o) },
			DeleteFunc: func(o any) { k.forget(o) },
		}); err != nil {
			return err
		}
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		k.settle(false)
		k.readI1(ctx, false)
		k.verifyDips(ctx, false)
	}, 200*time.Millisecond)
	return nil
}

// WatchBroken records that a Job or Pod watch of this checker failed at 'at'. Until its reflector
// has listed again (after a back-off of up to 30 s), the updates an object went through are lost:
// a pod that showed its migration report and then succeeded is seen only succeeded, at the later
// resourceVersion. An I1 check whose scale-up was seen within blindWindow of such a failure, and
// whose schema was confirmed only by later evidence, is then undecided rather than a violation.
func (k *Checker) WatchBroken(at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.watchBroken = append(k.watchBroken, at)
}

// blindWindow is how far from a failed Job or Pod watch a scale-up may be for its evidence to have
// been lost: client-go's reflector backs off up to 30 s between attempts, and a kube-apiserver
// outage spans several.
const blindWindow = 90 * time.Second

// blind reports whether a Job or Pod watch of this checker failed within blindWindow of t.
func (k *Checker) blind(t time.Time) bool {
	for _, at := range k.watchBroken {
		if d := t.Sub(at); d > -blindWindow && d < blindWindow {
			return true
		}
	}
	return false
}

// Start gives a Checker an informer cache of its own on cfg (so it sees events independently of
// the manager under test), starts it, and waits until it has synced.
func Start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*Checker, error) {
	return StartFollowing(ctx, cfg, scheme, nil)
}

// StartFollowing is Start for a region cluster's checker that follows hub (Follow); a nil hub is
// Start.
func StartFollowing(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, hub *Checker) (*Checker, error) {
	// Only migration, check and contract pods: they carry the schema reports (a contract Job's
	// reading is evidence to schemagate like a migration's: pkg/rollout/evidence.go).
	schemaPods, err := labels.Parse(rollout.LabelComponent + " in (" + rollout.ComponentMigration + "," + rollout.ComponentCheck + "," + rollout.ComponentContract + ")")
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k := New()
	k.replicaSetsAt = ReplicaSetsAtRevision(cs)
	k.jobsAndPodsAt = JobsAndPodsAtRevision(cs)
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: schemaPods}},
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			if t := r.TypeDescription(); strings.Contains(t, "Pod") || strings.Contains(t, "Job") {
				k.WatchBroken(time.Now())
			}
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		}})
	if err != nil {
		return nil, err
	}
	if hub != nil {
		k.Follow(hub)
	}
	if err := k.Watch(ctx, c); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the invariant checker's cache did not sync")
	}
	return k, nil
}

// Report prints how many events were checked and every violation, and returns how many there were.
func (k *Checker) Report(w io.Writer) int {
	violations, events := k.Violations()
	k.mu.Lock()
	spoke := k.spokeChecked
	k.mu.Unlock()
	if k.hub != nil {
		fmt.Fprintf(w, "invariant checker (region): %d events checked, %d spoke scale-ups checked against the hub, %d violations\n", events, spoke, len(violations))
	} else {
		fmt.Fprintf(w, "invariant checker: %d events checked, %d violations\n", events, len(violations))
	}
	for _, v := range violations {
		fmt.Fprintln(w, "  "+v)
	}
	k.mu.Lock()
	undecided := append([]string(nil), k.undecided...)
	corrected := append([]string(nil), k.correctedI2...)
	correctedI1 := append([]string(nil), k.correctedI1...)
	k.mu.Unlock()
	if len(correctedI1) > 0 {
		fmt.Fprintf(w, "I1 scale-ups whose evidence this checker's watches never delivered, confirmed by the API server's state at their revision (not counted): %d\n", len(correctedI1))
		for _, c := range correctedI1 {
			fmt.Fprintln(w, "  "+c)
		}
	}
	if len(corrected) > 0 {
		fmt.Fprintf(w, "I2 dips of this checker's own view that the API server did not hold at the same resourceVersion (its informer lagged; not counted): %d\n", len(corrected))
		for _, c := range corrected {
			fmt.Fprintln(w, "  "+c)
		}
	}
	if len(undecided) > 0 {
		fmt.Fprintf(w, "undecided (evidence lost to a broken watch of the checker, or a revision it could no longer read; not counted): %d\n", len(undecided))
		for _, u := range undecided {
			fmt.Fprintln(w, "  "+u)
		}
	}
	return len(violations)
}

// Violations returns what was violated so far (after settling pending checks), and how many
// events were checked.
func (k *Checker) Violations() ([]string, int) {
	k.settle(false)
	k.readI1(context.Background(), true)
	k.settle(true)
	k.verifyDips(context.Background(), true)
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.violations...), k.events
}

func rv(o metav1.Object) int64 {
	n, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	return n
}

// forget drops a deleted ReplicaSet or RoutingService, so that its last counts no longer take part.
func (k *Checker) forget(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch obj := o.(type) {
	case *appsv1.ReplicaSet:
		delete(k.rss, obj.Namespace+"/"+obj.Name)
	case *routingv1alpha1.RoutingService:
		delete(k.rsvcs, obj.Namespace+"/"+obj.Name)
	}
}

func (k *Checker) observe(o any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events++
	switch obj := o.(type) {
	case *routingv1alpha1.RoutingService:
		key := obj.Namespace + "/" + obj.Name
		if old := k.rsvcs[key]; old != nil && old.Generation != obj.Generation {
			// A new spec may ask for more replicas than the shard has yet: start I2 afresh.
			for _, s := range obj.Spec.Shards {
				delete(k.served, key+"/"+string(obj.UID)+"/"+s.Name)
			}
		}
		k.rsvcs[key] = obj.DeepCopy()
		k.checkI4(obj)
		for _, rs := range k.rss {
			if rs.Namespace == obj.Namespace && rs.Labels[rollout.LabelName] == obj.Name {
				k.checkI2(rs.Namespace, obj, rs.Labels[rollout.LabelShard])
			}
		}
	case *batchv1.Job:
		owner := metav1.GetControllerOf(obj)
		ns, name, uid := obj.Namespace, "", ""
		switch {
		case owner != nil && owner.Kind == "RoutingService":
			name, uid = owner.Name, string(owner.UID)
		case owner != nil && owner.Kind == "ConfigMap" && obj.Annotations[spoke.AnnotationRoutingServiceUID] != "":
			// A schema Job in a shard's place (spec.schema.runWithShard), controlled by the anchor:
			// it confirms for the RoutingService the anchor names (same API server in envtest).
			ref := strings.SplitN(obj.Annotations[spoke.AnnotationRoutingService], "/", 2)
			if len(ref) != 2 {
				return
			}
			ns, name, uid = ref[0], ref[1], obj.Annotations[spoke.AnnotationRoutingServiceUID]
		default:
			return
		}
		e := k.job(string(obj.UID))
		e.ns, e.rsvcName, e.rsvcUID = ns, name, uid
		e.check = obj.Labels[rollout.LabelComponent] == rollout.ComponentCheck
		e.version = obj.Labels[rollout.LabelSchemaVersion]
		if jobComplete(obj) && e.completeAt == 0 {
			e.completeAt = rv(obj)
		}
		if cs := obj.Spec.Template.Spec.Containers; len(cs) > 0 {
			e.migration = cs[0].Name
		}
		k.confirm(e)
	case *corev1.Pod:
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.Kind != "Job" {
			return
		}
		k.earlyReport(obj, k.job(string(owner.UID)))
		if obj.Status.Phase != corev1.PodSucceeded && obj.Status.Phase != corev1.PodFailed {
			return
		}
		for _, cs := range obj.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Message != "" {
				r, err := schemareport.Parse([]byte(t.Message))
				if err == nil && !r.Dirty {
					e := k.job(string(owner.UID))
					if e.reported == "" {
						e.reported, e.reportedAt = r.Version, rv(obj)
					}
					k.confirm(e)
				}
				break
			}
		}
	case *appsv1.ReplicaSet:
		key := obj.Namespace + "/" + obj.Name
		k.rsHigh = max(k.rsHigh, rv(obj))
		before := int32(0)
		if old := k.rss[key]; old != nil && old.UID == obj.UID && old.Spec.Replicas != nil {
			before = *old.Spec.Replicas
		}
		k.rss[key] = obj.DeepCopy()
		if k.hub != nil && anchored(obj) {
			if obj.Spec.Replicas != nil && *obj.Spec.Replicas > before {
				now := time.Now()
				k.pendingSpoke = append(k.pendingSpoke, pendingCheck{due: now.Add(settleDelay), seen: now, rs: obj.DeepCopy()})
			}
			if rsvc, _ := k.hub.hubView(obj.Namespace, obj.Labels[rollout.LabelName]); rsvc != nil {
				k.checkSpokeI2(rsvc, obj.Labels[rollout.LabelShard])
			}
			return
		}
		// I1 is about what schemagate asks for: a create with replicas, or a scale-up. An orphaned
		// ReplicaSet adopted by a re-created RoutingService (S-20) keeps the pods it already ran.
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.Kind != "RoutingService" {
			// Not schemagate's (a plain Deployment's ReplicaSet beside it in a replay).
			return
		}
		if obj.Spec.Replicas != nil && *obj.Spec.Replicas > before {
			// Decided once the Job watch has had time to deliver anything older (see settle).
			now := time.Now()
			k.pendingI1 = append(k.pendingI1, pendingCheck{due: now.Add(settleDelay), seen: now, rsRV: rv(obj), rs: obj.DeepCopy()})
		}
		if rsvc := k.rsvcs[obj.Namespace+"/"+obj.Labels[rollout.LabelName]]; rsvc != nil {
			k.checkI2(obj.Namespace, rsvc, obj.Labels[rollout.LabelShard])
		}
	}
}

// earlyReport reads a migration (or contract) pod whose migration container has terminated with exit code 0
// and a clean report, whatever its phase (a sidecar may still run beside it, and the Job is marked
// Complete after its pod succeeded): its Job counts as done from then, as schemagate reads it.
func (k *Checker) earlyReport(pod *corev1.Pod, e *jobEvidence) {
	name := e.migration
	if name == "" && len(pod.Spec.Containers) > 0 {
		name = pod.Spec.Containers[0].Name
	}
	if c := pod.Labels[rollout.LabelComponent]; c != rollout.ComponentMigration && c != rollout.ComponentContract {
		return
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == name && t != nil && t.ExitCode == 0 {
			if r, err := schemareport.Parse([]byte(t.Message)); err == nil && !r.Dirty {
				if e.reported == "" {
					e.reported, e.reportedAt = r.Version, rv(pod)
				}
				if e.doneAt == 0 {
					e.doneAt, e.early = rv(pod), r.Version
				}
				k.confirm(e)
			}
		}
	}
}

func (k *Checker) job(uid string) *jobEvidence {
	e := k.jobs[uid]
	if e == nil {
		e = &jobEvidence{}
		k.jobs[uid] = e
	}
	return e
}

// confirm records the version e's Job confirms, dated by the resourceVersions of the evidence
// itself, never by the order in which the informers (one per kind) delivered it: a Job's Complete
// may arrive before an older pod update that already confirmed. A Job confirms at the earliest of:
//   - (a migration Job) doneAt, the pod update that showed its migration container terminated with
//     exit code 0 and a clean report (what schemagate reads while the Job is active, sidecar.go);
//   - completeAt and a clean report of one of its pods, at the later of the two;
//   - (a migration Job under spec.schema.evidence JobSuccess, no clean report) completeAt, for the
//     Job's own schema-version label.
//
// Each version keeps its earliest confirmation over all Jobs, whichever was seen first.
func (k *Checker) confirm(e *jobEvidence) {
	if e.rsvcUID == "" {
		return
	}
	key := e.ns + "/" + e.rsvcUID
	record := func(v string, at int64) {
		if v == "" || at == 0 {
			return
		}
		if k.confirmedAt[key] == nil {
			k.confirmedAt[key] = map[string]int64{}
		}
		if seen, ok := k.confirmedAt[key][v]; !ok || at < seen {
			k.confirmedAt[key][v] = at
		}
		if k.confirmedWall[key] == nil {
			k.confirmedWall[key] = map[string]time.Time{}
		}
		if _, ok := k.confirmedWall[key][v]; !ok {
			k.confirmedWall[key][v] = time.Now()
		}
	}
	if !e.check {
		record(e.early, e.doneAt)
	}
	if e.completeAt != 0 && e.reported != "" {
		record(e.reported, max(e.completeAt, e.reportedAt))
	}
	rsvc := k.rsvcs[e.ns+"/"+e.rsvcName]
	if e.completeAt != 0 && !e.check && e.reported == "" && rsvc != nil && rsvc.Spec.Schema.EvidenceOrDefault() == routingv1alpha1.SchemaEvidenceJobSuccess {
		record(e.version, e.completeAt)
	}
}

// describeConfirmations lists a RoutingService's confirmations as "version@resourceVersion",
// lowest version first, or "none": so that a violation can be read without the run's logs.
func describeConfirmations(c map[string]int64) string {
	var out []string
	for v, at := range c {
		out = append(out, fmt.Sprintf("%s@%d", v, at))
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// settle decides the I1 checks that are due (all of them when final).
func (k *Checker) settle(final bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	var keep []pendingCheck
	for _, p := range k.pendingI1 {
		if !final && now.Before(p.due) {
			keep = append(keep, p)
			continue
		}
		owner := metav1.GetControllerOf(p.rs)
		if owner == nil {
			continue
		}
		need, _ := rollout.RecordedRange(p.rs)
		ok, later := k.confirmedBefore(p.rs.Namespace, string(owner.UID), p.rs, p.rsRV)
		if !ok && final {
			if held, found := k.heldAt[i1ReadKey(p)]; found && held != "" {
				// The checker's own watches missed the evidence; the API server's state at the
				// scale-up's revision had it (confirm_at.go).
				k.correctedI1 = append(k.correctedI1, held)
				continue
			}
		}
		if !ok && !final {
			if !p.asked && k.jobsAndPodsAt != nil {
				p.asked = true
				k.i1Reads = append(k.i1Reads, p)
			}
			// Not confirmed yet as far as this checker has seen: its Job or Pod informer may lag
			// (a relist after a kube-apiserver outage can take tens of seconds). Confirmations
			// are compared by resourceVersion, so waiting changes no verdict: it is decided at
			// the end, when every event has been delivered.
			keep = append(keep, p)
			continue
		}
		if !ok && later && k.blind(p.seen) {
			// Confirmed, but only by evidence seen after a gap in this checker's own watches: the
			// earlier state that schemagate may have read was never delivered to it.
			k.undecided = append(k.undecided, fmt.Sprintf("I1: ReplicaSet %s/%s asked for %d replicas at resourceVersion %d; schema %s was confirmed only at %s, as seen after this checker's Job or Pod watch broke",
				p.rs.Namespace, p.rs.Name, *p.rs.Spec.Replicas, p.rsRV, need, describeConfirmations(k.confirmedAt[p.rs.Namespace+"/"+string(owner.UID)])))
			continue
		}
		if !ok {
			k.violations = append(k.violations, fmt.Sprintf("I1: ReplicaSet %s/%s asked for %d replicas at resourceVersion %d, before schema %s was confirmed (confirmations seen: %s)",
				p.rs.Namespace, p.rs.Name, *p.rs.Spec.Replicas, p.rsRV, need, describeConfirmations(k.confirmedAt[p.rs.Namespace+"/"+string(owner.UID)])))
		}
	}
	k.pendingI1 = keep
	k.settleSpoke(final, now)
}

// confirmedBefore reports whether this checker has seen a schema inside rs's recorded range
// confirmed for RoutingService uid below resourceVersion rsRV (ok), or at all (later). k.mu is held.
func (k *Checker) confirmedBefore(ns, uid string, rs *appsv1.ReplicaSet, rsRV int64) (ok, later bool) {
	need, newest := rollout.RecordedRange(rs)
	for v, at := range k.confirmedAt[ns+"/"+uid] {
		if schemaversion.AtLeast(v, need) && (newest == "" || schemaversion.AtLeast(newest, v)) {
			later = true
			if at < rsRV {
				return true, true
			}
		}
	}
	return false, later
}

// settleSpoke decides the spoke I1 checks that are due: a schema inside the ReplicaSet's range
// must have been seen confirmed in the hub no later than spokeSlack after the scale-up was seen.
// k.mu is held; the hub's is taken inside (never the other way round).
func (k *Checker) settleSpoke(final bool, now time.Time) {
	var keep []pendingCheck
	for _, p := range k.pendingSpoke {
		if !final && now.Before(p.due) {
			keep = append(keep, p)
			continue
		}
		rsvc, confirmed := k.hub.hubView(p.rs.Namespace, p.rs.Labels[rollout.LabelName])
		if rsvc == nil || (p.uid != "" && string(rsvc.UID) != p.uid) {
			if !final && p.uid == "" {
				keep = append(keep, p)
			}
			continue
		}
		p.uid = string(rsvc.UID)
		need, newest := rollout.RecordedRange(p.rs)
		ok := false
		for v, at := range confirmed {
			if schemaversion.AtLeast(v, need) && (newest == "" || schemaversion.AtLeast(newest, v)) && at.Before(p.seen.Add(spokeSlack)) {
				ok = true
				break
			}
		}
		if !ok && !final {
			keep = append(keep, p)
			continue
		}
		k.spokeChecked++
		if !ok {
			var seen []string
			for v, at := range confirmed {
				seen = append(seen, fmt.Sprintf("%s at %s", v, at.Format("15:04:05.000")))
			}
			sort.Strings(seen)
			k.violations = append(k.violations, fmt.Sprintf("I1 (spoke): ReplicaSet %s/%s asked for %d replicas at %s, before schema %s was confirmed in the hub (confirmations seen: %v)",
				p.rs.Namespace, p.rs.Name, *p.rs.Spec.Replicas, p.seen.Format("15:04:05.000"), need, seen))
		}
	}
	k.pendingSpoke = keep
}

// checkI2 checks a shard of rsvc. Only the ReplicaSets rsvc controls count, and a RoutingService
// being deleted is not checked: the garbage collector, not schemagate, removes its pods (S-20).
// A RoutingService re-created under the same name (a new UID) starts afresh.
func (k *Checker) checkI2(ns string, rsvc *routingv1alpha1.RoutingService, shard string) {
	key := ns + "/" + rsvc.Name + "/" + string(rsvc.UID) + "/" + shard
	k.judgeI2(rsvc, shard, key, "I2", func(rs *appsv1.ReplicaSet) bool { return rs.Namespace == ns && metav1.IsControlledBy(rs, rsvc) })
}

// checkSpokeI2 is checkI2 for a shard whose ReplicaSets live in this (region) cluster, controlled
// by the spoke anchor, judged on the hub's RoutingService; a new generation starts it afresh
// (this checker sees no RoutingService events of its own).
func (k *Checker) checkSpokeI2(rsvc *routingv1alpha1.RoutingService, shard string) {
	key := "spoke:" + rsvc.Namespace + "/" + rsvc.Name + "/" + string(rsvc.UID) + "/" + shard
	if k.servedGen[key] != rsvc.Generation {
		k.servedGen[key] = rsvc.Generation
		delete(k.served, key)
	}
	k.judgeI2(rsvc, shard, key, "I2 (spoke)", func(rs *appsv1.ReplicaSet) bool { return rs.Namespace == rsvc.Namespace && anchored(rs) })
}

// judgeI2 sums the available pods of shard's ReplicaSets that counts accepts and records a
// violation when a shard that served (key) drops below its floor.
func (k *Checker) judgeI2(rsvc *routingv1alpha1.RoutingService, shard, key, what string, counts func(*appsv1.ReplicaSet) bool) {
	if _, exempt := k.exemptI2[rsvc.Namespace]; rsvc.DeletionTimestamp != nil || exempt {
		return
	}
	var spec *routingv1alpha1.ShardSpec
	for i := range rsvc.Spec.Shards {
		if rsvc.Spec.Shards[i].Name == shard {
			spec = &rsvc.Spec.Shards[i]
		}
	}
	if spec == nil {
		return
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(k.rss))
	for _, rs := range k.rss {
		rss = append(rss, rs)
	}
	available, detail := shardAvailable(rss, rsvc.Name, shard, counts)
	floor := rollout.ResolveBudget(i2Replicas(spec), rsvc.Spec.Strategy.MaxSurge, rsvc.Spec.Strategy.MaxUnavailable).MinAvailable()
	if available >= floor {
		k.served[key] = true
		return
	}
	if k.served[key] {
		d := dip{what: what, key: key, ns: rsvc.Namespace, name: rsvc.Name, shard: shard, rv: k.rsHigh, floor: floor, counts: counts}
		d.seen = d.violation(available, detail, "")
		k.recordDip(d)
		// Report each dip once; it counts as served again when it recovers.
		k.served[key] = false
	}
}

func (k *Checker) checkI4(rsvc *routingv1alpha1.RoutingService) {
	st := rsvc.Status
	if st.ObservedGeneration > rsvc.Generation {
		k.violations = append(k.violations, fmt.Sprintf("I4: %s/%s status.observedGeneration %d > generation %d", rsvc.Namespace, rsvc.Name, st.ObservedGeneration, rsvc.Generation))
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != st.ObservedGeneration {
			k.violations = append(k.violations, fmt.Sprintf("I4: %s/%s condition %s has observedGeneration %d, status has %d", rsvc.Namespace, rsvc.Name, c.Type, c.ObservedGeneration, st.ObservedGeneration))
		}
	}
}

// i2Replicas is the size I2 holds a shard to: spec.shards[].replicas, or, for an autoscaled shard,
// the smallest size its autoscaler may ask for (autoscaling.minReplicas, 1 by default; 0 for an
// External scaler, which may scale to zero), since a scale-down it asks for is a replica change,
// not a disruption schemagate causes.
func i2Replicas(spec *routingv1alpha1.ShardSpec) int32 {
	a := spec.Autoscaling
	if a == nil {
		return spec.Replicas
	}
	if a.Scaler == routingv1alpha1.ShardScalerExternal {
		return 0
	}
	if a.MinReplicas == nil {
		return min(spec.Replicas, 1)
	}
	return min(spec.Replicas, *a.MinReplicas)
}
