package fleet

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers each line with the same line, on 127.0.0.1.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip writes a line on c and reads the answer, giving up after timeout.
func roundTrip(c net.Conn, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("answer " + line)
	}
	return nil
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Cut ends open connections and fails new ones at once; Blackhole holds new ones silent;
// Restore forwards again.
func TestProxyCutBlackholeRestore(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	open := dial(t, p)
	if err := roundTrip(open, time.Second); err != nil {
		t.Fatalf("forwarding: %v", err)
	}

	p.Cut()
	if err := roundTrip(open, time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("open connection after Cut: %v, want it closed", err)
	}
	start := time.Now()
	if err := roundTrip(dial(t, p), time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("new connection while cut: %v, want it closed at once", err)
	} else if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("new connection while cut failed after %s, want at once", d)
	}

	p.Blackhole()
	if err := roundTrip(dial(t, p), 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("new connection while blackholed: %v, want a timeout", err)
	}

	p.Restore()
	if err := roundTrip(dial(t, p), time.Second); err != nil {
		t.Errorf("after Restore: %v", err)
	}
}
