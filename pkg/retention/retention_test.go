package retention

import (
	"slices"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	later := now.Add(30 * time.Second)
	k, d, r := Item{Keep: true}, Item{}, Item{Ripe: later}
	for _, c := range []struct {
		name    string
		items   []Item
		limit   int
		delete  []int
		recheck time.Time
	}{
		{"under the limit", []Item{d, d}, 3, nil, time.Time{}},
		{"at the limit", []Item{d, d, d}, 3, nil, time.Time{}},
		{"the oldest go", []Item{d, d, d, d, d}, 3, []int{0, 1}, time.Time{}},
		{"a kept one counts and stays", []Item{k, d, d, d}, 2, []int{1, 2}, time.Time{}},
		{"only kept ones: none go", []Item{k, k, k}, 1, nil, time.Time{}},
		{"one not ripe stays, and says when", []Item{r, d, d}, 1, []int{1, 2}, later},
		{"not ripe past the excess: not looked at", []Item{d, r, d}, 2, []int{0}, time.Time{}},
		{"a limit of 0", []Item{d, k, d}, 0, []int{0, 2}, time.Time{}},
		{"a negative limit is 0", []Item{d}, -5, []int{0}, time.Time{}},
		{"ripe now", []Item{{Ripe: now}}, 0, []int{0}, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Prune(c.items, c.limit, now)
			if !slices.Equal(v.Delete, c.delete) || !v.Recheck.Equal(c.recheck) {
				t.Fatalf("Prune = %+v, want delete %v, recheck %v", v, c.delete, c.recheck)
			}
		})
	}
}
