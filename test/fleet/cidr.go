package fleet

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

var (
	cidrMu sync.Mutex
	// cidrsInUse are the pod CIDRs handed to this process's agents and not yet released.
	cidrsInUse = map[string]bool{}
)

// podCIDR returns a /20 of 127.128.0.0/9 that no other agent of this process holds (two agents
// with one range would hand out the same address and the second pod to bind it would fail). The
// pick is random so that other test processes on the host are unlikely to share it; the node
// agent also skips addresses a socket on the host is bound to.
func podCIDR() string {
	cidrMu.Lock()
	defer cidrMu.Unlock()
	for {
		c := fmt.Sprintf("127.%d.%d.0/20", 128+rand.IntN(128), 16*rand.IntN(16))
		if !cidrsInUse[c] {
			cidrsInUse[c] = true
			return c
		}
	}
}

func releaseCIDR(c string) {
	cidrMu.Lock()
	defer cidrMu.Unlock()
	delete(cidrsInUse, c)
}
