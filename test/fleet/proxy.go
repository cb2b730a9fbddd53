package fleet

import (
	"io"
	"net"
	"sync"
)

// proxyMode is what a Proxy does with connections.
type proxyMode int

const (
	forwarding proxyMode = iota
	// cut: open connections are closed, new ones accepted and closed at once (the client sees
	// EOF or a reset during the TLS handshake: a fast failure).
	cut
	// blackholed: open connections are closed, new ones accepted and held without a byte
	// forwarded (the client waits for its own timeout: a silent partition).
	blackholed
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one address (a region's kube-apiserver). The
// hub's kubeconfig for the region points at it, so that a test can partition the hub from the
// region without stopping anything. TLS passes through untouched: the API server's certificate
// is for 127.0.0.1, so it still verifies.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	mode  proxyMode
	conns map[net.Conn]struct{}
	done  bool
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every connection to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Cut closes every open connection and closes each new one as soon as it is accepted, until
// Restore: requests fail at once.
func (p *Proxy) Cut() { p.set(cut) }

// Blackhole closes every open connection and holds each new one without forwarding anything,
// until Restore (which closes them): requests hang until the client's timeout.
func (p *Proxy) Blackhole() { p.set(blackholed) }

// Restore forwards new connections again (connections held by Blackhole are closed).
func (p *Proxy) Restore() { p.set(forwarding) }

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	_ = p.l.Close()
}

func (p *Proxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m != p.mode || m != forwarding {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
	p.mode = m
}

// track records c as open unless the proxy is in another mode than want; it reports whether it
// did.
func (p *Proxy) track(want proxyMode, cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != want || p.done {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	switch mode {
	case cut:
		_ = c.Close()
		return
	case blackholed:
		if !p.track(blackholed, c) {
			_ = c.Close()
		}
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(forwarding, c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// One direction ended: end both, as a connection through a real network path would.
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.untrack(c, up)
}
