// Command golangci-lint is golangci-lint v2 (pinned in go.mod) with kube-api-linter compiled in
// as the module plugin "kubeapilinter", which .golangci.yml enables for api/. It is what
// `golangci-lint custom` would build, without that command's git clone: `make lint` builds it
// into bin/golangci-lint from the module proxy.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// Registers the "kubeapilinter" module plugin, and with it every kube-api-linter analyzer.
	_ "sigs.k8s.io/kube-api-linter/pkg/plugin/base"
	_ "sigs.k8s.io/kube-api-linter/pkg/registration"
)

func main() {
	if err := commands.Execute(buildInfo()); err != nil {
		fmt.Fprintf(os.Stderr, "golangci-lint: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}

// buildInfo reports the pinned golangci-lint module version (from the binary's build info) as
// `golangci-lint version` prints it.
func buildInfo() commands.BuildInfo {
	info := commands.BuildInfo{Version: "unknown", Commit: "schemagate hack/tools/lint", Date: "(unknown)", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	for _, dep := range bi.Deps {
		if dep.Path == "github.com/golangci/golangci-lint/v2" {
			info.Version = dep.Version
		}
	}
	return info
}
