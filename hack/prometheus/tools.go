//go:build tools

// Package tools pins the Prometheus server that test/prometheus runs and the promtool that
// test/alerts runs: hack/build-binaries.sh prometheus (promtool) builds
// github.com/prometheus/prometheus/cmd/prometheus (cmd/promtool) from this module. The build tag
// keeps the package out of every build; it only tells `go mod tidy` which dependencies to keep.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
