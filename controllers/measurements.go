package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// pendingMeasurements keeps each measurement taken for a RoutingService, with the count of
// measurements its status showed for that check then, for at most the check's interval. A
// reconcile that reads a stale RoutingService from the cache (our previous status write not yet
// in it) asks again for the measurement that write recorded: its status still shows the same
// count, so it gets the kept measurement, and its status write conflicts as any write on a stale
// object does. A status write that conflicts loses nothing either: the retry reuses it. Once the
// status shows a higher count the measurement is recorded and never reused (status times have
// one-second precision, so the time alone cannot tell). Without this, a count of 2 sent 3
// requests; reusing by time alone counted one request twice.
type pendingMeasurements struct {
	mu   sync.Mutex
	kept map[types.NamespacedName]map[rollout.MeasurementKey]keptMeasurement
}

type keptMeasurement struct {
	taken   rollout.TakenMeasurement
	expires time.Time
	// recorded is the count status showed for the check when it was taken.
	recorded int32
}

// take returns a measurement for each request: one kept from an unrecorded earlier reconcile
// when it has not expired, else a new one from m.
func (p *pendingMeasurements) take(ctx context.Context, m *measure.Taker, rsvc *routingv1alpha1.RoutingService, reqs []rollout.MeasurementRequest, now time.Time) []rollout.TakenMeasurement {
	name := types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}
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
		if k, ok := p.kept[name][req.MeasurementKey]; ok && now.Before(k.expires) && k.recorded == recordedCount(rsvc, req.MeasurementKey) {
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
		p.kept[name][fresh[j].MeasurementKey] = keptMeasurement{taken: taken[j], expires: now.Add(fresh[j].Check.Interval()), recorded: recordedCount(rsvc, fresh[j].MeasurementKey)}
	}
	return out
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

// forget drops what is kept for a deleted RoutingService; the expired entries of the others are dropped
// on their next measurement.
func (p *pendingMeasurements) forget(name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.kept, name)
}
