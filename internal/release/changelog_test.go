package release

import (
	"os"
	"strings"
	"testing"
)

const changelog = `# Changelog

## [Unreleased]

- not yet

## [0.2.0] - 2027-01-10

### Fixed

- a thing

## [0.1.0] - 2026-12-05

First.

## [0.0.9]
`

func TestNotesTakeTheVersionsSection(t *testing.T) {
	got, err := Notes([]byte(changelog), "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	want := "# schemagate v0.2.0\n\n### Fixed\n\n- a thing\n"
	if string(got) != want {
		t.Errorf("notes:\n%s\nwant:\n%s", got, want)
	}
	if got, err := Notes([]byte(changelog), "0.1.0"); err != nil || !strings.HasSuffix(string(got), "\nFirst.\n") {
		t.Errorf("0.1.0: %q, %v", got, err)
	}
	if _, err := Notes([]byte(changelog), "v0.3.0"); err == nil || !strings.Contains(err.Error(), "no section") {
		t.Errorf("a version with no section: %v, want an error saying so", err)
	}
	if _, err := Notes([]byte(changelog), "v0.0.9"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty section: %v, want an error saying so", err)
	}
	// A pre-release with no section of its own takes [Unreleased]; one with a section takes it.
	if got, err := Notes([]byte(changelog), "v0.3.0-rc.1"); err != nil || string(got) != "# schemagate v0.3.0-rc.1 (pre-release; notes from the Unreleased section)\n\n- not yet\n" {
		t.Errorf("v0.3.0-rc.1: %q, %v", got, err)
	}
	if got, err := Notes([]byte("## [0.3.0-rc.1]\n\nrc\n\n## [Unreleased]\n\nx\n"), "v0.3.0-rc.1"); err != nil || !strings.HasSuffix(string(got), "\nrc\n") {
		t.Errorf("v0.3.0-rc.1 with a section: %q, %v", got, err)
	}
	if _, err := Notes([]byte("## [0.1.0]\n\nx\n"), "v0.2.0-rc.1"); err == nil || !strings.Contains(err.Error(), "no section") {
		t.Errorf("a pre-release with neither its section nor [Unreleased]: %v, want an error", err)
	}
	// v0.1.0 must not match a section [0.1.0-rc.1] nor [0.1.01].
	if _, err := Notes([]byte("## [0.1.0-rc.1]\n\nx\n"), "v0.1.0"); err == nil {
		t.Error("v0.1.0 took the notes of 0.1.0-rc.1")
	}
}

// The repository's own changelog has notes for the version the chart carries.
func TestChangelogHasTheChartsVersion(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile("../../charts/schemagate/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, l := range strings.Split(string(chart), "\n") {
		if v, ok := strings.CutPrefix(l, "version: "); ok {
			version = strings.TrimSpace(v)
		}
	}
	if _, err := Notes(b, "v"+version); err != nil {
		t.Errorf("chart version %s: %v", version, err)
	}
}
