package release

import (
	"fmt"
	"strings"
)

// Notes returns the section of changelog (CHANGELOG.md, Keep a Changelog layout) for version
// ("v0.1.0" or "0.1.0"): the lines after its heading "## [0.1.0]" (any date after it) up to the
// next "## " heading, trimmed, under a "# schemagate vX.Y.Z" title. Errors: no such section, or an
// empty one; a release never ships without its notes.
func Notes(changelog []byte, version string) ([]byte, error) {
	want := "## [" + strings.TrimPrefix(version, "v") + "]"
	var body []string
	in, found := false, false
	for _, line := range strings.Split(string(changelog), "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			if strings.HasPrefix(line, want) {
				in, found = true, true
			}
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	if !found {
		return nil, fmt.Errorf("CHANGELOG.md has no section %q: add one before releasing", want)
	}
	text := strings.TrimSpace(strings.Join(body, "\n"))
	if text == "" {
		return nil, fmt.Errorf("CHANGELOG.md section %q is empty", want)
	}
	return []byte("# schemagate v" + strings.TrimPrefix(version, "v") + "\n\n" + text + "\n"), nil
}
