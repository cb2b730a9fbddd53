package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ChecksumsFile lists the sha256 of every other file of the release, as `sha256sum` prints them
// (`sha256sum -c checksums.txt` checks a download).
const ChecksumsFile = "checksums.txt"

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checksums lists the sha256 of every file in dir but ChecksumsFile, sorted by name, in
// sha256sum's format ("<hex>  <name>").
func checksums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != ChecksumsFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sha256Hex(data), n)
	}
	return b.Bytes(), nil
}
