//go:build tools

// Package vulncheck pins govulncheck and the Go vulnerability database's generator for `make
// vulncheck` (hack/tools/build-vulncheck.sh builds both from source through the Go module
// proxy). Its own module: their dependencies must not move those of ../../go.mod.
package vulncheck

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/gendb"
)
