package schemadiff

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTypeChanges(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     Class
	}{
		{"character varying(10)", "text", Expand},
		{"character varying(10)", "character varying(20)", Expand},
		{"character varying(10)", "character varying", Expand},
		{"character varying", "character varying(10)", Breaking},
		{"text", "character varying(255)", Breaking},
		{"smallint", "bigint", Expand},
		{"bigint", "integer", Breaking},
		{"numeric(10,2)", "numeric(12,2)", Expand},
		{"numeric(10,2)", "numeric(10,3)", Breaking},
		{"numeric(10,2)", "numeric", Expand},
		{"integer", "numeric", Conditional},
		{"real", "double precision", Expand},
		{"timestamp without time zone", "timestamp with time zone", Conditional},
		{"json", "jsonb", Conditional},
		{"text", "json", Breaking},
		{"text", "jsonb", Breaking},
		{"text[]", "text", Breaking},
		{"integer", "text", Breaking},
		{"character varying(x)", "text", Breaking},
	} {
		if got, why := typeChange(c.from, c.to); got != c.want || why == "" {
			t.Errorf("%s → %s: %s (%q), want %s", c.from, c.to, got, why, c.want)
		}
	}
}

// A report that does not fit MaxBytes keeps its worst changes and counts the ones left out; it
// reads back as it was encoded.
func TestEncodeBoundsTheReport(t *testing.T) {
	var changes []Change
	changes = append(changes, Change{Class: Breaking, Kind: ColumnType, Table: "routes", Column: "target", From: "text", To: "json"})
	for i := 0; i < 200; i++ {
		changes = append(changes, Change{Class: Expand, Kind: TableAdded, Table: strings.Repeat("t", 300)})
	}
	r := NewReport(changes)
	if r.Verdict != Breaking {
		t.Fatalf("verdict %s", r.Verdict)
	}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxBytes {
		t.Fatalf("%d bytes", len(b))
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Changes[0].Kind != ColumnType || back.Omitted+len(back.Changes) != len(changes) || back.Omitted == 0 {
		t.Fatalf("read back: first %+v, %d kept, %d omitted", back.Changes[0], len(back.Changes), back.Omitted)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":            `{`,
		"another format":      `{"schemagate":"schema-report/v1","verdict":"expand"}`,
		"an unknown verdict":  `{"schemagate":"probe-report/v1","verdict":"fine"}`,
		"a better verdict":    `{"schemagate":"probe-report/v1","verdict":"expand","changes":[{"class":"breaking","kind":"column-dropped"}]}`,
		"an unknown class":    `{"schemagate":"probe-report/v1","verdict":"breaking","changes":[{"class":"bad","kind":"column-dropped"}]}`,
		"a change of no kind": `{"schemagate":"probe-report/v1","verdict":"breaking","changes":[{"class":"breaking"}]}`,
		"negative omitted":    `{"schemagate":"probe-report/v1","verdict":"expand","omitted":-1}`,
		"too long":            `{"schemagate":"probe-report/v1","verdict":"expand","x":"` + strings.Repeat("a", MaxBytes) + `"}`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParse: a report is untrusted; Parse never panics, and what it accepts is bounded, valid
// UTF-8, and encodes again within MaxBytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schemagate":"probe-report/v1","verdict":"breaking","changes":[{"class":"breaking","kind":"column-type","table":"routes","column":"target","from":"text","to":"json","rewrite":true}]}`))
	f.Add([]byte(`{"schemagate":"probe-report/v1","verdict":"failed","changes":[{"class":"failed","kind":"migration-failed","why":"ERROR"}],"omitted":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if len(r.Changes) > maxChanges {
			t.Fatalf("%d changes kept", len(r.Changes))
		}
		for _, c := range r.Changes {
			for _, s := range []string{c.Table, c.Column, c.From, c.To, c.Why} {
				if len(s) > maxField || !utf8.ValidString(s) {
					t.Fatalf("field %q", s)
				}
			}
			if c.Class.Worse(r.Verdict) {
				t.Fatalf("verdict %s better than %s", r.Verdict, c.Class)
			}
		}
		if enc, err := r.Encode(); err != nil || len(enc) > MaxBytes {
			t.Fatalf("encode: %d bytes, %v", len(enc), err)
		}
	})
}
