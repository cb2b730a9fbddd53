package image

import (
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/schemagate/schemagate/internal/image"
)

// TestDockerfileDescribesTheImage holds the Dockerfile's final stage (the manager image) to
// internal/image's spec: an empty base, the same files from the same sources, user, working
// folder, entrypoint and label keys, and binaries built with the same flags. Either side changing
// alone fails here.
func TestDockerfileDescribesTheImage(t *testing.T) {
	stages, err := parseDockerfile(filepath.Join(moduleRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 {
		t.Fatalf("want a builder stage and the final stage, got %d stages", len(stages))
	}
	final := stages[len(stages)-1]
	if final.from != "scratch" {
		t.Errorf("final stage FROM %s, want scratch (internal/image starts from an empty image)", final.from)
	}
	checkConfig(t, final, image.Entrypoint)

	// The fixed labels say the same; revision and version come from build arguments.
	want := (image.Metadata{Revision: "${REVISION}", Version: "${VERSION}"}).Labels()
	if got := final.labels(); !maps.Equal(got, want) {
		t.Errorf("LABEL %v, want %v", got, want)
	}

	copies, err := final.copies()
	if err != nil {
		t.Fatal(err)
	}
	var dsts []string
	for _, c := range copies {
		dsts = append(dsts, c.dst)
	}
	var files []string
	for _, f := range image.Files() {
		files = append(files, f.Path)
	}
	slices.Sort(dsts)
	slices.Sort(files)
	if !slices.Equal(dsts, files) {
		t.Fatalf("final stage copies %v, internal/image puts %v", dsts, files)
	}

	builder := checkSources(t, copies)
	checkBuild(t, stages, builder)
}

// checkConfig checks the stage's USER, WORKDIR and ENTRYPOINT against internal/image.
func checkConfig(t *testing.T, s stage, entrypoint []string) {
	t.Helper()
	if user, _ := s.last("USER"); user != image.User {
		t.Errorf("USER %q, want %q", user, image.User)
	}
	if wd, _ := s.last("WORKDIR"); wd != image.WorkingDir {
		t.Errorf("WORKDIR %q, want %q", wd, image.WorkingDir)
	}
	ep, err := s.entrypoint()
	if err != nil {
		t.Error(err)
	} else if !slices.Equal(ep, entrypoint) {
		t.Errorf("ENTRYPOINT %q, want %q", ep, entrypoint)
	}
}

// checkSources checks where each copied file comes from: passwd and group from
// internal/image's rootfs folder in the build context, the CA bundle from the same path in the
// builder stage (Debian's, as on the machine `make image` runs on), the binaries from the
// builder. It returns the builder stage's name.
func checkSources(t *testing.T, copies []copied) string {
	t.Helper()
	var builder string
	bins := map[string]bool{}
	for _, b := range image.Binaries {
		bins[b.Path] = true
	}
	for _, c := range copies {
		switch {
		case c.dst == "/etc/passwd" || c.dst == "/etc/group":
			if c.from != "" || c.src != path.Join(image.RootfsDir, c.dst) {
				t.Errorf("%s copied from %q in stage %q, want %s from the build context", c.dst, c.src, c.from, path.Join(image.RootfsDir, c.dst))
			}
		case c.dst == image.CABundlePath:
			if c.from == "" || c.src != image.CABundlePath {
				t.Errorf("%s copied from %q in stage %q, want %s of the builder", c.dst, c.src, c.from, image.CABundlePath)
			}
		case bins[c.dst]:
			if c.from == "" || path.Base(c.src) != path.Base(c.dst) {
				t.Errorf("%s copied from %q in stage %q, want the builder's %s", c.dst, c.src, c.from, path.Base(c.dst))
			}
		}
		if c.from != "" {
			if builder != "" && builder != c.from {
				t.Errorf("files copied from stages %q and %q, want one builder", builder, c.from)
			}
			builder = c.from
		}
	}
	return builder
}

// checkBuild checks that the builder stage runs one static `go build` of every binary's package
// with internal/image.BuildFlags.
func checkBuild(t *testing.T, stages []stage, builder string) {
	t.Helper()
	var runs []string
	for _, s := range stages {
		if s.name != builder {
			continue
		}
		for _, ins := range s.instructions {
			if ins.keyword == "RUN" && strings.Contains(ins.args, "go build") {
				runs = append(runs, ins.args)
			}
		}
	}
	if len(runs) != 1 {
		t.Fatalf("builder stage %q: %d RUN lines with go build, want 1: %q", builder, len(runs), runs)
	}
	run := runs[0]
	var flags []string
	for _, f := range image.BuildFlags {
		if strings.Contains(f, " ") {
			f = `"` + f + `"`
		}
		flags = append(flags, f)
	}
	for _, want := range []string{"CGO_ENABLED=0", "go build " + strings.Join(flags, " ")} {
		if !strings.Contains(run, want) {
			t.Errorf("builder's go build lacks %q: %s", want, run)
		}
	}
	fields := strings.Fields(run)
	for _, b := range image.Binaries {
		if !slices.Contains(fields, b.Package) {
			t.Errorf("builder's go build does not build %s: %s", b.Package, run)
		}
	}
}
