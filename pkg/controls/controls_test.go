package controls

import (
	"slices"
	"strings"
	"testing"
)

func TestRecord(t *testing.T) {
	for _, v := range []string{"20261130T065203Z-k7d2x", "a", "now", "v1.2_3:4", strings.Repeat("x", 63)} {
		if got := Record(v); got != v {
			t.Errorf("Record(%q) = %q, want it as it is", v, got)
		}
	}
	for _, v := range []string{strings.Repeat("x", 64), "with space", "sha256-forged", "é", "", "a\nb", "tab\t"} {
		if v == "" {
			continue // an unset annotation is never recorded (Keep, Read)
		}
		got := Record(v)
		if !strings.HasPrefix(got, "sha256-") || len(got) != len("sha256-")+32 || got == v {
			t.Errorf("Record(%q) = %q, want a digest", v, got)
		}
	}
	if Record("with space") == Record("with  space") {
		t.Error("two values share a digest")
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"one", "a1", []string{"a1"}},
		{"spaces around", "  a1   a2 ", []string{"a1", "a2"}},
		{"the newest eight of ten", "1 2 3 4 5 6 7 8 9 10", []string{"3", "4", "5", "6", "7", "8", "9", "10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Parse(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if got := Parse(strings.Repeat("a ", 5000)); len(got) != MaxRecords {
		t.Errorf("%d records read from a huge annotation, want %d", len(got), MaxRecords)
	}
	if got := Parse(strings.Repeat("x", MaxAnnotation) + " late"); slices.Contains(got, "late") {
		t.Error("a record past the first MaxAnnotation bytes was read")
	}
	if got := Parse(strings.Repeat("y", 100) + " sha256-XYZ sha256-" + strings.Repeat("A", 32) + " é a1 " + Record("é")); !slices.Equal(got, []string{"a1", Record("é")}) {
		t.Errorf("fields Record never writes were read as records: %q", got)
	}
}

func TestMergeAndKeep(t *testing.T) {
	hist := Merge("a1 a2", "", "a2 a3", "a1")
	if want := []string{"a1", "a2", "a3"}; !slices.Equal(hist, want) {
		t.Fatalf("Merge = %q, want %q", hist, want)
	}
	for _, c := range []struct {
		name    string
		hist    []string
		handled string
		want    string
	}{
		{"nothing ever handled", nil, "", ""},
		{"the first value", nil, "a1", "a1"},
		{"a new value is newest", hist, "a4", "a1 a2 a3 a4"},
		{"a value handled again moves to the end", hist, "a1", "a2 a3 a1"},
		{"already newest: unchanged", hist, "a3", "a1 a2 a3"},
		{"kept bounded", []string{"1", "2", "3", "4", "5", "6", "7", "8"}, "9", "2 3 4 5 6 7 8 9"},
		{"a value of any shape is a digest", nil, "with space", Record("with space")},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.hist)
			if got := Keep(c.hist, c.handled); got != c.want {
				t.Errorf("Keep(%q, %q) = %q, want %q", c.hist, c.handled, got, c.want)
			}
			if !slices.Equal(before, c.hist) {
				t.Errorf("Keep changed its input: %q, was %q", c.hist, before)
			}
		})
	}
}

func TestRead(t *testing.T) {
	hist := []string{"a1", Record("with space")}
	for _, c := range []struct {
		name, value, handled string
		want                 State
	}{
		{"unset", "", "a1", Unset},
		{"unset, never handled", "", "", Unset},
		{"status says handled", "a2", "a2", Handled},
		{"status lost, recorded", "a1", "", Recorded},
		{"status older, recorded", "a1", "a0", Recorded},
		{"a digest recorded", "with space", "", Recorded},
		{"new", "a2", "a1", New},
		{"new with no history", "b", "", New},
		{"a forged digest is not the value it names", Record("with space"), "", New},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Read(c.value, c.handled, hist); got != c.want {
				t.Errorf("Read(%q, %q) = %s, want %s", c.value, c.handled, got, c.want)
			}
		})
	}
	for s := Unset; s <= New; s++ {
		if s.String() == "State(?)" {
			t.Errorf("state %d has no name", s)
		}
	}
}

// FuzzRecords: whatever a record annotation or a control's value holds, the records read are
// bounded and well formed, what Keep writes stays within MaxAnnotation, and a value kept is read
// back from it as handled.
func FuzzRecords(f *testing.F) {
	f.Add("a1 a2 a3", "a4")
	f.Add(strings.Repeat("x ", 600), "with space")
	f.Add(strings.Repeat("y", 900)+" a1", "sha256-0123")
	f.Fuzz(func(t *testing.T, annotation, value string) {
		hist := Parse(annotation)
		if len(hist) > MaxRecords {
			t.Fatalf("%d records", len(hist))
		}
		for _, r := range hist {
			if !isRecord(r) || len(r) > max(maxPlain, len(digestPrefix)+32) {
				t.Fatalf("Parse(%q) kept %q", annotation, r)
			}
		}
		keep := Keep(hist, value)
		if len(keep) > MaxAnnotation {
			t.Fatalf("Keep wrote %d bytes", len(keep))
		}
		if value == "" {
			return
		}
		if r := Record(value); !isRecord(r) {
			t.Fatalf("Record(%q) = %q, which Parse would not read", value, r)
		}
		if got := Read(value, "", Parse(keep)); got != Recorded {
			t.Fatalf("a value kept (%q in %q) reads as %s", value, keep, got)
		}
	})
}
