// Package image builds the schemagate manager's container image without a container engine: two
// static binaries cross-compiled with `go build`, a minimal /etc/passwd and /etc/group, and the
// host's CA bundle, put together with go-containerregistry on an empty base into one OCI image
// index for linux/amd64 and linux/arm64. The Dockerfile at the module root describes the same
// image; test/image checks that the two do not drift apart. docs/image.md is the user's guide.
package image

import "io/fs"

// Image configuration. The Dockerfile's final stage must say the same (test/image checks it).
const (
	// User is the numeric user:group the manager runs as: 65532, the "nonroot" user of the
	// distroless images this image replaces, named in /etc/passwd and /etc/group.
	User = "65532:65532"
	// WorkingDir is the process's working directory.
	WorkingDir = "/"
	// OS is the only operating system the image is built for.
	OS = "linux"
	// SourceURL is the repository the image is built from (the module path as a URL).
	SourceURL = "https://github.com/schemagate/schemagate"
	// License is the SPDX identifier of the project's license (hack/boilerplate.go.txt).
	License = "Apache-2.0"
)

// Entrypoint is the image's entrypoint: the manager binary, run with no shell.
var Entrypoint = []string{"/manager"}

// DefaultArches are the GOARCH values `make image` builds by default, one image each, all on OS.
var DefaultArches = []string{"amd64", "arm64"}

// Label keys of the OCI image-spec's annotations, used as image config labels.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelLicenses = "org.opencontainers.image.licenses"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
)

// CABundlePath is where the image holds its CA certificates (PEM, concatenated). It is the first
// file Go's crypto/x509 reads on Linux, so the manager's https shard checks need no SSL_CERT_FILE.
// The build copies the host's file from the same path (Debian's ca-certificates package).
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// Binary is one static Go program in the image.
type Binary struct {
	// Package is the main package's path relative to the module root, as `go build` takes it.
	Package string
	// Path is the absolute path of the binary in the image.
	Path string
}

// Binaries are the programs in the image: the manager (the entrypoint) and the schema reporter
// (docs/schemagate-schema.md), which migration images can copy from this one.
var Binaries = []Binary{
	{Package: "./cmd/manager", Path: "/manager"},
	{Package: "./cmd/schemagate-schema", Path: "/schemagate-schema"},
}

// File is one regular file of the image's filesystem.
type File struct {
	// Path is absolute, e.g. "/etc/passwd".
	Path string
	// Mode holds the permission bits only (0o644, 0o755); every file is owned by 0:0.
	Mode fs.FileMode
}

// Files lists every regular file in the image, in the order of its layers: the base layer
// (/etc/passwd, /etc/group, the CA bundle) and then the binaries. Directories are not listed;
// the layers hold the parents each file needs (/etc, /etc/ssl, /etc/ssl/certs), mode 0755.
func Files() []File {
	files := []File{
		{Path: "/etc/passwd", Mode: 0o644},
		{Path: "/etc/group", Mode: 0o644},
		{Path: CABundlePath, Mode: 0o644},
	}
	for _, b := range Binaries {
		files = append(files, File{Path: b.Path, Mode: 0o755})
	}
	return files
}
