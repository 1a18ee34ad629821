package integration

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/den-dev/den/internal/errdefs"
	denns "github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/netpolicy"
)

// A sandbox's namespace is routed through the host end of its link, the
// host reaches den-init's address in it, and Detach leaves no link or
// namespace behind. Traffic stays between the host and the namespace this
// test made.
func TestNetnsAttachDetach(t *testing.T) {
	m, err := denns.Open(context.Background(), denns.Config{
		Prefix:    "10.214.250.0/28",
		Dir:       filepath.Join(t.TempDir(), "netns"),
		Upstreams: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}, // never asked: no policy allows a name
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// The last /30 is den's: its first address is the resolver's.
	if m.Slots() != 3 {
		t.Fatalf("a /28 holds %d slots, want 3", m.Slots())
	}
	if got := m.ResolverAddr().String(); got != "10.214.250.13" {
		t.Fatalf("resolver address %s, want 10.214.250.13", got)
	}
	ctx := context.Background()
	id := "nstest" + time.Now().Format("150405")
	t.Cleanup(func() { m.Detach(ctx, id) })

	// Attach twice: the second replaces the first.
	for i := 0; i < 2; i++ {
		if _, err := m.Attach(ctx, id, 2, netpolicy.Policy{}); err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
	}
	att, err := m.Attach(ctx, id, 2, netpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if att.Host.String() != "10.214.250.9" || att.Guest.String() != "10.214.250.10" {
		t.Fatalf("slot 2 addresses: %s %s", att.Host, att.Guest)
	}

	// A listener inside the namespace answers the host.
	ns, err := netns.GetFromPath(att.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	var gw string
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			gw = r.Gw.String()
		}
	}
	if gw != att.Host.String() {
		t.Fatalf("the namespace's default route goes via %q, want the host end %s: %+v", gw, att.Host, routes)
	}
	// The host knows eth0's hardware address without asking (an ARP ask
	// unanswered while the sandbox boots costs a second).
	h, err = netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	eth0, err := h.LinkByName("eth0")
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	hostLink, err := netlink.LinkByName(m.LinkName(id))
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := netlink.NeighList(hostLink.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	known := false
	for _, n := range neighs {
		if n.IP.Equal(att.Guest.AsSlice()) && n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == eth0.Attrs().HardwareAddr.String() {
			known = true
		}
	}
	if !known {
		t.Fatalf("the host end has no permanent entry for %s at %s: %+v", att.Guest, eth0.Attrs().HardwareAddr, neighs)
	}
	ln := listenIn(t, ns, att.Guest.String()+":7777")
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", att.Guest.String()+":7777", 2*time.Second)
	if err != nil {
		t.Fatalf("host to namespace: %v", err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	ln.Close()
	if string(b) != "pong" {
		t.Fatalf("got %q", b)
	}

	if err := m.Detach(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := m.Detach(ctx, id); err != nil {
		t.Fatalf("second detach: %v", err)
	}
	if _, err := os.Stat(m.NsPath(id)); !os.IsNotExist(err) {
		t.Fatalf("namespace left: %v", err)
	}
	if _, err := netlink.LinkByName(m.LinkName(id)); err == nil {
		t.Fatalf("link left after detach")
	}
	if _, err := m.Attach(ctx, id, 3, netpolicy.Policy{}); err == nil {
		t.Fatalf("slot 3, den's own, accepted")
	}

	// A slot whose address another link already has is refused.
	if _, err := m.Attach(ctx, id, 1, netpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	other := id[:len(id)-1] + "x"
	t.Cleanup(func() { m.Detach(ctx, other) })
	if _, err := m.Attach(ctx, other, 1, netpolicy.Policy{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("attaching a second sandbox to a used slot: %v, want a conflict", err)
	}
	if _, err := os.Stat(m.NsPath(other)); !os.IsNotExist(err) {
		t.Fatalf("the refused attach left a namespace")
	}
}

// A Manager closed while sandboxes are attached keeps what they need
// (they outlive dend): den's table, its resolver's address, their links
// and namespaces. Closed with none attached, it leaves nothing: not even
// for a sandbox whose link went while its rules stayed (a dend killed
// between the two), nor its namespace directory's mount.
func TestNetnsCloseLeavesNothing(t *testing.T) {
	const prefix = "10.214.250.32/28"
	dir := filepath.Join(t.TempDir(), "netns")
	t.Cleanup(func() { unmountUnder(t, filepath.Dir(dir)); syscall.Unmount(dir, syscall.MNT_DETACH) })
	open := func() *denns.Manager {
		t.Helper()
		m, err := denns.Open(context.Background(), denns.Config{
			Prefix: prefix, Dir: dir, Upstreams: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx := context.Background()
	tag := time.Now().Format("150405")
	a, b := "ncla"+tag, "nclb"+tag
	m := open()
	t.Cleanup(func() { m.Detach(ctx, a); m.Detach(ctx, b); m.Close() })
	for i, id := range []string{a, b} {
		if _, err := m.Attach(ctx, id, i, netpolicy.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	present := func() (table, resolver bool) {
		table = exec.Command("nft", "list", "table", "inet", m.Table()).Run() == nil
		lo, _ := netlink.LinkByName("lo")
		addrs, _ := netlink.AddrList(lo, netlink.FAMILY_V4)
		for _, ad := range addrs {
			resolver = resolver || ad.IP.Equal(m.ResolverAddr().AsSlice())
		}
		return table, resolver
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if table, resolver := present(); !table || !resolver {
		t.Errorf("closed with sandboxes attached: table %v, resolver address %v; want both kept", table, resolver)
	}
	for _, id := range []string{a, b} {
		if _, err := netlink.LinkByName(m.LinkName(id)); err != nil {
			t.Errorf("closed with sandbox %s attached: its link: %v", id, err)
		}
		if _, err := os.Stat(m.NsPath(id)); err != nil {
			t.Errorf("closed with sandbox %s attached: its namespace: %v", id, err)
		}
	}

	m = open()
	if err := m.Detach(ctx, a); err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(m.LinkName(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if table, resolver := present(); table || resolver {
		t.Errorf("closed with no sandbox attached: table %v, resolver address %v; want neither", table, resolver)
	}
	if _, err := os.Stat(m.NsPath(b)); !os.IsNotExist(err) {
		t.Errorf("closed with no sandbox attached: %s's namespace: %v", b, err)
	}
	if isMounted(dir) {
		t.Errorf("closed with no sandbox attached: %s is still mounted", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("closed with no sandbox attached: %s: %v", dir, err)
	}
}
