package integration

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	denns "github.com/den-dev/den/internal/netns"
)

// A link and namespace of this dend's range that no record owns (what a
// sandbox taken over by another node, or a dend killed half-way, leaves)
// holds the addresses of the slot the next sandbox gets: the create
// removes the leftover, says so in the log, and succeeds.
func TestCreateRemovesLeftoverOnItsSlot(t *testing.T) {
	d := startDend(t)
	p := netip.MustParsePrefix(d.subnet)
	const id = "leftoverzzzz"
	path := denns.Path(denns.Dir(d.runDir), p, id)
	if err := denns.AddAt(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { denns.DeleteAt(path) })
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	link := denns.LinkName(p, id)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: link}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(link); err == nil {
			netlink.LinkDel(l)
		}
	})
	// Slot 0's host address: the first sandbox's.
	host := p.Addr().Next()
	l, err := netlink.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: host.AsSlice(), Mask: net.CIDRMask(30, 32)}}); err != nil {
		t.Fatal(err)
	}

	d.create("fresh")
	if got := strings.TrimSpace(d.mustSh("fresh", "echo up")); got != "up" {
		t.Fatalf("fresh answers %q", got)
	}
	if _, err := netlink.LinkByName(link); err == nil {
		t.Errorf("the leftover link %s is still there", link)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("the leftover namespace %s is still there", path)
	}
	if !strings.Contains(d.logs(), "leftover="+id) {
		t.Errorf("dend's log does not say it removed the leftover network of %s:\n%s", id, d.logs())
	}
}

// A dend that finds a sandbox recorded on a node it cannot tell is
// another live member of its fleet (here: no fleet, as after the host was
// renamed) removes its network, never its files: they may be the only
// copy.
func TestRecoverKeepsFilesOfASandboxRecordedElsewhere(t *testing.T) {
	d := startDend(t)
	sb := d.create("mine")
	d.mustSh("mine", "echo precious > /root/f")
	d.stop()
	d.setSandboxRow(sb.ID, "node = ?", "old-hostname")
	d.start()
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID, "root", "f")); err != nil {
		t.Fatalf("the files of a sandbox recorded on another node are gone after dend started: %v", err)
	}
	d.noTraceOfNetwork(sb.ID)
	// Back on this node, it is this node's again, files and all.
	d.stop()
	d.setSandboxRow(sb.ID, "node = ?", sb.Node)
	d.start()
	d.mustDen("", "start", "mine")
	if got := d.mustSh("mine", "cat /root/f"); got != "precious\n" {
		t.Fatalf("mine's file once its record is this node's again: %q", got)
	}
}
