package rollout

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/controls"
)

// A failure is a verdict that decides actions: a failed check, pod-health gate or progress
// deadline, or an abort, starts a rollback (or a halt) of the update revision. status.failure alone
// does not keep it: a status write lost after the rollback began (a conflict, then a restart, or a
// new leader) leaves the rollback half done, and the next reconcile, seeing a shard that is merely
// not complete and checks that now pass, would promote the revision that failed (S-44). So the
// failure is also recorded on every ReplicaSet the RoutingService controls, in the same write as
// the handled controls (recordControls), and read back from there when status has none.
//
// The record names the revision that failed: it counts only while that revision is the update
// revision, and it is cleared (set to "") by the reconcile that clears the failure (a retry, or a
// new spec), so a spec that returns to that revision later starts it afresh, as status does.
const annotationFailure = "schemagate.io/failure"

// maxFailureRecord bounds, in bytes, the record read from an annotation (untrusted input), and
// maxFailureMessage the message kept in it.
const (
	maxFailureRecord  = 2048
	maxFailureMessage = 1024
)

// failureRecord is the JSON of annotationFailure. Generation and Retry say which decision it
// belongs to: the RoutingService's generation and the retry value handled when it failed (as
// controls.Record writes it). A later generation (a new spec, a revert to this revision) or a
// retry handled since (status.lastHandledRetry, or the ReplicaSets' records of it) makes the
// record stale: a write that would have cleared it may not have landed (its cluster did not
// answer, or the apply stopped at a conflict), and a stale record must never bring a failure back.
type failureRecord struct {
	Revision   string    `json:"revision"`
	Reason     string    `json:"reason"`
	Shard      string    `json:"shard,omitempty"`
	Message    string    `json:"message,omitempty"`
	Time       time.Time `json:"time"`
	Generation int64     `json:"generation"`
	Retry      string    `json:"retry,omitempty"`
}

// conditionReason is the API's pattern for a condition's reason: a failure's reason becomes the
// reason of Stalled and Ready, and a record that does not match it would make every status
// write fail.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// encodeFailure is the record of f, decided at generation with retry handled last.
func encodeFailure(f *routingv1alpha1.RolloutFailure, generation int64, retry string) string {
	msg := cutMessage(f.Message)
	if retry != "" {
		retry = controls.Record(retry)
	}
	b, err := json.Marshal(failureRecord{Revision: f.Revision, Reason: f.Reason, Shard: f.Shard, Message: msg,
		Time: f.Time.UTC().Truncate(time.Second), Generation: generation, Retry: retry})
	if err != nil {
		// Marshalling strings and a time cannot fail; a panic here is a programming error.
		panic(err)
	}
	return string(b)
}

// cutMessage bounds a failure's message to maxFailureMessage bytes, never inside a character.
func cutMessage(m string) string {
	if len(m) <= maxFailureMessage {
		return m
	}
	return strings.ToValidUTF8(m[:maxFailureMessage], "")
}

// recordable reports whether f's record reads back (decodeFailure) as f's revision and reason.
func recordable(f *routingv1alpha1.RolloutFailure) bool {
	g, _ := decodeFailure(encodeFailure(f, 0, ""))
	return g != nil && g.Revision == f.Revision && g.Reason == f.Reason && g.Shard == f.Shard
}

// decodeFailure reads a record: nil when it is empty, too long, not JSON, lacks a revision, or
// its reason is not a condition reason of at most 128 characters.
func decodeFailure(v string) (*routingv1alpha1.RolloutFailure, *failureRecord) {
	if v == "" || len(v) > maxFailureRecord {
		return nil, nil
	}
	var r failureRecord
	if err := json.Unmarshal([]byte(v), &r); err != nil || r.Revision == "" || len(r.Revision) > 63 ||
		len(r.Reason) > 128 || !conditionReason.MatchString(r.Reason) || len(r.Shard) > 63 {
		return nil, nil
	}
	r.Message = cutMessage(r.Message)
	return &routingv1alpha1.RolloutFailure{Revision: r.Revision, Reason: r.Reason, Shard: r.Shard, Message: r.Message, Time: metav1.Time{Time: r.Time}}, &r
}

// recoverFailure restores status.failure from the ReplicaSets' records when status has none for
// the update revision: the first valid record of the update revision wins (records are written
// alike on every ReplicaSet). A time in the future is taken as now. Called before the controls
// are read, so an abort or a retry acts on the failure as it was decided.
func (p *planner) recoverFailure() {
	if p.failed() {
		return
	}
	retry := ""
	if p.status.LastHandledRetry != "" {
		retry = controls.Record(p.status.LastHandledRetry)
	}
	for _, rs := range p.recordedReplicaSets() {
		f, r := decodeFailure(rs.Annotations[annotationFailure])
		if f == nil || f.Revision != p.update || r.Generation != p.rsvc.Generation || r.Retry != retry {
			continue // stale: another spec, or a retry handled since (failureRecord)
		}
		if hist := p.handledRecords[annotationHandledRetry]; len(hist) > 0 && hist[len(hist)-1] != r.Retry {
			continue // the ReplicaSets record a retry handled since
		}
		if f.Time.After(p.now) {
			f.Time = metav1.Time{Time: p.now}
		}
		p.status.Failure = f
		return
	}
}

// failureWant is the record every ReplicaSet should carry after this plan: the failure of the
// update revision, or "" to clear a record some ReplicaSet still carries; ok is false when there
// is nothing to write.
func (p *planner) failureWant() (string, bool) {
	if p.failed() {
		return encodeFailure(p.status.Failure, p.rsvc.Generation, p.status.LastHandledRetry), true
	}
	for _, rs := range p.recordedReplicaSets() {
		if rs.Annotations[annotationFailure] != "" {
			return "", true
		}
	}
	return "", false
}
