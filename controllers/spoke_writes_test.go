package controllers

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A region that failed a write is left alone for regionBackoffMin, then twice as long after each
// failure in a row, up to regionBackoffMax; a later success after the backoff forgets it.
func TestRegionBackoff(t *testing.T) {
	var b regionBackoff
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	down := map[string]error{"eu-west": errors.New("500")}
	wants := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 2 * time.Minute, 2 * time.Minute}
	for i, want := range wants {
		b.failed(key, down, now)
		active, ends := b.active(key, now.Add(time.Millisecond))
		if _, ok := active["eu-west"]; !ok || !ends.Equal(now.Add(want)) {
			t.Fatalf("failure %d: active %v until %v, want eu-west until +%s", i+1, active, ends, want)
		}
		if active, _ := b.active(key, now.Add(want)); len(active) != 0 {
			t.Fatalf("failure %d: still backing off at its end: %v", i+1, active)
		}
		now = now.Add(want)
	}
	b.succeeded(key, nil, now.Add(time.Minute))
	b.failed(key, down, now.Add(time.Minute))
	if _, ends := b.active(key, now.Add(time.Minute)); !ends.Equal(now.Add(time.Minute + regionBackoffMin)) {
		t.Fatalf("after a success the backoff starts again at %s: ends %v", regionBackoffMin, ends)
	}
}
