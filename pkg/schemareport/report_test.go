package schemareport

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	good := `{"schemagate":"schema-report/v1","version":"2","dirty":false,"tool":"golang-migrate","time":"2026-11-30T12:00:00Z"}`
	r, err := Parse([]byte(good + "\n"))
	if err != nil || r.Version != "2" || r.Dirty || r.Tool != "golang-migrate" || !r.Time.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("Parse(good) = %+v, %v", r, err)
	}
	for name, msg := range map[string]string{
		"empty":          "",
		"oversize":       `{"schemagate":"schema-report/v1","version":"2","time":"2026-11-30T12:00:00Z","tool":"` + strings.Repeat("x", 5000) + `"}`,
		"not JSON":       "migrated from 1 to 2",
		"unknown member": `{"schemagate":"schema-report/v1","version":"2","time":"2026-11-30T12:00:00Z","extra":1}`,
		"two objects":    good + good,
		"other format":   `{"schemagate":"schema-report/v2","version":"2","time":"2026-11-30T12:00:00Z"}`,
		"no format":      `{"version":"2","time":"2026-11-30T12:00:00Z"}`,
		"bad version":    `{"schemagate":"schema-report/v1","version":"v2","time":"2026-11-30T12:00:00Z"}`,
		"number version": `{"schemagate":"schema-report/v1","version":2,"time":"2026-11-30T12:00:00Z"}`,
		"no time":        `{"schemagate":"schema-report/v1","version":"2"}`,
		"long tool":      `{"schemagate":"schema-report/v1","version":"2","time":"2026-11-30T12:00:00Z","tool":"` + strings.Repeat("t", 64) + `"}`,
	} {
		_, err := Parse([]byte(msg))
		var e *Error
		if !errors.As(err, &e) || e.Reason() != ReasonInvalid {
			t.Errorf("%s: Parse = %v, want an *Error with reason %s", name, err, ReasonInvalid)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: the message is %d bytes; it goes into a condition", name, len(err.Error()))
		}
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	b, err := Encode(Report{Version: "2026.10.1", Dirty: true, Tool: "goose", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(b)
	if err != nil || r.Version != "2026.10.1" || !r.Dirty || r.Tool != "goose" || r.Time.Location() != time.UTC {
		t.Fatalf("round trip: %s → %+v, %v", b, r, err)
	}
	if _, err := Encode(Report{Version: "two"}); err == nil {
		t.Fatal("Encode accepted a version that is not a version")
	}
}

// FuzzParse: any message either parses to a report with a valid version and the known format, or
// fails with an *Error; never a panic; a parsed report encodes and parses back to itself.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schemagate":"schema-report/v1","version":"2","dirty":false,"tool":"golang-migrate","time":"2026-11-30T12:00:00Z"}`))
	f.Add([]byte(`{"schemagate":"schema-report/v1","version":"2.0","dirty":true,"time":"2026-11-30T12:00:00+01:00"}`))
	f.Add([]byte(`{"schemagate":"schema-report/v1","version":"","time":"x"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"schemagate":"schema-report/v1","version":"1","dirty":false,"time":"2026-11-30T12:00:00Z","error":"ERROR: relation \"users\" already exists \udcff"}`))
	f.Add([]byte(`{"schemagate":"schema-report/v1","version":"2","time":"2026-11-30T12:00:00Z"} {}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := Parse(msg)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) returned %T", msg, err)
			}
			return
		}
		if r.Format != Format || r.Version == "" || r.Time.IsZero() || len(r.Error) > MaxErrorBytes || !utf8.ValidString(r.Error) {
			t.Fatalf("Parse(%q) accepted %+v", msg, r)
		}
		b, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", r, err)
		}
		back, err := Parse(b)
		if err != nil || back.Version != r.Version || back.Dirty != r.Dirty || back.Tool != r.Tool || back.Error != ErrorTail(r.Error) || !back.Time.Equal(r.Time.Truncate(time.Second)) {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

// The tool's error tail travels in the report, bounded and valid UTF-8; a longer one written by
// hand is refused.
func TestReportErrorTail(t *testing.T) {
	long := strings.Repeat("x", 3000) + "ERROR: relation \"users\" already exists\xff"
	b, err := Encode(Report{Version: "1", Tool: "goose", Time: time.Now(), Error: long})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Error) > MaxErrorBytes || !utf8.ValidString(r.Error) || !strings.HasSuffix(r.Error, "already exists\uFFFD") || !strings.HasPrefix(r.Error, "…") {
		t.Fatalf("error %d bytes: %q", len(r.Error), r.Error)
	}
	hand := `{"schemagate":"schema-report/v1","version":"1","dirty":false,"time":"2026-01-01T00:00:00Z","error":"` + strings.Repeat("y", MaxErrorBytes+1) + `"}`
	if _, err := Parse([]byte(hand)); err == nil {
		t.Fatal("an error over MaxErrorBytes must be refused")
	}
}
