package controllers

import (
	"context"
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
// timeoutSeconds). take starts a requested measurement in the background and returns the ones
// that have finished; when one finishes, the RoutingService is reconciled again (Events), and
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
	// done is false while the measurement is in flight; delivered, once take returned it.
	done, delivered bool
	taken           rollout.TakenMeasurement
	expires         time.Time
	// recorded is the count status showed for the check when take first returned it: a higher
	// count means a status write that held it succeeded (every reconcile returns every delivered,
	// unrecorded measurement, so the write that raised the count held this one too).
	recorded int32
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

// take returns the finished, unrecorded measurements among reqs, and starts the others with m,
// which reads the Secrets checks name with secrets; it never blocks on a measurement. now is the
// planner's clock; a kept measurement expires an interval after it finished.
func (p *pendingMeasurements) take(m *measure.Taker, secrets measure.Secrets, rsvc *routingv1alpha1.RoutingService, reqs []rollout.MeasurementRequest, now time.Time) []rollout.TakenMeasurement {
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
	for key, k := range kept {
		switch {
		case !k.done:
			inFlight++
		case !now.Before(k.expires) || (k.delivered && k.recorded != recordedCount(rsvc, key)):
			delete(kept, key)
		}
	}
	var out []rollout.TakenMeasurement
	for _, req := range reqs {
		if k, ok := kept[req.MeasurementKey]; ok {
			if k.done {
				if !k.delivered {
					k.delivered, k.recorded, k.expires = true, recordedCount(rsvc, req.MeasurementKey), now.Add(req.Check.Interval())
				}
				out = append(out, k.taken)
			}
			continue
		}
		if inFlight >= MaxMeasurementsInFlightPerRoutingService {
			continue // requested again by a later reconcile, once one in flight has finished
		}
		inFlight++
		k := &keptMeasurement{}
		kept[req.MeasurementKey] = k
		go p.run(m, secrets, rsvc, req, k)
	}
	return out
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
	for _, ss := range rsvc.Status.Shards {
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
// on their next take.
func (p *pendingMeasurements) forget(name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.kept, name)
}
