package schemarange

import (
	"testing"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

func TestRangeContains(t *testing.T) {
	cases := []struct {
		name string
		r    Range
		v    string
		want bool
	}{
		{"inside a closed range", Range{Min: "1", Max: "2"}, "1.5", true},
		{"at the min", Range{Min: "1", Max: "2"}, "1", true},
		{"at the max", Range{Min: "1", Max: "2"}, "2", true},
		{"above the max", Range{Min: "1", Max: "2"}, "2.0.1", false},
		{"below the min", Range{Min: "1.1", Max: "2"}, "1", false},
		{"no newest", Range{Min: "1"}, "99", true},
		{"an unknown range", Range{}, "1", false},
		{"no version", Range{Min: "1"}, "", false},
		{"not a version", Range{Min: "1"}, "2; drop table", false},
		{"equal however written", Range{Min: "2", Max: "2"}, "2.0", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Contains(tc.v); got != tc.want {
				t.Fatalf("%s.Contains(%q) = %v, want %v", tc.r, tc.v, got, tc.want)
			}
		})
	}
}

func TestRangeString(t *testing.T) {
	for r, want := range map[Range]string{
		{Min: "1", Max: "2"}:      "[1, 2]",
		{Min: "2"}:                "[2, no newest)",
		{Min: "2", Assumed: true}: "[2, no newest) (assumed)",
		{}:                        "[none, no newest)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", r, got, want)
		}
	}
}

// What the database may be at decides where a revision may run: its confirmed version, the
// versions live Jobs may bring it to, and a recorded contract.
func TestDatabaseMayRun(t *testing.T) {
	migration := Pending{Version: "2", Job: "rs-a-migrate-2-1", Kind: "migration"}
	contract := Pending{Version: "3", Job: "rs-a-contract-3-1", Kind: "contract"}
	v1 := Range{Min: "1", Max: "1"}
	v12 := Range{Min: "1", Max: "2"}
	v2up := Range{Min: "2"}
	cases := []struct {
		name    string
		db      Database
		r       Range
		want    bool
		outside []Pending
	}{
		{"confirmed inside, nothing pending", Database{Confirmed: "1"}, v1, true, nil},
		{"confirmed outside", Database{Confirmed: "2"}, v1, false, nil},
		{"nothing confirmed", Database{}, v12, false, nil},
		{"a live migration it cannot run on", Database{Confirmed: "1", Pending: []Pending{migration}}, v1, false, []Pending{migration}},
		{"a live migration it runs on", Database{Confirmed: "1", Pending: []Pending{migration}}, v12, true, nil},
		{"a migration and then a contract", Database{Confirmed: "1", Pending: []Pending{migration, contract}}, v12, false, []Pending{contract}},
		{"a contract recorded above the reports", Database{Confirmed: "2", Floor: "3"}, v12, false, nil},
		{"a contract recorded it runs on", Database{Confirmed: "2", Floor: "3"}, v2up, true, nil},
		{"a contract recorded below the reports", Database{Confirmed: "2", Floor: "1.5"}, v2up, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.db.MayRun(tc.r); got != tc.want {
				t.Fatalf("MayRun(%s) = %v, want %v", tc.r, got, tc.want)
			}
			out := tc.db.Outside(tc.r)
			if len(out) != len(tc.outside) {
				t.Fatalf("Outside(%s) = %v, want %v", tc.r, out, tc.outside)
			}
			for i := range out {
				if out[i] != tc.outside[i] {
					t.Fatalf("Outside(%s) = %v, want %v", tc.r, out, tc.outside)
				}
			}
		})
	}
	if got := migration.String(); got != "migration Job rs-a-migrate-2-1 may bring the database to schema 2" {
		t.Fatalf("Pending.String() = %q", got)
	}
}

// Versions come from spec, status, annotations and Job reports: none may panic a range, and a
// range contains only versions.
func FuzzRangeContains(f *testing.F) {
	for _, s := range [][3]string{{"1", "2", "1.5"}, {"", "", ""}, {"1", "", "x"}, {"1.2.3", "1.2.3", "1.2.3.0"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, lo, hi, v string) {
		r := Range{Min: lo, Max: hi}
		if r.Contains(v) && !schemaversion.Valid(v) {
			t.Fatalf("%s contains %q, which is not a version", r, v)
		}
		_ = r.String()
		_ = Database{Confirmed: v, Floor: hi, Pending: []Pending{{Version: lo}}}.MayRun(r)
	})
}
