package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// FuzzFailureRecord: whatever a schemagate.io/failure annotation holds (it is untrusted: anyone
// who may edit a ReplicaSet may write it), decoding never panics, and a record it accepts is one
// a status write can carry: a revision and a shard of at most 63 bytes, a reason the API's
// condition pattern accepts, a bounded message. Such a record, written again, reads back the same.
func FuzzFailureRecord(f *testing.F) {
	at := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	good := encodeFailure(&routingv1alpha1.RolloutFailure{Revision: "7z26fxwx9f", Reason: routingv1alpha1.ReasonAborted, Shard: "eu-west",
		Message: "aborted", Time: metav1.Time{Time: at}}, 3, "r1")
	f.Add(good)
	f.Add(strings.Replace(good, `"Aborted"`, `"Not a reason"`, 1))
	f.Add(`{"revision":"r","reason":"A","time":"2026-12-07T08:00:00Z","generation":-1,"message":"` + strings.Repeat("m", 3000) + `"}`)
	f.Add(`{"revision":"` + strings.Repeat("r", 64) + `","reason":"A"}`)
	f.Add(`{"revision":"r","reason":"A","message":"` + strings.Repeat("m", 1023) + `é"}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, v string) {
		got, rec := decodeFailure(v)
		if got == nil {
			if rec != nil {
				t.Fatalf("a record without a failure: %+v", rec)
			}
			return
		}
		if got.Revision == "" || len(got.Revision) > 63 || len(got.Shard) > 63 || len(got.Reason) > 128 ||
			!conditionReason.MatchString(got.Reason) || len(got.Message) > maxFailureMessage {
			t.Fatalf("decodeFailure(%q) accepted %+v", v, got)
		}
		again, rec2 := decodeFailure(encodeFailure(got, rec.Generation, ""))
		if again == nil || again.Revision != got.Revision || again.Reason != got.Reason || again.Shard != got.Shard ||
			again.Message != got.Message || rec2.Generation != rec.Generation {
			t.Fatalf("a record written again reads back as %+v, was %+v", again, got)
		}
	})
}
