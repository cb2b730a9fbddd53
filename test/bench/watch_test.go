//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// watcher holds the bench's own informers (pods, ReplicaSets, Jobs, Deployments, RoutingServices)
// and records, with the local time it saw them: pod creations (the rate at which pods appear),
// each migration Job's Complete condition and each RoutingService's first ReplicaSet of an image
// (the gate latency), and the writes schemagate's objects went through (a breakdown of the
// manager's writes).
type watcher struct {
	cache cache.Cache

	mu sync.Mutex
	// podSeen is when each pod was first seen (pods of the initial list are left out).
	podSeen []time.Time
	// jobComplete: "<ns>/<rsvc>/<schema version>" → when the migration Job was first seen Complete.
	jobComplete map[string]time.Time
	// jobKey: "<ns>/<Job name>" → its jobComplete key; podDone: "<ns>/<Job name>" → when a pod of
	// that migration Job was first seen with its migration container terminated with exit code 0
	// (the evidence schemagate reads, often before the Job controller marks the Job Complete).
	jobKey  map[string]string
	podDone map[string]time.Time
	// firstRS: "<ns>/<rsvc>/<image>" → when the first routing ReplicaSet of that image was seen.
	firstRS map[string]time.Time
	// writes counts what happened to schemagate's objects (see the count* constants).
	writes map[string]int
	// statusChanges counts the RoutingService status writes by the fields they changed.
	statusChanges map[string]int
}

// Kinds of writes the watcher counts on schemagate's objects.
const (
	countRSCreate     = "ReplicaSet create"
	countRSSpec       = "ReplicaSet spec patch (scale)"
	countRSMeta       = "ReplicaSet metadata patch"
	countRSDelete     = "ReplicaSet delete"
	countJobCreate    = "Job create"
	countJobSpec      = "Job spec patch"
	countStatus       = "RoutingService status write"
	countStatusNoDiff = "RoutingService status write changing nothing"
)

func startWatcher(ctx context.Context, cfg *rest.Config) (*watcher, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return nil, err
	}
	w := &watcher{cache: c, jobComplete: map[string]time.Time{}, firstRS: map[string]time.Time{},
		jobKey: map[string]string{}, podDone: map[string]time.Time{},
		writes: map[string]int{}, statusChanges: map[string]int{}}
	handlers := []struct {
		obj client.Object
		h   toolscache.ResourceEventHandler
	}{
		{&corev1.Pod{}, toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: w.podAdded, UpdateFunc: w.podUpdated}},
		{&appsv1.ReplicaSet{}, toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: w.rsAdded, UpdateFunc: w.rsUpdated, DeleteFunc: w.rsDeleted}},
		{&batchv1.Job{}, toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: w.jobAdded, UpdateFunc: w.jobUpdated}},
		{&appsv1.Deployment{}, toolscache.ResourceEventHandlerFuncs{}},
		{&routingv1alpha1.RoutingService{}, toolscache.ResourceEventHandlerDetailedFuncs{UpdateFunc: w.rsvcUpdated}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(h.h); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the bench's informers did not sync")
	}
	return w, nil
}

func ours(o client.Object) bool {
	return o.GetLabels()[rollout.LabelManagedBy] == rollout.ManagedByValue && o.GetLabels()[rollout.LabelName] != ""
}

func (w *watcher) count(kind string) {
	w.mu.Lock()
	w.writes[kind]++
	w.mu.Unlock()
}

func (w *watcher) podAdded(_ any, initial bool) {
	if initial {
		return
	}
	now := time.Now()
	w.mu.Lock()
	w.podSeen = append(w.podSeen, now)
	w.mu.Unlock()
}

// podUpdated records when a migration pod was first seen with its first container (the migration
// container) terminated with exit code 0.
func (w *watcher) podUpdated(_, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[rollout.LabelComponent] != rollout.ComponentMigration || len(pod.Spec.Containers) == 0 {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Job" {
		return
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == pod.Spec.Containers[0].Name && t != nil && t.ExitCode == 0 {
			now := time.Now()
			w.mu.Lock()
			if _, seen := w.podDone[pod.Namespace+"/"+ref.Name]; !seen {
				w.podDone[pod.Namespace+"/"+ref.Name] = now
			}
			w.mu.Unlock()
		}
	}
}

func (w *watcher) rsAdded(obj any, initial bool) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || initial || !ours(rs) {
		return
	}
	now := time.Now()
	w.count(countRSCreate)
	key := rs.Namespace + "/" + rs.Labels[rollout.LabelName] + "/" + rs.Spec.Template.Spec.Containers[0].Image
	w.mu.Lock()
	if _, seen := w.firstRS[key]; !seen {
		w.firstRS[key] = now
	}
	w.mu.Unlock()
}

func (w *watcher) rsUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	rs, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || !ours(rs) || old.ResourceVersion == rs.ResourceVersion {
		return
	}
	switch {
	case old.Generation != rs.Generation:
		w.count(countRSSpec)
	case !reflect.DeepEqual(old.Labels, rs.Labels) || !reflect.DeepEqual(old.Annotations, rs.Annotations) ||
		!reflect.DeepEqual(old.OwnerReferences, rs.OwnerReferences):
		w.count(countRSMeta)
	}
}

func (w *watcher) rsDeleted(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if rs, ok := obj.(*appsv1.ReplicaSet); ok && ours(rs) {
		w.count(countRSDelete)
	}
}

