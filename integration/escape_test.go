package integration

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A sandbox, even with an open network policy, cannot reach the host's
// services (dend's TCP API, a server on the host end of its own link),
// a neighbour's den-init, the host's files through symlinks or "..", or
// host processes by signal. Everything it tries goes only to addresses of
// this machine that the test owns.
func TestSandboxCannotEscape(t *testing.T) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0") // a host service on every address, the link's host ends too
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var hostHits atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hostHits.Add(1)
			fmt.Fprintln(c, "host-service")
			c.Close()
		}
	}()
	hostPort := ln.Addr().(*net.TCPAddr).Port
	apiLn, _ := net.Listen("tcp4", "127.0.0.1:0")
	apiAddr := apiLn.Addr().String()
	apiLn.Close()
	d := startDend(t, "--listen", apiAddr)
	open := func(r *api.CreateSandboxRequest) { r.Network = &api.NetworkPolicy{Mode: api.NetworkOpen} }
	a := d.create("a", open)
	b := d.create("b", open)
	gw := hostEnd(t, a.Address)

	// The host end of its own link, dend's API port there, and the
	// neighbour's den-init: all dropped.
	for _, target := range []string{
		fmt.Sprintf("%s %d", gw, hostPort),
		fmt.Sprintf("%s %s", gw, apiAddr[strings.LastIndex(apiAddr, ":")+1:]),
		fmt.Sprintf("%s 49900", b.Address),
		fmt.Sprintf("%s 22", gw),
	} {
		if out, _, _ := d.sh("a", "echo | nc -w 2 "+target+" && echo CONNECTED"); strings.Contains(out, "CONNECTED") || strings.Contains(out, "host-service") {
			t.Errorf("sandbox a reached %s: %q", target, out)
		}
	}
	if n := hostHits.Load(); n != 0 {
		t.Errorf("the host service was reached %d times", n)
	}

	// Host files: a marker outside every sandbox is not there by its
	// path, through "..", or through a symlink, from inside or through
	// dend's file API.
	marker := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(marker, []byte("HOST-ONLY-CONTENT"), 0o644); err != nil {
		t.Fatal(err)
	}
	dots := strings.Repeat("../", 12) + strings.TrimPrefix(marker, "/")
	script := fmt.Sprintf(`cat %s; cat /tmp/%s; ln -sf %s /tmp/link; cat /tmp/link; ln -sfn / /tmp/root; cat /tmp/root/../..%s; cat /proc/1/root%s`,
		marker, dots, marker, marker, marker)
	if out, _, _ := d.sh("a", script+" 2>/dev/null; true"); strings.Contains(out, "HOST-ONLY") {
		t.Fatalf("a host file was read from inside: %q", out)
	}
	ctx := ctxT(t, time.Minute)
	for _, p := range []string{marker, "/tmp/link", "/tmp/root" + marker, "/" + dots} {
		rc, err := d.c.ReadFile(ctx, "a", p)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(b), "HOST-ONLY") {
			t.Fatalf("a host file was read through the file API at %s", p)
		}
	}
	// Writing through a symlink lands inside the sandbox, not on the host.
	d.mustSh("a", "ln -sf "+marker+" /tmp/wlink")
	if err := d.c.WriteFile(ctx, "a", "/tmp/wlink", 0o644, strings.NewReader("overwritten")); err == nil {
		if b, _ := os.ReadFile(marker); string(b) != "HOST-ONLY-CONTENT" {
			t.Fatalf("the host file was overwritten through a sandbox symlink: %q", b)
		}
	}

	// Host processes: dend's pid means nothing inside; killing every pid
	// the sandbox sees leaves dend and the neighbour alive.
	pid := d.cmd.Process.Pid
	d.sh("a", fmt.Sprintf("kill -9 %d 2>/dev/null; kill -9 -1 2>/dev/null; true", pid))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("dend is gone after the sandbox signalled: %v", err)
	}
	if got := d.mustSh("b", "echo alive"); got != "alive\n" {
		t.Fatalf("the neighbour after a's kill -1: %q", got)
	}
}

// hostEnd is the host end of a sandbox's /30 link: one below its address.
func hostEnd(t *testing.T, guest string) string {
	t.Helper()
	a, err := netip.ParseAddr(guest)
	if err != nil {
		t.Fatalf("sandbox address %q: %v", guest, err)
	}
	return a.Prev().String()
}
