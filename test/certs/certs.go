// Package certs issues throwaway X.509 certificates for tests: a CA, server certificates for
// loopback addresses and names, and client certificates, all as PEM, valid for one hour.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority of its own.
type CA struct {
	// CertPEM is the CA's certificate, for a client's or a server's trust pool.
	CertPEM []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

// Pair is an issued certificate and its key, as PEM.
type Pair struct{ CertPEM, KeyPEM []byte }

// TLS is the pair as a tls.Certificate.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Pool is a trust pool holding only this CA.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// Server issues a server certificate for hosts (IP addresses or DNS names).
func (c *CA) Server(hosts ...string) (Pair, error) {
	tmpl := template(hosts[0])
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return c.issue(tmpl)
}

// Client issues a client certificate with common name cn.
func (c *CA) Client(cn string) (Pair, error) {
	tmpl := template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return c.issue(tmpl)
}

func (c *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// template is a certificate for cn valid from a minute ago for an hour, with a random serial.
func template(cn string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		serial = big.NewInt(time.Now().UnixNano())
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"schemagate tests"}},
		NotBefore:    now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
	}
}

// Mutual is a CA with a server certificate for one host and a client certificate, both of it:
// what a test needs to stand up a server that requires client certificates.
type Mutual struct {
	CA     *CA
	Server Pair
	Client Pair
}

// NewMutual issues a CA named ca, a server certificate for host and a client certificate for
// clientCN.
func NewMutual(ca, host, clientCN string) (*Mutual, error) {
	c, err := NewCA(ca)
	if err != nil {
		return nil, err
	}
	m := &Mutual{CA: c}
	if m.Server, err = c.Server(host); err != nil {
		return nil, err
	}
	if m.Client, err = c.Client(clientCN); err != nil {
		return nil, err
	}
	return m, nil
}

// ServerTLS is a server's TLS config that presents the server certificate and requires a client
// certificate of the CA.
func (m *Mutual) ServerTLS() (*tls.Config, error) {
	cert, err := m.Server.TLS()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: m.CA.Pool(), MinVersion: tls.VersionTLS12}, nil
}
