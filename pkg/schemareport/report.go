// Package schemareport defines the schema report: a small, versioned JSON document that a
// migration or check container writes to its termination message, saying which schema version
// the database is at and whether it is dirty (docs/schema-report.md). schemagate reads it from
// the pods of the Jobs it owns; it is untrusted input, so Parse never panics and reports every
// defect as an error with a condition reason (issue 10).
package schemareport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Format is the value of the "schemagate" member that names this format and its version.
const Format = "schema-report/v1"

// MaxBytes is the largest report accepted: the kubelet keeps at most 4096 bytes of a container's
// termination message, so a longer report would arrive cut.
const MaxBytes = 4096

// Report is what a migration or check container says about the database.
type Report struct {
	// Format is always Format ("schema-report/v1").
	Format string `json:"schemagate"`
	// Version is the schema version the database is at, dotted numeric ("2", "2026.10.1");
	// "0" for a database no migration has touched.
	Version string `json:"version"`
	// Dirty is true when a migration failed half-way (golang-migrate's dirty flag, a failed
	// Flyway row): only a person may clear it.
	Dirty bool `json:"dirty"`
	// Tool names what recorded the version: golang-migrate, goose, flyway, atlas, liquibase, …
	// (at most 63 characters).
	Tool string `json:"tool,omitempty"`
	// Time is when the report was written (RFC 3339).
	Time time.Time `json:"time"`
	// Error is the tail of the migration tool's own error output when it failed (at most
	// MaxErrorBytes, valid UTF-8), so that the cause reaches the condition and not only the
	// pod's log. Optional; readers of schema-report/v1 without it ignore nothing else.
	Error string `json:"error,omitempty"`
}

// MaxErrorBytes bounds Report.Error.
const MaxErrorBytes = 1024

// ReasonInvalid is the condition reason for a report that cannot be read.
const ReasonInvalid = "InvalidSchemaReport"

// Error says why a report cannot be used; its message is safe to put in a condition.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Reason is the condition reason schemagate reports for it.
func (e *Error) Reason() string { return ReasonInvalid }

func invalid(format string, args ...any) error { return &Error{msg: fmt.Sprintf(format, args...)} }

// Parse reads a termination message as a report. Errors (all *Error): empty, larger than
// MaxBytes, not a single JSON object of known members, another format, a version that is not a
// dotted numeric version, a tool name over 63 characters, no time.
func Parse(message []byte) (Report, error) {
	message = bytes.TrimSpace(message)
	switch {
	case len(message) == 0:
		return Report{}, invalid("the termination message is empty: no schema report")
	case len(message) > MaxBytes:
		return Report{}, invalid("the schema report is %d bytes, more than the %d the kubelet keeps", len(message), MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(message))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return Report{}, invalid("the schema report is not a JSON object of known members: %s", trim(err.Error()))
	}
	if dec.More() {
		return Report{}, invalid("the schema report has data after its JSON object")
	}
	switch {
	case r.Format != Format:
		return Report{}, invalid("the schema report's format is %q; this schemagate reads %q", trim(r.Format), Format)
	case !schemaversion.Valid(r.Version):
		return Report{}, invalid("the schema report's version %q is not a dotted numeric version", trim(r.Version))
	case len(r.Tool) > 63:
		return Report{}, invalid("the schema report's tool name is longer than 63 characters")
	case r.Time.IsZero():
		return Report{}, invalid("the schema report has no time")
	case len(r.Error) > MaxErrorBytes:
		return Report{}, invalid("the schema report's error is longer than %d bytes", MaxErrorBytes)
	}
	r.Error = ErrorTail(r.Error)
	return r, nil
}

// Encode writes r as one line of JSON, with Format filled in.
func Encode(r Report) ([]byte, error) {
	r.Format = Format
	r.Error = ErrorTail(r.Error)
	if !schemaversion.Valid(r.Version) {
		return nil, fmt.Errorf("schema version %q is not a dotted numeric version", r.Version)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC().Truncate(time.Second)
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("the report is %d bytes, more than %d", len(b), MaxBytes)
	}
	return b, nil
}

// trim shortens untrusted text quoted in a message.
func trim(s string) string {
	const limit = 80
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}

// ErrorTail bounds a tool's error output for Report.Error: valid UTF-8, surrounding space
// trimmed, and its last MaxErrorBytes bytes (the end says what went wrong) after "…".
func ErrorTail(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= MaxErrorBytes {
		return s
	}
	cut := len(s) - (MaxErrorBytes - len("…"))
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}
