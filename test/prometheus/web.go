package prometheus

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// writeWebConfig writes w's certificates and web.yml into the server's directory, sets the
// server's scheme and client, and returns the --web.config.file flag.
func (s *Server) writeWebConfig(w *WebSecurity) (string, error) {
	if len(w.CertPEM) == 0 || len(w.KeyPEM) == 0 || len(w.CAPEM) == 0 {
		return "", errors.New("prometheus: Web needs CertPEM, KeyPEM and CAPEM")
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(s.dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return "", fmt.Errorf("prometheus: writing %s: %w", name, err)
		}
		return p, nil
	}
	var b strings.Builder
	crt, err := write("web.crt", w.CertPEM)
	if err != nil {
		return "", err
	}
	key, err := write("web.key", w.KeyPEM)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "tls_server_config:\n  cert_file: %s\n  key_file: %s\n", q(crt), q(key))
	tlsCfg := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	if !tlsCfg.RootCAs.AppendCertsFromPEM(w.CAPEM) {
		return "", errors.New("prometheus: Web.CAPEM holds no certificate")
	}
	if len(w.ClientCAPEM) > 0 {
		ca, err := write("web-client-ca.crt", w.ClientCAPEM)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\n", q(ca))
		pair, err := tls.X509KeyPair(w.ClientCertPEM, w.ClientKeyPEM)
		if err != nil {
			return "", fmt.Errorf("prometheus: Web's client pair: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	var user, password string
	if len(w.Users) > 0 {
		names := make([]string, 0, len(w.Users))
		for u := range w.Users {
			names = append(names, u)
		}
		sort.Strings(names)
		user, password = names[0], w.Users[names[0]]
		b.WriteString("basic_auth_users:\n")
		for _, u := range names {
			// The lowest cost bcrypt allows: the hash is checked on every request.
			h, err := bcrypt.GenerateFromPassword([]byte(w.Users[u]), bcrypt.MinCost)
			if err != nil {
				return "", fmt.Errorf("prometheus: hashing %s's password: %w", u, err)
			}
			fmt.Fprintf(&b, "  %s: %s\n", q(u), q(string(h)))
		}
	}
	path, err := write("web.yml", []byte(b.String()))
	if err != nil {
		return "", err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	s.scheme = "https"
	s.client = &http.Client{Transport: basicAuth{tr, user, password}}
	return "--web.config.file=" + path, nil
}

// basicAuth sets the basic auth of each request when user is not empty.
type basicAuth struct {
	next           http.RoundTripper
	user, password string
}

func (b basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.user != "" {
		req = req.Clone(req.Context())
		req.SetBasicAuth(b.user, b.password)
	}
	return b.next.RoundTrip(req)
}
