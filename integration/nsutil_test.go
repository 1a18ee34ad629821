package integration

import (
	"net"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"
)

// listenIn opens a TCP listener inside namespace ns.
func listenIn(t *testing.T, ns netns.NsHandle, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread() // the thread is left in ns and dies with this goroutine
		if err := netns.Set(ns); err != nil {
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listening in namespace: %v", r.err)
	}
	return r.ln
}
