package schemaversion

import "testing"

func TestCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1", "1", 0},
		{"1", "2", -1},
		{"9", "10", -1},
		{"10", "9", 1},
		{"2026.9.30", "2026.10.1", -1},
		{"2026.10.1", "2026.9.30", 1},
		{"2", "2.0", 0},
		{"2.0.1", "2", 1},
		{"007", "7", 0},
		{"18446744073709551616", "18446744073709551615", 1},
		{"", "1", -1},
		{"1", "", 1},
		{"", "", 0},
	}
	for _, c := range cases {
		got, err := Compare(c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
}

func TestCompareRejectsInvalid(t *testing.T) {
	for _, v := range []string{"v2", "1..2", ".1", "1.", "1.a", "-1", " 1"} {
		if _, err := Compare(v, "1"); err == nil {
			t.Errorf("Compare(%q, \"1\") accepted an invalid version", v)
		}
		if Valid(v) {
			t.Errorf("Valid(%q) = true", v)
		}
		if AtLeast(v, "0") {
			t.Errorf("AtLeast(%q, \"0\") = true", v)
		}
	}
}

func TestAtLeast(t *testing.T) {
	if !AtLeast("2", "2") || !AtLeast("10", "9") || AtLeast("1", "2") || AtLeast("", "1") {
		t.Fatal("AtLeast disagrees with Compare")
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"2": "2", "2.0": "2", "02.00": "2", "0": "0", "0.0": "0", "1.0.0": "1",
		"2026.09.30": "2026.9.30", "1.0.1": "1.0.1", "v2": "v2", "": "",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
		if Valid(in) && !Equal(in, Canonical(in)) {
			t.Errorf("Canonical(%q) = %q is another version", in, Canonical(in))
		}
	}
	if Equal("", "") || Equal("x", "x") || !Equal("2", "2.0") || Equal("2", "2.1") {
		t.Fatal("Equal disagrees with Compare")
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"2.0", "007", "1.2.3", "", "1..", "0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c := Canonical(v)
		if Valid(v) && (!Valid(c) || !Equal(v, c) || Canonical(c) != c) {
			t.Fatalf("Canonical(%q) = %q", v, c)
		}
	})
}
