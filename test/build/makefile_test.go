// Package build checks what the Makefile's targets run, from `make -n` (which prints a target's
// commands without running them): the options docs/testing.md and docs/install.md promise.
package build

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's top folder, from this package's folder.
var repoRoot = filepath.Join("..", "..")

// dryRun returns the commands `make -n target vars...` prints, one per line.
func dryRun(t *testing.T, target string, vars ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", append([]string{"-n", "--no-print-directory", target}, vars...)...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s %v: %v\n%s", target, vars, err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// goTests returns the lines that run `go test`, and the others.
func goTests(lines []string) (tests, other []string) {
	for _, l := range lines {
		if strings.Contains(l, "go test ") {
			tests = append(tests, l)
		} else {
			other = append(other, l)
		}
	}
	return tests, other
}

// spaces collapses runs of blanks, so an empty make variable leaves no trace.
var spaces = regexp.MustCompile(`\s+`)

// TestRunSelectsTestsAsTheFullRun: `make test RUN=<regex>` and `make test-e2e RUN=<regex>` run the
// same commands as the full target, in the same environment and with the same flags and
// prerequisites, each `go test` with -run added; only the fuzzer's smoke run (no test of RUN's)
// is left out.
func TestRunSelectsTestsAsTheFullRun(t *testing.T) {
	const regex = "TestInstall|TestStories/S-08"
	for _, target := range []string{"test", "test-e2e"} {
		t.Run(target, func(t *testing.T) {
			fullTests, fullOther := goTests(dryRun(t, target))
			subTests, subOther := goTests(dryRun(t, target, "RUN="+regex))
			if strings.Join(fullOther, "\n") != strings.Join(subOther, "\n") {
				t.Errorf("with RUN the other commands differ:\nfull:\n%s\nRUN:\n%s", strings.Join(fullOther, "\n"), strings.Join(subOther, "\n"))
			}
			var want []string
			for _, l := range fullTests {
				if !strings.Contains(l, " -fuzz ") {
					want = append(want, spaces.ReplaceAllString(l, " "))
				}
			}
			if len(want) == 0 {
				t.Fatalf("make -n %s runs no go test: %q", target, fullTests)
			}
			if len(subTests) != len(want) {
				t.Fatalf("with RUN, %d go test commands, want %d:\n%s", len(subTests), len(want), strings.Join(subTests, "\n"))
			}
			flag := "-run '" + regex + "'"
			for i, l := range subTests {
				if !strings.Contains(l, flag) {
					t.Errorf("with RUN, go test without %s: %s", flag, l)
					continue
				}
				if got := spaces.ReplaceAllString(strings.Replace(l, flag, "", 1), " "); got != want[i] {
					t.Errorf("with RUN, apart from -run:\n got %s\nwant %s", got, want[i])
				}
			}
		})
	}
}

// TestRaceDetectorCoversPlannerControllersAndMeasure: `make test` runs the planner
// (pkg/rollout), the controllers, the measurement providers (pkg/measure), the spoke credentials
// (pkg/spoke) and the kubectl plugin (its dashboard's broker and streams) with -race.
func TestRaceDetectorCoversPlannerControllersAndMeasure(t *testing.T) {
	tests, _ := goTests(dryRun(t, "test"))
	var race []string
	for _, l := range tests {
		if strings.Contains(l, " -race ") {
			race = append(race, l)
		}
	}
	if len(race) == 0 {
		t.Fatalf("make test runs no go test with -race:\n%s", strings.Join(tests, "\n"))
	}
	joined := strings.Join(race, "\n")
	for _, pkg := range []string{"pkg/rollout", "controllers", "pkg/measure", "pkg/spoke", "cmd/kubectl-schemagate"} {
		named := regexp.MustCompile(`(^|[\s/])` + regexp.QuoteMeta(pkg) + `/?(\s|$)`)
		if !named.MatchString(joined) {
			t.Errorf("make test does not run %s with -race:\n%s", pkg, joined)
		}
	}
}

// TestBuildInstallerLeavesTheCheckoutClean: `make build-installer IMG=<your image>` writes the
// installer to a path git ignores, never over a tracked file such as dist/install.yaml.
func TestBuildInstallerLeavesTheCheckoutClean(t *testing.T) {
	out := regexp.MustCompile(`render-installer .*-o (\S+)`)
	var written []string
	for _, l := range dryRun(t, "build-installer", "IMG=registry.example/schemagate:v0.1.0") {
		if m := out.FindStringSubmatch(l); m != nil {
			written = append(written, m[1])
		}
	}
	if len(written) == 0 {
		t.Fatal("make build-installer runs no render-installer -o <file>")
	}
	for _, path := range written {
		ignored, err := gitIgnores(path)
		if err != nil {
			t.Fatal(err)
		}
		if !ignored {
			t.Errorf("make build-installer IMG=… writes %s, which git does not ignore: the checkout would be dirty with someone's image", path)
		}
	}
}

// gitIgnores reports whether the repository's ignore rules ignore path (which need not exist).
func gitIgnores(path string) (bool, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return false, err
	}
	cmd := exec.Command("git", "check-ignore", "-q", "--no-index", path)
	cmd.Dir = repoRoot
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, err
}
