package schemadiff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Format names the probe report's format and version.
const Format = "probe-report/v1"

// MaxBytes bounds an encoded report: what a probe container may leave as its termination message
// (the kubelet keeps at most 4096 bytes of it).
const MaxBytes = 4096

// maxField bounds each string of a change; maxChanges the changes kept.
const (
	maxField   = 256
	maxChanges = 64
)

// Report is what a probe says of one migration: its verdict (the worst class of its changes;
// Expand when nothing changed), the changes, worst first, and how many were left out to keep it
// within MaxBytes.
type Report struct {
	Format  string   `json:"schemagate"`
	Verdict Class    `json:"verdict"`
	Changes []Change `json:"changes,omitempty"`
	// Omitted is how many changes were left out (the least severe ones).
	Omitted int `json:"omitted,omitempty"`
}

// NewReport makes the report of changes (sorted as Diff sorts them).
func NewReport(changes []Change) *Report {
	r := &Report{Format: Format, Verdict: Expand, Changes: changes}
	for _, c := range changes {
		if c.Class.Worse(r.Verdict) {
			r.Verdict = c.Class
		}
	}
	return r
}

// Run captures the catalog q reads, runs migrate, captures it again and reports the differences.
// A migrate that fails gives a Failed report with the tail of its error; err is only a capture's
// (the database could not be read).
func Run(ctx context.Context, q Querier, migrate func(context.Context) error) (*Report, error) {
	before, err := Capture(ctx, q)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx); err != nil {
		return NewReport([]Change{{Class: Failed, Kind: MigrationFailed, Why: tail(oneLine(err.Error()), maxField)}}), nil
	}
	after, err := Capture(ctx, q)
	if err != nil {
		return nil, err
	}
	return NewReport(Diff(before, after)), nil
}

// Encode returns the report as JSON of at most MaxBytes: every string cut to 256 bytes, and the
// least severe changes left out (counted in Omitted) until it fits.
func (r *Report) Encode() ([]byte, error) { return r.EncodeWithin(MaxBytes) }

// EncodeWithin is Encode bounded to limit bytes (at most MaxBytes), for a container whose
// termination message the kubelet cuts shorter (it shares 12 KiB among a pod's containers). The
// verdict is always kept: at worst every change is left out and counted in Omitted.
func (r *Report) EncodeWithin(limit int) ([]byte, error) {
	limit = min(limit, MaxBytes)
	out := *r
	out.Format = Format
	out.Changes = make([]Change, 0, len(r.Changes))
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, bounded(c))
	}
	if len(out.Changes) > maxChanges {
		out.Omitted += len(out.Changes) - maxChanges
		out.Changes = out.Changes[:maxChanges]
	}
	for {
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		if len(b) <= limit {
			return b, nil
		}
		if len(out.Changes) == 0 {
			return nil, fmt.Errorf("a report with no changes is %d bytes", len(b))
		}
		out.Changes = out.Changes[:len(out.Changes)-1]
		out.Omitted++
	}
}

// Parse reads a report. It is untrusted input: more than MaxBytes, another format, an unknown
// class or kind, or a verdict better than one of its changes is an error; strings are cut to 256
// bytes of valid UTF-8, and at most 64 changes are kept.
func Parse(b []byte) (*Report, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("probe report is %d bytes, over %d", len(b), MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("probe report is not JSON: %s", tail(err.Error(), maxField))
	}
	if r.Format != Format {
		return nil, fmt.Errorf("probe report format %q, want %q", head(r.Format, 64), Format)
	}
	if r.Verdict.rank() == 0 {
		return nil, fmt.Errorf("probe report verdict %q is not expand, conditional, breaking or failed", head(string(r.Verdict), 64))
	}
	if r.Omitted < 0 {
		return nil, fmt.Errorf("probe report omits %d changes", r.Omitted)
	}
	if len(r.Changes) > maxChanges {
		r.Omitted += len(r.Changes) - maxChanges
		r.Changes = r.Changes[:maxChanges]
	}
	for i, c := range r.Changes {
		if c.Class.rank() == 0 || c.Kind == "" {
			return nil, fmt.Errorf("probe report change %d has class %q, kind %q", i, head(string(c.Class), 64), head(string(c.Kind), 64))
		}
		if c.Class.Worse(r.Verdict) {
			return nil, fmt.Errorf("probe report verdict %s is better than its change %d (%s)", r.Verdict, i, c.Class)
		}
		r.Changes[i] = bounded(c)
	}
	return &r, nil
}

// Has reports whether r (nil: no) has a change of kind k.
func (r *Report) Has(k Kind) bool {
	if r == nil {
		return false
	}
	for _, c := range r.Changes {
		if c.Kind == k {
			return true
		}
	}
	return false
}

// Lines renders the report for a person, one change a line, the verdict first.
func (r *Report) Lines() []string {
	out := []string{"verdict: " + string(r.Verdict)}
	for _, c := range r.Changes {
		out = append(out, c.String())
	}
	if r.Omitted > 0 {
		out = append(out, fmt.Sprintf("(%d more changes left out)", r.Omitted))
	}
	return out
}

func bounded(c Change) Change {
	c.Table, c.Column = head(c.Table, maxField), head(c.Column, maxField)
	c.From, c.To, c.Why = head(c.From, maxField), head(c.To, maxField), head(c.Why, maxField)
	c.Kind, c.Class = Kind(head(string(c.Kind), 64)), Class(head(string(c.Class), 64))
	return c
}

// head keeps at most n bytes of s, valid UTF-8 (its beginning).
func head(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// tail keeps at most n bytes of s, valid UTF-8 (the end, where an error says why).
func tail(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, ' '); i >= 3 && i < n/4 {
		return "…" + s[i:] // from a word's start
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
