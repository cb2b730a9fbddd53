package release

import (
	"fmt"
	"strings"
)

// Notes returns the section of changelog (CHANGELOG.md, Keep a Changelog layout) for version
// ("v0.1.0" or "0.1.0"): the lines after its heading "## [0.1.0]" (any date after it) up to the
// next "## " heading, trimmed, under a "# schemagate vX.Y.Z" title. A pre-release (v0.2.0-rc.1)
// without a section of its own takes the [Unreleased] section, as release candidates are cut
// before the version's section is written; its title says so. Errors: no such section, or an
// empty one; a release never ships without its notes.
func Notes(changelog []byte, version string) ([]byte, error) {
	bare := strings.TrimPrefix(version, "v")
	want := "## [" + bare + "]"
	text, found := section(changelog, want)
	title := "# schemagate v" + bare
	if !found && strings.Contains(bare, "-") {
		if text, found = section(changelog, "## [Unreleased]"); found {
			want = "## [Unreleased]"
			title += " (pre-release; notes from the Unreleased section)"
		}
	}
	if !found {
		return nil, fmt.Errorf("CHANGELOG.md has no section %q: add one before releasing", want)
	}
	if text == "" {
		return nil, fmt.Errorf("CHANGELOG.md section %q is empty", want)
	}
	return []byte(title + "\n\n" + text + "\n"), nil
}

// section returns the trimmed lines under the "## " heading that starts with heading, up to the
// next "## " heading, and whether there is such a heading.
func section(changelog []byte, heading string) (string, bool) {
	var body []string
	in, found := false, false
	for _, line := range strings.Split(string(changelog), "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			if strings.HasPrefix(line, heading) {
				in, found = true, true
			}
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	return strings.TrimSpace(strings.Join(body, "\n")), found
}
