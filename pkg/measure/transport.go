package measure

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// httpClient is the one client every http and prometheus measurement of this Taker sends with. It
// is built once: one transport, so connections to a check's server are kept alive and reused
// between measurements instead of a new transport per measurement, each leaving its idle
// connections (and their goroutines) behind until IdleConnTimeout (90 s in http.DefaultTransport)
// closes them.
//
// A redirect is followed only to the same scheme, host and port as the request it answers (at
// most 10, as net/http does): a check measures the server its author named, never one a redirect
// points to. A redirect elsewhere is not followed: the measurement judges the 3xx answer itself
// (an http check fails unless it expects that status; Prometheus never redirects).
//
// Every response body is cut at MaxBody bytes: reading past that fails with errBodyTooLarge
// (Prometheus' client reads the whole body, so the bound is in the transport).
func (t *Taker) httpClient() *http.Client {
	t.clientOnce.Do(func() {
		tr := t.Transport
		if tr == nil {
			tr = http.DefaultTransport.(*http.Transport).Clone()
		}
		t.shared = &http.Client{Transport: boundedBodies{tr}, CheckRedirect: sameHostRedirects}
	})
	return t.shared
}

// maxTLSTransports bounds the transports kept for checks with a tls of their own; past it, all
// are closed and built again as measurements need them.
const maxTLSTransports = 32

// clientFor is the client of a measurement with credentials c: the shared one, or, when c has a
// TLS config, one whose transport is a clone of the shared transport with that config, kept per
// TLS material so its connections are reused. Its error is Fatal: the manager's transport is not
// an *http.Transport (only a test injects such a one).
func (t *Taker) clientFor(c credentials) (*http.Client, error) {
	shared := t.httpClient()
	if c.tls == nil {
		return shared, nil
	}
	t.tlsMu.Lock()
	defer t.tlsMu.Unlock()
	if cl, ok := t.tlsClients[c.tlsKey]; ok {
		return cl, nil
	}
	base, ok := t.Transport.(*http.Transport)
	if t.Transport == nil {
		base, ok = http.DefaultTransport.(*http.Transport), true
	}
	if !ok {
		return nil, fmt.Errorf("the manager's transport (%T) takes no TLS config of a check's own", t.Transport)
	}
	if len(t.tlsClients) >= maxTLSTransports {
		for _, cl := range t.tlsClients {
			cl.CloseIdleConnections()
		}
		clear(t.tlsClients)
	}
	tr := base.Clone()
	tr.TLSClientConfig = c.tls
	cl := &http.Client{Transport: boundedBodies{tr}, CheckRedirect: sameHostRedirects}
	if t.tlsClients == nil {
		t.tlsClients = map[[32]byte]*http.Client{}
	}
	t.tlsClients[c.tlsKey] = cl
	return cl, nil
}

// withHeaders is a RoundTripper that sets headers on each request (the Prometheus client builds
// its requests itself).
type withHeaders struct {
	next    http.RoundTripper
	headers []header
}

func (w withHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for _, h := range w.headers {
		req.Header.Set(h.name, h.value)
	}
	return w.next.RoundTrip(req)
}

// sameHostRedirects is an http.Client's CheckRedirect: only to the first request's scheme and
// host:port, and at most 10 times.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// errBodyTooLarge is what reading a response body past MaxBody returns.
var errBodyTooLarge = fmt.Errorf("the response body is larger than %d bytes", MaxBody)

// boundedBodies is a RoundTripper whose response bodies fail with errBodyTooLarge past MaxBody.
type boundedBodies struct{ next http.RoundTripper }

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &boundedBody{rc: resp.Body, left: MaxBody}
	return resp, nil
}

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly MaxBody from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
