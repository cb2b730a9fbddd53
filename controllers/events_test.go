package controllers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A note over the API's 1024 bytes (a MigrationFailed quoting a 4 KiB termination message) is
// cut to fit, on rune boundaries, keeping its start and its end; invalid UTF-8 is replaced.
func TestEventNoteFitsTheAPI(t *testing.T) {
	long := "migration Job rs-a-schema-1 failed: " + strings.Repeat("é€x", 700) + " ERROR: relation \"routes\" already exists"
	for _, in := range []string{long, long[:1030], long[:1023] + "\xff\xfe", strings.Repeat("€", 400), "short"} {
		got := eventNote(in)
		if len(got) > maxEventNote || !utf8.ValidString(got) {
			t.Fatalf("note of %d bytes → %d bytes, valid UTF-8 %v", len(in), len(got), utf8.ValidString(got))
		}
		if len(in) <= maxEventNote && utf8.ValidString(in) && got != in {
			t.Fatalf("a note that fits was changed")
		}
	}
	got := eventNote(long)
	if !strings.HasPrefix(got, "migration Job rs-a-schema-1 failed: ") || !strings.HasSuffix(got, `relation "routes" already exists`) || !strings.Contains(got, eventElision) {
		t.Fatalf("note %q", got)
	}
}

// Two facts with one reason get two actions (client-go folds Events by action); one fact
// repeated keeps its action.
func TestEventActionPerFact(t *testing.T) {
	a := eventAction("ShardCheckPassed", "check smoke passed in shard us-east")
	b := eventAction("ShardCheckPassed", "check latency passed in shard us-east")
	if a == b || a != eventAction("ShardCheckPassed", "check smoke passed in shard us-east") || len(a) > 128 {
		t.Fatalf("actions %q %q", a, b)
	}
}
