// Package controls decides whether the value of a control annotation (schemagate.io/abort,
// retry, promote, approve-contract) is new, and keeps the record of the values handled.
//
// A control annotation is never cleared, so the value acted on must be known for the life of the
// RoutingService. Status says it (status.lastHandledAbort and the like), but status alone can be
// lost or restored from an older copy; so every ReplicaSet the RoutingService controls also
// carries the values handled last, as a record annotation (schemagate.io/handled-abort, …) of at
// most MaxRecords values, newest last. A value is handled when status says so, or when any of
// those records holds it. The planner (pkg/rollout) reads the records of its ReplicaSets,
// asks Read about each control, and writes Keep back when it changed.
//
// Everything read here is untrusted input: a record annotation is bounded (MaxAnnotation bytes,
// MaxRecords values) and a value of any length or alphabet is recorded as a bounded digest.
package controls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxRecords is how many values per control a record keeps, newest last, so that an older saved
// manifest re-applied (its value handled several controls ago) does not act either.
const MaxRecords = 8

// MaxAnnotation bounds, in bytes, how much of a record annotation is read.
const MaxAnnotation = 1024

// maxPlain is the longest value recorded as it is.
const maxPlain = 63

// digestPrefix starts a value recorded as a digest.
const digestPrefix = "sha256-"

// Record is how value is written in a record: as it is when it has at most 63 characters, all
// letters, digits or . _ : -, and does not start with "sha256-"; otherwise "sha256-" and the first
// 32 hex digits of its SHA-256. A record is at most 71 bytes and never contains a space.
func Record(value string) string {
	plain := len(value) <= maxPlain && !strings.HasPrefix(value, digestPrefix)
	for _, r := range value {
		if !plain {
			break
		}
		plain = r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)
	}
	if plain {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return digestPrefix + hex.EncodeToString(sum[:16])
}

// Parse reads a record annotation: space-separated records, newest last, at most MaxRecords of
// them (the newest) from its first MaxAnnotation bytes. A field Record could not have written (too
// long, another alphabet, a malformed digest) is no record and is left out, so that what Keep
// writes back stays under MaxAnnotation bytes.
func Parse(annotation string) []string {
	if len(annotation) > MaxAnnotation {
		annotation = annotation[:MaxAnnotation]
	}
	var f []string
	for _, r := range strings.Fields(annotation) {
		if isRecord(r) {
			f = append(f, r)
		}
	}
	if len(f) > MaxRecords {
		f = f[len(f)-MaxRecords:]
	}
	return f
}

// isRecord says whether r is a value Record writes: a plain value, or "sha256-" and 32 lower-case
// hex digits.
func isRecord(r string) bool {
	if d, ok := strings.CutPrefix(r, digestPrefix); ok {
		_, err := hex.DecodeString(d)
		return len(d) == 32 && err == nil && strings.ToLower(d) == d
	}
	return Record(r) == r
}

// Merge is the history of several records (one per ReplicaSet, in a fixed order): each value
// once, where it first appears.
func Merge(annotations ...string) []string {
	var hist []string
	for _, a := range annotations {
		for _, r := range Parse(a) {
			hist = appendOnce(hist, r, false)
		}
	}
	return hist
}

// appendOnce adds r to hist once: an r already there stays where it is, unless last, which moves
// it to the end (it is the newest).
func appendOnce(hist []string, r string, last bool) []string {
	for i, h := range hist {
		if h == r {
			if !last {
				return hist
			}
			hist = append(hist[:i:i], hist[i+1:]...)
			break
		}
	}
	return append(hist, r)
}

// Keep is the record annotation every ReplicaSet should carry: hist with handled (when set)
// as its newest value, at most MaxRecords values; "" when there is nothing to record.
func Keep(hist []string, handled string) string {
	if handled != "" {
		hist = appendOnce(append([]string(nil), hist...), Record(handled), true)
	}
	if len(hist) > MaxRecords {
		hist = hist[len(hist)-MaxRecords:]
	}
	return strings.Join(hist, " ")
}

// State is what a control annotation's value is to the controller.
type State int

const (
	// Unset: the annotation has no value.
	Unset State = iota
	// Handled: status says this value was handled.
	Handled
	// Recorded: status does not say so (it was lost, or restored from an older copy), but the
	// ReplicaSets record the value as handled: it never acts again.
	Recorded
	// New: a value never handled; the controller acts on it (or waits to, for a retry or a
	// promote while paused).
	New
)

// String is the state's name.
func (s State) String() string {
	switch s {
	case Unset:
		return "Unset"
	case Handled:
		return "Handled"
	case Recorded:
		return "Recorded"
	case New:
		return "New"
	}
	return "State(?)"
}

// Read says whether value, the annotation's value now, is new: handled is the value status says
// was handled last, hist the history the ReplicaSets record (Merge).
func Read(value, handled string, hist []string) State {
	switch {
	case value == "":
		return Unset
	case value == handled:
		return Handled
	}
	r := Record(value)
	for _, h := range hist {
		if h == r {
			return Recorded
		}
	}
	return New
}
