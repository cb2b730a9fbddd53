// Command release writes a versioned schemagate release into dist/release/<version>/ (`make
// release VERSION=vX.Y.Z`); internal/release does the work and docs/install.md says what each file
// is for. It prints each file with its size and sha256.
//
//	go run ./hack/release --version v0.1.0 [--out dist/release] [--image-repo ghcr.io/schemagate/manager] [--sign-key key.pem]
//	go run ./hack/release --verify dist/release/v0.1.0 --public-key schemagate.pub
//	go run ./hack/release --new-key schemagate   # writes schemagate.key and schemagate.pub
//
// --sign-key signs checksums.txt (checksums.txt.sig, cosign's sign-blob format); --verify checks
// a downloaded release against the public key: the signature, then every file's sha256.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/schemagate/schemagate/internal/release"
)

func main() {
	version := flag.String("version", "", "Release version, v<major>.<minor>.<patch>[-<pre-release>] (required).")
	out := flag.String("out", filepath.Join("dist", "release"), "Folder that receives <version>/.")
	repo := flag.String("image-repo", "ghcr.io/schemagate/manager", "Repository the manager image is published to.")
	base := flag.String("download-base", "", "URL the release's files are served from (default: the GitHub release download URL of the version).")
	arches := flag.String("arches", "amd64,arm64", "Linux GOARCH values of the image, comma-separated.")
	dirty := flag.Bool("allow-dirty", false, "Build from a tree with uncommitted changes (for trying it out; never publish the result).")
	signKey := flag.String("sign-key", "", "PEM private key (ECDSA P-256, not encrypted) to sign checksums.txt with: writes checksums.txt.sig.")
	verify := flag.String("verify", "", "Verify the release in this folder with --public-key instead of building one.")
	publicKey := flag.String("public-key", "", "PEM public key for --verify.")
	newKey := flag.String("new-key", "", "Write a new signing key pair to <this>.key (private: keep it secret) and <this>.pub, and exit.")
	flag.Parse()
	if *newKey != "" {
		private, public, err := release.NewKeyPair()
		if err == nil {
			err = os.WriteFile(*newKey+".key", private, 0o600)
		}
		if err == nil {
			err = os.WriteFile(*newKey+".pub", public, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "release: new key:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s.key (private) and %s.pub\n", *newKey, *newKey)
		return
	}
	if *verify != "" {
		pub, err := os.ReadFile(*publicKey)
		if err == nil {
			err = release.Verify(*verify, pub)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "release: verify:", err)
			os.Exit(1)
		}
		fmt.Printf("%s: %s is signed by %s and every file has its sha256\n", *verify, release.ChecksumsFile, *publicKey)
		return
	}
	if *base == "" {
		*base = "https://github.com/schemagate/schemagate/releases/download/" + *version + "/"
	}
	if !strings.HasSuffix(*base, "/") {
		*base += "/"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := release.Build(ctx, release.Options{
		ModuleDir: ".", Version: *version, OutDir: *out, ImageRepo: *repo, DownloadBase: *base,
		SourceDateEpoch: os.Getenv("SOURCE_DATE_EPOCH"), Arches: strings.Split(*arches, ","), AllowDirty: *dirty,
		Log: func(format string, args ...any) { fmt.Printf("release: "+format+"\n", args...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	if *signKey != "" {
		key, err := os.ReadFile(*signKey)
		if err == nil {
			err = release.Sign(dir, key)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "release: sign:", err)
			os.Exit(1)
		}
	}
	if err := list(dir); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// list prints every file of the release with its size and its sha256 from checksums.txt.
func list(dir string) error {
	f, err := os.Open(filepath.Join(dir, release.ChecksumsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Printf("%s:\n", dir)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			continue
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fmt.Printf("  %-42s %10.1f KiB  sha256:%s\n", name, float64(info.Size())/1024, sum)
	}
	return sc.Err()
}
