package controllers

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

const (
	// MaxMeasurementsInFlight bounds the http and prometheus measurements taken at once, across
	// every RoutingService.
	MaxMeasurementsInFlight = 256
	// MaxMeasurementsInFlightPerRoutingService bounds those of one RoutingService, so that its
	// endpoints, however slow, take at most this share of MaxMeasurementsInFlight.
	MaxMeasurementsInFlightPerRoutingService = 16
)

// pendingMeasurements takes the measurements the planner asks for outside the reconcile: a
// reconcile never waits on a network call, so an endpoint that never answers holds no worker
// and slows no other RoutingService (each measurement still ends within its check's
// timeoutSeconds). start starts a requested measurement in the background, and finished returns
// the ones that have finished to the next reconcile's observation; when one finishes, the RoutingService is reconciled again (Events), and
// that reconcile's plan records it.
//
// A finished measurement is kept until a reconcile returns it (at most its check's interval and
// undeliveredGrace), then with the count of measurements status showed for that check then, for
// at most the check's interval. A reconcile that reads a stale
// RoutingService from the cache (our previous status write not yet in it) asks again for the
// measurement that write recorded: its status still shows the same count, so it gets the kept
// measurement, and its status write conflicts as any write on a stale object does. A status write
// that conflicts loses nothing either: the retry reuses it. Once the status shows a higher count
// the measurement is recorded and never reused (status times have one-second precision, so the
// time alone cannot tell). A measurement in flight is never started twice. Without this, a count
// of 2 sent 3 requests; reusing by time alone counted one request twice.
type pendingMeasurements struct {
	mu   sync.Mutex
	kept map[types.NamespacedName]map[rollout.MeasurementKey]*keptMeasurement
	// slots bounds the measurements in flight (MaxMeasurementsInFlight; made on first use).
	slots chan struct{}
	// events receives the RoutingService of each finished measurement (made on first use).
	events chan event.GenericEvent
}

type keptMeasurement struct {
	// done is false while the measurement is in flight; delivered, once finished returned it.
	done, delivered bool
	taken           rollout.TakenMeasurement
	expires         time.Time
	// recorded is the count status showed for the check when finished first returned it: a higher
	// count means a status write that held it succeeded (every reconcile returns every delivered,
	// unrecorded measurement, so the write that raised the count held this one too).
	recorded int32
	// interval is the check's interval: a delivered measurement expires that long after.
	interval time.Duration
}

// undeliveredGrace is how long a finished measurement waits, past its check's interval, for the
// reconcile that records it (a busy work queue delays that reconcile; dropping the measurement
// would ask the endpoint again for nothing).
const undeliveredGrace = 30 * time.Second

// Events are the RoutingServices whose measurements finished, for the controller to reconcile.
func (p *pendingMeasurements) Events() <-chan event.GenericEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return p.events
}

func (p *pendingMeasurements) init() {
	if p.kept == nil {
		p.kept = map[types.NamespacedName]map[rollout.MeasurementKey]*keptMeasurement{}
	}
	if p.slots == nil {
		p.slots = make(chan struct{}, MaxMeasurementsInFlight)
	}
	if p.events == nil {
		p.events = make(chan event.GenericEvent, 1024)
	}
}

// finished returns the finished, unrecorded measurements of rsvc, by key: what the reconcile
// observes, so that the one plan it computes records them. A measurement is delivered the first
// time it is returned (expiring an interval later) and returned again while the status shows the
// count it was delivered at; an expired or recorded one is dropped. now is the reconciler's clock.
func (p *pendingMeasurements) finished(rsvc *routingv1alpha1.RoutingService, now time.Time) []rollout.TakenMeasurement {
	name := types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	var out []rollout.TakenMeasurement
	for key, k := range p.kept[name] {
		switch {
		case !k.done:
		case !now.Before(k.expires) || (k.delivered && k.recorded != recordedCount(rsvc, key)):
			delete(p.kept[name], key)
		default:
			if !k.delivered {
				k.delivered, k.recorded, k.expires = true, recordedCount(rsvc, key), now.Add(k.interval)
			}
			out = append(out, k.taken)
		}
	}
	slices.SortFunc(out, func(a, b rollout.TakenMeasurement) int {
		return cmp.Compare(keyText(a.MeasurementKey), keyText(b.MeasurementKey))
	})
	return out
}

