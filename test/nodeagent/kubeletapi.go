package nodeagent

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// kubeletAPI is the part of the kubelet's HTTPS API the API server uses for `kubectl logs`:
// GET /containerLogs/{namespace}/{pod}/{container} (tailLines, limitBytes, previous). Every
// Node's kubelet endpoint is this one listener on 127.0.0.1. The API server does not verify
// kubelet certificates unless --kubelet-certificate-authority is set (the local cluster does
// not), and sends no client certificate without --kubelet-client-certificate, so the listener
// accepts any client; it is reachable from loopback only.
type kubeletAPI struct {
	port int
	srv  *http.Server
}

func startKubeletAPI(a *Agent) (*kubeletAPI, error) {
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(hostIP, "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		a.serveLogs(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	k := &kubeletAPI{port: l.Addr().(*net.TCPAddr).Port, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go k.srv.Serve(l) //nolint:errcheck // ends with close
	return k, nil
}

func (k *kubeletAPI) close() { _ = k.srv.Close() }

// serveLogs writes a container's log: the whole file, or its last tailLines lines, cut to
// limitBytes. follow is not supported (the log so far is returned).
func (a *Agent) serveLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path, err := a.LogPath(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), q.Get("previous") == "true")
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
		b = lastLines(b, n)
	}
	if n, err := strconv.Atoi(q.Get("limitBytes")); err == nil && n >= 0 && n < len(b) {
		b = b[:n]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(b)
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		if i == n-1 {
			return b[j+1:]
		}
		end = j
	}
	return b
}

func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "schemagate-nodeagent"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(hostIP)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