func (w *watcher) jobAdded(obj any, initial bool) {
	job, ok := obj.(*batchv1.Job)
	if !ok || !ours(job) {
		return
	}
	if !initial {
		w.count(countJobCreate)
	}
	w.jobSeen(job)
}

func (w *watcher) jobUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	job, ok2 := newObj.(*batchv1.Job)
	if !ok1 || !ok2 || !ours(job) {
		return
	}
	if old.Generation != job.Generation {
		w.count(countJobSpec)
	}
	w.jobSeen(job)
}

// jobSeen records when a migration Job was first seen with Complete=True.
func (w *watcher) jobSeen(job *batchv1.Job) {
	if job.Labels[rollout.LabelComponent] != rollout.ComponentMigration {
		return
	}
	w.mu.Lock()
	w.jobKey[job.Namespace+"/"+job.Name] = job.Namespace + "/" + job.Labels[rollout.LabelName] + "/" + job.Labels[rollout.LabelSchemaVersion]
	w.mu.Unlock()
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			now := time.Now()
			key := job.Namespace + "/" + job.Labels[rollout.LabelName] + "/" + job.Labels[rollout.LabelSchemaVersion]
			w.mu.Lock()
			if _, seen := w.jobComplete[key]; !seen {
				w.jobComplete[key] = now
			}
			w.mu.Unlock()
		}
	}
}

// rsvcUpdated counts status writes: a new resourceVersion with the same generation, labels and
// annotations (the manager writes the status subresource only).
func (w *watcher) rsvcUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*routingv1alpha1.RoutingService)
	r, ok2 := newObj.(*routingv1alpha1.RoutingService)
	if !ok1 || !ok2 || old.ResourceVersion == r.ResourceVersion || old.Generation != r.Generation ||
		!reflect.DeepEqual(old.Labels, r.Labels) || !reflect.DeepEqual(old.Annotations, r.Annotations) {
		return
	}
	sig := statusDiff(old.Status, r.Status)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[countStatus]++
	if equality.Semantic.DeepEqual(old.Status, r.Status) {
		w.writes[countStatusNoDiff]++
		sig = "(nothing)"
	}
	w.statusChanges[sig]++
}

// statusDiff names the status fields two statuses differ in, list indices folded
// ("conditions[].message", "shards[].availableReplicas"), sorted and comma-separated.
func statusDiff(a, b routingv1alpha1.RoutingServiceStatus) string {
	var ma, mb any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	paths := map[string]bool{}
	diffPaths("", ma, mb, 0, paths)
	var out []string
	for p := range paths {
		out = append(out, p)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func diffPaths(prefix string, a, b any, depth int, out map[string]bool) {
	if reflect.DeepEqual(a, b) {
		return
	}
	if depth >= 3 {
		out[prefix] = true
		return
	}
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			out[prefix] = true
			return
		}
		for k := range av {
			diffPaths(join(k), av[k], bv[k], depth+1, out)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				diffPaths(join(k), nil, bv[k], depth+1, out)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			out[prefix+"[]"] = true
			return
		}
		for i := range av {
			diffPaths(prefix+"[]", av[i], bv[i], depth, out)
		}
	default:
		if prefix == "" {
			prefix = "(status)"
		}
		out[prefix] = true
	}
}

// counts is a copy of the watcher's counters at one instant.
type counts struct {
	writes        map[string]int
	statusChanges map[string]int
	pods          int
}

func (w *watcher) snapshot() counts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := counts{writes: map[string]int{}, statusChanges: map[string]int{}, pods: len(w.podSeen)}
	for k, v := range w.writes {
		c.writes[k] = v
	}
	for k, v := range w.statusChanges {
		c.statusChanges[k] = v
	}
	return c
}

// podRate is the number of pods first seen in [from, to] and the most seen in one second.
func (w *watcher) podRate(from, to time.Time) (total, peak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	perSecond := map[int64]int{}
	for _, t := range w.podSeen {
		if t.Before(from) || t.After(to) {
			continue
		}
		total++
		s := int64(t.Sub(from) / time.Second)
		perSecond[s]++
		if perSecond[s] > peak {
			peak = perSecond[s]
		}
	}
	return total, peak
}

// podsPerSecond counts the pods first seen in each second of [from, to].
func (w *watcher) podsPerSecond(from, to time.Time) []int {
	out := make([]int, int(to.Sub(from)/time.Second)+1)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.podSeen {
		if !t.Before(from) && !t.After(to) {
			out[int(t.Sub(from)/time.Second)]++
		}
	}
	return out
}

// gateLatencies is, per RoutingService of names in ns (with at, when its evidence was seen), the time from the evidence that its
// migration Job for schema succeeded (the earlier of a pod of it seen with the migration
// container terminated with exit code 0, and the Job seen Complete) to the first ReplicaSet of
// image seen; missing names are returned apart.
func (w *watcher) gateLatencies(ns string, names []string, schema, image string) (lat []time.Duration, at []time.Time, missing []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evidence := map[string]time.Time{}
	for k, at := range w.jobComplete {
		evidence[k] = at
	}
	for job, at := range w.podDone {
		if k, ok := w.jobKey[job]; ok {
			if e, seen := evidence[k]; !seen || at.Before(e) {
				evidence[k] = at
			}
		}
	}
	for _, n := range names {
		done, ok1 := evidence[ns+"/"+n+"/"+schema]
		rs, ok2 := w.firstRS[ns+"/"+n+"/"+image]
		if !ok1 || !ok2 {
			missing = append(missing, n)
			continue
		}
		lat = append(lat, rs.Sub(done))
		at = append(at, done)
	}
	return lat, at, missing
}
