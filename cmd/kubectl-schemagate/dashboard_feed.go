package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// debounce is how long the feed waits after a change before it computes a snapshot: a rollout
// step changes the RoutingService, a ReplicaSet and several pods within milliseconds, and the
// tabs get one snapshot for them, not ten.
const debounce = 150 * time.Millisecond

// Bounds on what the feed keeps per RoutingService.
const (
	maxEvents = 100
	maxSteps  = 100
)

// feed watches the RoutingServices in scope and what schemagate made for them, and after each
// change publishes one snapshot to the broker. It reads only from its informers' caches: no tab
// ever makes it call the API server.
type feed struct {
	cl       *clients
	ns       string // "" for every namespace
	now      func() time.Time
	readOnly bool
	broker   *broker
	delay    time.Duration

	rsvc, rs, jobs, pods, events cache.SharedIndexInformer
	notes                        []string
	poke                         chan struct{}

	// steps are the shard steps seen so far, by namespace/name: the status keeps only each
	// shard's current step, the timeline shows the earlier ones too.
	steps map[string][]TimelineEntry
	seq   uint64
}

func newFeed(cl *clients, ns string, now func() time.Time, readOnly bool) *feed {
	return &feed{cl: cl, ns: ns, now: now, readOnly: readOnly, broker: newBroker(), delay: debounce,
		poke: make(chan struct{}, 1), steps: map[string][]TimelineEntry{}}
}

// start lists what the dashboard needs once (so that a missing permission is said plainly
// instead of an informer retrying forever), then starts the informers and waits for their caches.
func (f *feed) start(ctx context.Context) error {
	where := "namespace " + f.ns
	if f.ns == "" {
		where = "any namespace"
	}
	one := metav1.ListOptions{Limit: 1}
	if _, err := f.cl.dyn.Resource(rsvcGVR).Namespace(f.ns).List(ctx, one); err != nil {
		return fmt.Errorf("cannot list routingservices in %s: %w", where, err)
	}
	labelled := metav1.ListOptions{Limit: 1, LabelSelector: hasNameLabel()}
	for what, list := range map[string]func() error{
		"replicasets": func() error { _, err := f.cl.kube.AppsV1().ReplicaSets(f.ns).List(ctx, labelled); return err },
		"jobs":        func() error { _, err := f.cl.kube.BatchV1().Jobs(f.ns).List(ctx, labelled); return err },
		"pods":        func() error { _, err := f.cl.kube.CoreV1().Pods(f.ns).List(ctx, labelled); return err },
	} {
		if err := list(); err != nil {
			return fmt.Errorf("cannot list %s in %s: %w", what, where, err)
		}
	}
	eventsOK := true
	if _, err := f.cl.kube.CoreV1().Events(f.ns).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: eventSelector()}); err != nil {
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("cannot list events in %s: %w", where, err)
		}
		eventsOK = false
		f.notes = append(f.notes, fmt.Sprintf("Events are not shown: you may not list events in %s", where))
	}

	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(f.cl.dyn, 0, f.ns, nil)
	f.rsvc = dyn.ForResource(rsvcGVR).Informer()
	kf := informers.NewSharedInformerFactoryWithOptions(f.cl.kube, 0, informers.WithNamespace(f.ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = hasNameLabel() }))
	f.rs = kf.Apps().V1().ReplicaSets().Informer()
	f.jobs = kf.Batch().V1().Jobs().Informer()
	f.pods = kf.Core().V1().Pods().Informer()
	infs := []cache.SharedIndexInformer{f.rsvc, f.rs, f.jobs, f.pods}
	var ef informers.SharedInformerFactory
	if eventsOK {
		ef = informers.NewSharedInformerFactoryWithOptions(f.cl.kube, 0, informers.WithNamespace(f.ns),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = eventSelector() }))
		f.events = ef.Core().V1().Events().Informer()
		infs = append(infs, f.events)
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.changed() },
		UpdateFunc: func(any, any) { f.changed() },
		DeleteFunc: func(any) { f.changed() },
	}
	for i, inf := range infs {
		if i > 0 {
			// managedFields of pods and ReplicaSets are large and never shown; the
			// RoutingService keeps its own (they say which GitOps tool manages it).
			if err := inf.SetTransform(dropManagedFields); err != nil {
				return err
			}
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	dyn.Start(ctx.Done())
	kf.Start(ctx.Done())
	if ef != nil {
		ef.Start(ctx.Done())
	}
	for _, inf := range infs {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("cannot watch in %s: %w", where, context.Cause(ctx))
		}
	}
	return nil
}

func hasNameLabel() string {
	req, _ := labels.NewRequirement(rollout.LabelName, selection.Exists, nil)
	return labels.NewSelector().Add(*req).String()
}

func eventSelector() string {
	return fields.OneTermEqualSelector("involvedObject.kind", "RoutingService").String()
}

func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// changed wakes run; a wake-up already pending covers this change too.
func (f *feed) changed() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// run publishes a snapshot now, then one after each burst of changes (delay after its first
// change), until ctx ends.
func (f *feed) run(ctx context.Context) {
	f.publish()
	var wait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.poke:
			if wait == nil {
				wait = time.After(f.delay)
			}
		case <-wait:
			wait = nil
			f.publish()
		}
	}
}

func (f *feed) publish() {
	b, err := encodeSnapshot(f.snapshot())
	if err != nil {
		// jsonNumber and cutStrings leave nothing encoding/json refuses; say it if that changes.
		b, _ = encodeSnapshot(&Snapshot{Now: f.now().UTC(), Namespace: f.ns, ReadOnly: f.readOnly, Services: []ServiceModel{},
			Notes: []string{"cannot encode the snapshot: " + err.Error()}})
	}
	f.broker.publish(b)
}