func keyText(k rollout.MeasurementKey) string {
	return k.Shard + "/" + k.Check + "/" + k.Revision + "/" + string(k.When) + "/" + k.Pod
}

// start starts, in the background, each measurement the plan asks for that is neither in flight
// nor kept, at most MaxMeasurementsInFlightPerRoutingService of rsvc's at once (one asked for
// past that is asked for again by a later plan); m reads the Secrets checks name with secrets. It
// never blocks on a measurement, and the RoutingService is woken when one finishes.
func (p *pendingMeasurements) start(m *measure.Taker, secrets measure.Secrets, rsvc *routingv1alpha1.RoutingService, reqs []rollout.MeasurementRequest) {
	name := types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	kept := p.kept[name]
	if kept == nil {
		kept = map[rollout.MeasurementKey]*keptMeasurement{}
		p.kept[name] = kept
	}
	inFlight := 0
	for _, k := range kept {
		if !k.done {
			inFlight++
		}
	}
	for _, req := range reqs {
		if _, ok := kept[req.MeasurementKey]; ok || inFlight >= MaxMeasurementsInFlightPerRoutingService {
			continue
		}
		inFlight++
		k := &keptMeasurement{interval: req.Check.Interval()}
		kept[req.MeasurementKey] = k
		go p.run(m, secrets, rsvc, req, k)
	}
}

// run takes one measurement within its check's timeout, keeps it, and wakes the RoutingService.
func (p *pendingMeasurements) run(m *measure.Taker, secrets measure.Secrets, rsvc *routingv1alpha1.RoutingService, req rollout.MeasurementRequest, k *keptMeasurement) {
	p.slots <- struct{}{}
	taken := m.Take(context.Background(), req, secrets)
	<-p.slots
	p.mu.Lock()
	k.done, k.taken, k.expires = true, taken, taken.Result.Time.Add(req.Check.Interval()+undeliveredGrace)
	p.mu.Unlock()
	wake := &routingv1alpha1.RoutingService{}
	wake.Namespace, wake.Name = rsvc.Namespace, rsvc.Name
	select {
	case p.events <- event.GenericEvent{Object: wake}:
	default:
		// The channel is full: a reconcile of every waiting RoutingService is already queued,
		// and this one's requeue (at most the check's interval) picks the measurement up.
	}
}

// recordedCount is how many measurements rsvc's status shows for key's check.
func recordedCount(rsvc *routingv1alpha1.RoutingService, key rollout.MeasurementKey) int32 {
	return countIn(&rsvc.Status, key)
}

// recordedBy are the measurements of taken that the plan whose status is st recorded: their
// check's count in st is above the one stored before (a measurement observed but not due in this
// plan, or kept for a stale read, is not counted again in the metrics).
func recordedBy(stored, st *routingv1alpha1.RoutingServiceStatus, taken []rollout.TakenMeasurement) []rollout.TakenMeasurement {
	var out []rollout.TakenMeasurement
	for _, m := range taken {
		if countIn(st, m.MeasurementKey) > countIn(stored, m.MeasurementKey) {
			out = append(out, m)
		}
	}
	return out
}

// countIn is how many measurements st shows for key's check.
func countIn(st *routingv1alpha1.RoutingServiceStatus, key rollout.MeasurementKey) int32 {
	for _, ss := range st.Shards {
		if ss.Name != key.Shard {
			continue
		}
		for _, c := range ss.Checks {
			if c.Name == key.Check && c.When == key.When && c.Revision == key.Revision {
				return c.Count
			}
		}
	}
	return 0
}

// forget drops what is kept for a deleted RoutingService; a measurement still in flight finishes
// into the dropped map and wakes nobody who cares. The expired entries of the others are dropped
// the next time finished reads them.
func (p *pendingMeasurements) forget(name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.kept, name)
}
