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
