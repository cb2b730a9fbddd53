// Command render-installer writes schemagate's one-file installer: config/default built with the
// kustomize library, the manager's image set from --img. `make installer` runs it into the
// committed dist/install.yaml (default image), `make build-installer IMG=…` into the git-ignored
// dist/local/install.yaml; `make deploy` pipes it into `kubectl apply --server-side -f -`.
//
//	go run ./hack/render-installer --img registry.example/schemagate:v0.1.0 [--config config] [-o dist/install.yaml]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
)

func main() {
	img := flag.String("img", "", "Manager image (IMG); empty keeps the one config/manager names.")
	config := flag.String("config", "config", "The repository's config/ folder.")
	out := flag.String("o", "-", "Output file; - is stdout.")
	flag.Parse()
	b, err := installer.Render(*config, *img)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-installer:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(b)
	} else if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-installer:", err)
		os.Exit(1)
	}
}
