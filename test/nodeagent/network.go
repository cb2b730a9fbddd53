package nodeagent

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
)

// hostIP is every process-backed Node's address and every pod's status.hostIP.
const hostIP = "127.0.0.1"

// DefaultPodCIDR is the loopback range pod addresses come from when Options.PodCIDR is empty.
const DefaultPodCIDR = "127.42.0.0/16"

// ipPool hands out one loopback address per pod. Addresses are taken in order and the search
// resumes after the last one handed out, so a released address is only reused after the whole
// range has gone round: an old pod's address is never given to a new pod while the old one holds
// it, and not soon after either. Addresses ending in .0 or .255 are skipped, and so are addresses
// some socket on the machine is bound to (other programs, other agents: the host is shared).
type ipPool struct {
	mu     sync.Mutex
	prefix netip.Prefix
	next   netip.Addr
	inUse  map[netip.Addr]string
}

func newIPPool(cidr string) (*ipPool, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || !netip.MustParsePrefix("127.0.0.0/8").Contains(prefix.Addr()) || prefix.Bits() < 8 {
		return nil, fmt.Errorf("pod CIDR %s is not inside 127.0.0.0/8", cidr)
	}
	if prefix.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %s is too small", cidr)
	}
	return &ipPool{prefix: prefix, next: prefix.Addr().Next(), inUse: map[netip.Addr]string{}}, nil
}

// allocate returns a free address for owner (a pod's namespace/name/uid).
func (p *ipPool) allocate(owner string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	busy := boundAddrs()
	a := p.next
	for range 1 << (32 - p.prefix.Bits()) {
		if !p.prefix.Contains(a) {
			a = p.prefix.Addr()
		}
		b := a.As4()
		_, taken := p.inUse[a]
		if b[3] != 0 && b[3] != 255 && a != p.prefix.Addr() && !taken && !busy[a] {
			p.inUse[a] = owner
			p.next = a.Next()
			return a.String(), nil
		}
		a = a.Next()
	}
	return "", fmt.Errorf("no free address in %s (%d in use)", p.prefix, len(p.inUse))
}

// release returns ip to the pool if owner holds it.
func (p *ipPool) release(ip, owner string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[a] == owner {
		delete(p.inUse, a)
	}
}

// boundAddrs lists the IPv4 addresses TCP and UDP sockets are bound to (from /proc/net).
func boundAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/udp"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			// "  0: 0100007F:1F90 00000000:0000 0A ...": the local address, little-endian hex.
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			host, _, ok := strings.Cut(fields[1], ":")
			b, err := hex.DecodeString(host)
			if !ok || err != nil || len(b) != 4 {
				continue
			}
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(b))
			out[netip.AddrFrom4(a)] = true
		}
		_ = file.Close()
	}
	return out
}
