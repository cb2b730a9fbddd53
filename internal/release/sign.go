package release

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/elliptic"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// SignatureFile is the signature of ChecksumsFile, in the format of `cosign sign-blob --key`: the
// base64 of an ECDSA (P-256, SHA-256) signature in ASN.1 DER. Since ChecksumsFile holds the sha256
// of every other file (the image archive, the installers, the chart, the plugin archives), it
// signs them all: `cosign verify-blob --key schemagate.pub --signature checksums.txt.sig
// --insecure-ignore-tlog checksums.txt`, then `sha256sum -c checksums.txt`, or Verify.
const SignatureFile = ChecksumsFile + ".sig"

// Sign writes SignatureFile into dir, signing its ChecksumsFile with the private key in keyPEM
// (PEM: PKCS#8, or SEC 1 "EC PRIVATE KEY"; not encrypted). Signing uses
// github.com/sigstore/sigstore's signer, the one cosign uses. Errors: the key does not parse, or
// a file cannot be read or written.
func Sign(dir string, keyPEM []byte) error {
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(keyPEM, cryptoutils.SkipPassword)
	if err != nil {
		return fmt.Errorf("reading the signing key: %w", err)
	}
	signer, err := signature.LoadSigner(key, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("loading the signing key: %w", err)
	}
	sums, err := os.ReadFile(filepath.Join(dir, ChecksumsFile))
	if err != nil {
		return err
	}
	sig, err := signer.SignMessage(bytes.NewReader(sums))
	if err != nil {
		return fmt.Errorf("signing %s: %w", ChecksumsFile, err)
	}
	return os.WriteFile(filepath.Join(dir, SignatureFile), []byte(base64.StdEncoding.EncodeToString(sig)), 0o644)
}

// NewKeyPair returns a fresh signing key pair for Sign and Verify: an ECDSA P-256 private key
// (PEM "PRIVATE KEY", PKCS#8, not encrypted: keep it in a secret store) and its public key (PEM
// "PUBLIC KEY", to publish), made by github.com/sigstore/sigstore as cosign's are.
func NewKeyPair() (private, public []byte, err error) {
	return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
}

// Verify checks a downloaded release in dir: SignatureFile is a signature of ChecksumsFile by the
// public key in pubPEM (PEM "PUBLIC KEY"), and every file ChecksumsFile names has that sha256.
// Errors name what failed: the signature, or the first file whose sum differs or is missing.
func Verify(dir string, pubPEM []byte) error {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return fmt.Errorf("reading the public key: %w", err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("loading the public key: %w", err)
	}
	sums, err := os.ReadFile(filepath.Join(dir, ChecksumsFile))
	if err != nil {
		return err
	}
	encoded, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(encoded)))
	if err != nil {
		return fmt.Errorf("%s is not base64: %w", SignatureFile, err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(sums)); err != nil {
		return fmt.Errorf("%s is not a signature of %s by that key: %w", SignatureFile, ChecksumsFile, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		want, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || name == "" || strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("%s: line %q is not \"<sha256>  <file>\"", ChecksumsFile, sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%s names %s: %w", ChecksumsFile, name, err)
		}
		if got := sha256Hex(data); got != want {
			return fmt.Errorf("%s: sha256 %s, %s says %s", name, got, ChecksumsFile, want)
		}
	}
	return sc.Err()
}