// snapshot computes the models of every RoutingService in the caches.
func (f *feed) snapshot() *Snapshot {
	now := f.now()
	f.seq++
	s := &Snapshot{Now: now.UTC(), Namespace: f.ns, ReadOnly: f.readOnly, Seq: f.seq, Services: []ServiceModel{},
		Notes: append([]string(nil), f.notes...)}
	objs := map[string]*Objects{}
	at := func(ns, name string) *Objects {
		k := ns + "/" + name
		if objs[k] == nil {
			objs[k] = &Objects{}
		}
		return objs[k]
	}
	for _, x := range f.rs.GetStore().List() {
		o := x.(*appsv1.ReplicaSet)
		at(o.Namespace, o.Labels[rollout.LabelName]).ReplicaSets = append(at(o.Namespace, o.Labels[rollout.LabelName]).ReplicaSets, *o)
	}
	for _, x := range f.jobs.GetStore().List() {
		o := x.(*batchv1.Job)
		at(o.Namespace, o.Labels[rollout.LabelName]).Jobs = append(at(o.Namespace, o.Labels[rollout.LabelName]).Jobs, *o)
	}
	for _, x := range f.pods.GetStore().List() {
		o := x.(*corev1.Pod)
		at(o.Namespace, o.Labels[rollout.LabelName]).Pods = append(at(o.Namespace, o.Labels[rollout.LabelName]).Pods, *o)
	}
	events := map[string][]corev1.Event{}
	if f.events != nil {
		for _, x := range f.events.GetStore().List() {
			e := x.(*corev1.Event)
			if e.InvolvedObject.Kind != "RoutingService" {
				continue
			}
			k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
			events[k] = append(events[k], *e)
		}
	}
	items := f.rsvc.GetStore().List()
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].(*unstructured.Unstructured), items[j].(*unstructured.Unstructured)
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	live := map[string]bool{}
	for _, x := range items {
		u := x.(*unstructured.Unstructured)
		k := u.GetNamespace() + "/" + u.GetName()
		live[k] = true
		r, err := toTyped(u)
		if err != nil {
			s.Notes = append(s.Notes, cutMessage(err.Error()))
			continue
		}
		var o Objects
		if p := objs[k]; p != nil {
			o = *p
		}
		m, err := serviceModel(u, r, o, newestEvents(events[k]), f.steps[k], now)
		if err != nil {
			// One object the dashboard cannot draw must not blank the others.
			s.Notes = append(s.Notes, cutMessage(fmt.Sprintf("cannot show routingservice %s: %v", k, err)))
			continue
		}
		f.steps[k] = rememberSteps(f.steps[k], stepEntries(r))
		s.Services = append(s.Services, m)
	}
	for k := range f.steps {
		if !live[k] {
			delete(f.steps, k)
		}
	}
	return s
}

// serviceModel is buildService's model, or an error when building it panics or the model does
// not encode (a time of the status past year 9999, which encoding/json refuses): the snapshot
// leaves that RoutingService out, with a note, and shows the others.
func serviceModel(u *unstructured.Unstructured, r *routingv1alpha1.RoutingService, objs Objects, events []corev1.Event,
	steps []TimelineEntry, now time.Time) (m ServiceModel, err error) {
	defer func() {
		if x := recover(); x != nil {
			m, err = ServiceModel{}, fmt.Errorf("%v", x)
		}
	}()
	m = buildService(u, r, objs, events, steps, now)
	if _, err := json.Marshal(m); err != nil {
		return ServiceModel{}, err
	}
	return m, nil
}

// newestEvents keeps the maxEvents newest events.
func newestEvents(evs []corev1.Event) []corev1.Event {
	if len(evs) <= maxEvents {
		return evs
	}
	evs = append([]corev1.Event(nil), evs...)
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	return evs[len(evs)-maxEvents:]
}

// rememberSteps adds the steps not seen yet, keeping the maxSteps newest.
func rememberSteps(have, now []TimelineEntry) []TimelineEntry {
	for _, s := range now {
		dup := false
		for _, h := range have {
			if h.Time.Equal(s.Time) && h.Text == s.Text {
				dup = true
				break
			}
		}
		if !dup {
			have = append(have, s)
		}
	}
	sort.SliceStable(have, func(i, j int) bool { return have[i].Time.Before(have[j].Time) })
	if len(have) > maxSteps {
		have = have[len(have)-maxSteps:]
	}
	return have
}

// broker hands the newest snapshot to every subscriber. Each subscriber has a mailbox of one:
// a tab that reads slowly finds only the newest snapshot when it reads again, never a queue.
type broker struct {
	mu     sync.Mutex
	latest []byte
	subs   map[chan []byte]struct{}
}

func newBroker() *broker { return &broker{subs: map[chan []byte]struct{}{}} }

func (b *broker) publish(data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latest = data
	for ch := range b.subs {
		replace(ch, data)
	}
}

// replace puts data in the mailbox ch, dropping what it held. Only publish sends (under the
// broker's lock), so the second send finds room.
func replace(ch chan []byte, data []byte) {
	select {
	case ch <- data:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- data:
	default:
	}
}

// subscribe returns a mailbox holding the newest snapshot (when there is one yet), and the
// function that unsubscribes it.
func (b *broker) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.latest != nil {
		ch <- b.latest
	}
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs, ch)
	}
}

// last is the newest snapshot, nil before the first.
func (b *broker) last() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest
}
