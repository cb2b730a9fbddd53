package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// pendingMeasurements keeps each measurement taken for a RoutingService for its check's interval.
// A reconcile that reads a stale RoutingService from the cache (our previous status write not yet
// in it) asks again for the measurement that write recorded; it gets the kept one, and its status
// write conflicts as any write on a stale object does. Without this, a count of 2 sent 3 requests.
// A status write that conflicts loses nothing either: the retry reuses the measurement.
type pendingMeasurements struct {
	mu   sync.Mutex
	kept map[types.NamespacedName]map[rollout.MeasurementKey]keptMeasurement
}

type keptMeasurement struct {
	taken   rollout.TakenMeasurement
	expires time.Time
}

// take returns a measurement for each request: one kept from an unrecorded earlier reconcile
// when it has not expired, else a new one from m.
func (p *pendingMeasurements) take(ctx context.Context, m *measure.Taker, name types.NamespacedName, reqs []rollout.MeasurementRequest, now time.Time) []rollout.TakenMeasurement {
	out := make([]rollout.TakenMeasurement, len(reqs))
	var fresh []rollout.MeasurementRequest
	var at []int
	p.mu.Lock()
	for key, k := range p.kept[name] {
		if !now.Before(k.expires) {
			delete(p.kept[name], key)
		}
	}
	for i, req := range reqs {
		if k, ok := p.kept[name][req.MeasurementKey]; ok && now.Before(k.expires) {
			out[i] = k.taken
			continue
		}
		fresh, at = append(fresh, req), append(at, i)
	}
	p.mu.Unlock()
	taken := m.TakeAll(ctx, fresh)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept == nil {
		p.kept = map[types.NamespacedName]map[rollout.MeasurementKey]keptMeasurement{}
	}
	if p.kept[name] == nil {
		p.kept[name] = map[rollout.MeasurementKey]keptMeasurement{}
	}
	for j, i := range at {
		out[i] = taken[j]
		p.kept[name][fresh[j].MeasurementKey] = keptMeasurement{taken: taken[j], expires: now.Add(fresh[j].Check.Interval())}
	}
	return out
}

// forget drops what is kept for a deleted RoutingService; the expired entries of the others are dropped
// on their next measurement.
func (p *pendingMeasurements) forget(name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.kept, name)
}
