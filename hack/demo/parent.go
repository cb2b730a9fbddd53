package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// parentDeath is what arranging to die with the parent found; main acts on it. It is set in init,
// which runs on the main thread: PR_SET_PDEATHSIG belongs to the calling thread, and the main
// thread lives as long as the process (a Go thread other than it may exit with a goroutine locked
// to it, taking the setting with it).
var parentDeath = dieWithParent()

// errParentGone: the process that started the demo exited before the demo could ask to be told.
var errParentGone = errors.New("the process that started the demo has exited")

// dieWithParent asks the kernel to send SIGTERM to the demo when its parent (make, a script, an
// IDE) dies, so that killing the parent by PID tears the cluster down as Ctrl-C does: main
// handles SIGTERM by cancelling the demo, and the deferred stops end the manager and the
// cluster's processes (which are killed with the demo in any case, see localcluster.Process).
//
// The parent may die between the start of the demo and the prctl call; no signal comes then, the
// demo has been reparented already (to init or to a subreaper). So compare the parent before
// and after: a different parent means it is gone. (Comparing with 1 instead would stop a demo
// whose parent really is PID 1, `make` as a container's command, and miss a subreaper.)
func dieWithParent() error {
	before := unix.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	if after := unix.Getppid(); after != before {
		return fmt.Errorf("%w (parent %d, now %d)", errParentGone, before, after)
	}
	return nil
}
