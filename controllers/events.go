package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// maxEventNote is the API server's limit on an Event's note (events.k8s.io/v1), in bytes: a
// longer one is refused and the Event is lost.
const maxEventNote = 1024

// eventElision marks where eventNote cut a note.
const eventElision = " […] "

// eventNote makes an Event's note fit the API's limit: valid UTF-8 (invalid bytes become
// U+FFFD) and at most maxEventNote bytes. A longer note keeps its first three quarters and its
// end, cut on rune boundaries: a message that quotes a 4 KiB termination message keeps what failed
// and the last words of the error.
func eventNote(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxEventNote {
		return s
	}
	room := maxEventNote - len(eventElision)
	head, tail := room*3/4, room-room*3/4
	h := s[:head]
	for len(h) > 0 && !utf8.RuneStart(s[len(h)]) {
		h = h[:len(h)-1]
	}
	t := s[len(s)-tail:]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return h + eventElision + t
}

// eventAction is the action of an Event the planner reports: "Reconcile" and a hash of its
// reason and note. client-go's recorder folds Events with the same regarding object (the
// RoutingService at one resourceVersion), type, reason and action into one series, for six
// minutes, keeping only the first note: with one action for all, the second of two checks that
// passed in one reconcile (or of two shards rolled back at once) was never recorded. One action
// per fact gives one Event per fact; the same fact repeated still becomes a series.
func eventAction(reason, note string) string {
	sum := sha256.Sum256([]byte(reason + "\x00" + note))
	return "Reconcile-" + hex.EncodeToString(sum[:5])
}

// recordFact records an Event of the reconciler's own (not the planner's) with an action per note
// (eventAction), so that two facts of one reason in one reconcile (two budgets held by others,
// two shards' ReplicaSets deleted) are two Events, not one series that shows only the first. A nil
// recorder records nothing.
func (r *RoutingServiceReconciler) recordFact(rsvc *routingv1alpha1.RoutingService, eventType, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	note := eventNote(fmt.Sprintf(format, args...))
	r.Recorder.Eventf(rsvc, nil, eventType, reason, eventAction(reason, note), "%s", note)
}
