package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func keyPair(t *testing.T) (private, public []byte) {
	t.Helper()
	private, public, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return private, public
}

// Issue 42 item 13: a release signed with a key verifies with its public key; a changed file, a
// changed checksums.txt, a signature by another key and a missing file each fail, naming what.
func TestSignAndVerify(t *testing.T) {
	private, public := keyPair(t)
	_, otherPublic := keyPair(t)
	release := func(t *testing.T) string {
		dir := t.TempDir()
		for name, body := range map[string]string{"install.yaml": "kind: List\n", "image.tar": "layers"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sums, err := checksums(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ChecksumsFile), sums, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Sign(dir, private); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if err := Verify(release(t), public); err != nil {
		t.Fatalf("the signed release does not verify: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(dir string) error
		key    []byte
		want   string
	}{
		{"a file changed", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "image.tar"), []byte("other layers"), 0o644)
		}, public, "image.tar: sha256"},
		{"checksums.txt changed", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte("0000  image.tar\n"), 0o644)
		}, public, "is not a signature of checksums.txt"},
		{"another key", func(string) error { return nil }, otherPublic, "is not a signature of checksums.txt"},
		{"a file missing", func(dir string) error { return os.Remove(filepath.Join(dir, "install.yaml")) }, public, "names install.yaml"},
		{"no signature", func(dir string) error { return os.Remove(filepath.Join(dir, SignatureFile)) }, public, SignatureFile},
	} {
		dir := release(t)
		if err := tc.change(dir); err != nil {
			t.Fatal(err)
		}
		if err := Verify(dir, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if err := Sign(t.TempDir(), []byte("not a key")); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("Sign with a broken key: %v", err)
	}
}
