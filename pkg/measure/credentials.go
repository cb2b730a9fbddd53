package measure

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Secrets returns the data of the Secret name in the namespace of the RoutingService being
// measured. The controller passes one that reads by name past its cache; an error's message is
// shown as the measurement's (it must name the Secret, never hold a value).
type Secrets func(ctx context.Context, name string) (map[string][]byte, error)

// maxSecretValue bounds a header value read from a Secret, in bytes (the spec's own value is
// bounded at 4096 by the CRD).
const maxSecretValue = 4096

// header is one request header, its value resolved.
type header struct{ name, value string }

// credentials are what one measurement sends: its headers, and the TLS config of its https
// requests (nil: the shared transport's).
type credentials struct {
	headers []header
	tls     *tls.Config
	// tlsKey identifies the TLS material (a digest), so one transport serves every measurement
	// with the same CA, client certificate and server name.
	tlsKey [sha256.Size]byte
}

// resolve reads the Secrets a check's headers and tls name and expands the placeholders of the
// headers given inline. Its error says which Secret or key is missing or malformed; the
// measurement is an Error with it (a Secret can be created or fixed: the check tries again at its
// next interval).
func resolve(ctx context.Context, secrets Secrets, hs []routingv1alpha1.HTTPHeader, spec *routingv1alpha1.CheckTLS, vars map[string]string) (credentials, error) {
	var c credentials
	read := memo(secrets)
	for _, h := range hs {
		if h.ValueFrom == nil {
			c.headers = append(c.headers, header{h.Name, expand(h.Value, vars)})
			continue
		}
		ref := h.ValueFrom.SecretKeyRef
		v, err := read.key(ctx, ref.Name, ref.Key)
		if err != nil {
			return c, fmt.Errorf("header %s: %w", h.Name, err)
		}
		value, err := headerValue(v)
		if err != nil {
			return c, fmt.Errorf("header %s: Secret %s key %s: %w", h.Name, ref.Name, ref.Key, err)
		}
		c.headers = append(c.headers, header{h.Name, value})
	}
	if spec == nil {
		return c, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: spec.ServerName}
	digest := sha256.New()
	fmt.Fprintf(digest, "serverName=%q\n", spec.ServerName)
	if spec.CA != nil {
		pem, err := read.key(ctx, spec.CA.Name, spec.CA.Key)
		if err != nil {
			return c, fmt.Errorf("tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return c, fmt.Errorf("tls.ca: Secret %s key %s holds no PEM certificate", spec.CA.Name, spec.CA.Key)
		}
		cfg.RootCAs = pool
		fmt.Fprintf(digest, "ca=%x\n", sha256.Sum256(pem))
	}
	if name := spec.ClientCertificateSecretName; name != "" {
		crt, err := read.key(ctx, name, "tls.crt")
		if err != nil {
			return c, fmt.Errorf("tls.clientCertificateSecretName: %w", err)
		}
		key, err := read.key(ctx, name, "tls.key")
		if err != nil {
			return c, fmt.Errorf("tls.clientCertificateSecretName: %w", err)
		}
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			// The error of X509KeyPair names what is wrong (no PEM block, a key that does not
			// match), never the key's bytes.
			return c, fmt.Errorf("tls.clientCertificateSecretName: Secret %s: tls.crt and tls.key: %v", name, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		fmt.Fprintf(digest, "crt=%x\nkey=%x\n", sha256.Sum256(crt), sha256.Sum256(key))
	}
	c.tls = cfg
	copy(c.tlsKey[:], digest.Sum(nil))
	return c, nil
}

// headerValue is a Secret's bytes as a header value: one trailing newline (as `kubectl create
// secret --from-file` keeps it) is dropped; a value with other control characters, or longer
// than maxSecretValue, is refused rather than sent.
func headerValue(b []byte) (string, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if len(s) > maxSecretValue {
		return "", fmt.Errorf("the value is %d bytes, more than %d", len(s), maxSecretValue)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "", fmt.Errorf("the value holds a control character at byte %d, which no header value may", i)
		}
	}
	return s, nil
}

// secretMemo reads each Secret at most once per measurement.
type secretMemo struct {
	secrets Secrets
	data    map[string]map[string][]byte
}

func memo(s Secrets) *secretMemo {
	return &secretMemo{secrets: s, data: map[string]map[string][]byte{}}
}

func (m *secretMemo) key(ctx context.Context, name, key string) ([]byte, error) {
	data, ok := m.data[name]
	if !ok {
		if m.secrets == nil {
			return nil, SecretErrorf("Secret %s: this manager reads no Secrets for checks", name)
		}
		var err error
		if data, err = m.secrets(ctx, name); err != nil {
			return nil, err
		}
		m.data[name] = data
	}
	v, ok := data[key]
	if !ok {
		return nil, SecretErrorf("Secret %s has no key %s", name, key)
	}
	return v, nil
}

// SecretErrorf is an error about a Secret a check names, for its measurement's message. Its text
// starts with the kind, as Kubernetes messages do ("Secret edge/token not found").
func SecretErrorf(format string, args ...any) error {
	return secretError(fmt.Sprintf(format, args...))
}

type secretError string

func (e secretError) Error() string { return string(e) }
