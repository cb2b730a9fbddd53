package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// eventMemo remembers, per RoutingService, a set of facts (name → what is true of it), so that a
// fact that stays true across reconciles is reported by one Event, not one per reconcile. It
// lives as long as the manager: a restarted manager reports each standing fact once more.
type eventMemo struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]map[string]string
}

// fresh returns the names of current whose value was not the one remembered for key, and then
// remembers current (the names no longer in it are forgotten, so they are reported again if
// they come back).
func (m *eventMemo) fresh(key types.NamespacedName, current map[string]string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[types.NamespacedName]map[string]string{}
	}
	old := m.seen[key]
	var out []string
	for name, v := range current {
		if w, ok := old[name]; !ok || w != v {
			out = append(out, name)
		}
	}
	if len(current) == 0 {
		delete(m.seen, key)
	} else {
		m.seen[key] = current
	}
	return out
}

// forget drops key (its RoutingService is gone).
func (m *eventMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, key)
}
