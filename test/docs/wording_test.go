package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// internalID matches the names of this project's test scenarios (S-23, R-3), invariants (I2) and
// issues (issue 10), which mean nothing to a user.
var internalID = regexp.MustCompile(`\b(S-[0-9]{2}|R-[0-9]+|I[1-5]|[Ii]ssues? [0-9]+)\b`)

// What users read, `kubectl explain` (the CRD's field docs) and docs/, speaks of behaviour, not of
// the test scenarios or issues it came from.
func TestUserTextHasNoInternalIDs(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "config", "crd", "bases", "routing.schemagate.io_routingservices.yaml"))
	for _, f := range files {
		if filepath.Base(f) == "testing.md" {
			// The contributors' map of which test covers which scenario and invariant.
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range internalID.FindAllIndex(raw, -1) {
			line := 1
			for _, c := range raw[:loc[0]] {
				if c == '\n' {
					line++
				}
			}
			t.Errorf("%s:%d: %q names an internal scenario or issue: say what happens instead", filepath.Base(f), line, raw[loc[0]:loc[1]])
		}
	}
}
