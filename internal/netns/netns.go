// Package netns gives each sandbox its own network namespace, joined to the
// host by a veth pair on a private /30: the host end gets the first address,
// the sandbox's eth0 the second, where den-init listens. There is no route
// out of the namespace, so a sandbox reaches nothing but its host end.
package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// DefaultPrefix is the address range sandboxes get links in.
const DefaultPrefix = "10.213.0.0/16"

// nsDir is where named namespaces are bind-mounted (iproute2's place), so
// they outlive dend.
const nsDir = "/run/netns"

// Manager is the sandbox.Network over netlink.
type Manager struct {
	prefix netip.Prefix
	log    *slog.Logger
}

var _ sandbox.Network = (*Manager)(nil)

// New returns a Manager handing out /30 links from prefix.
func New(prefix string, log *slog.Logger) (*Manager, error) {
	p, err := netip.ParsePrefix(prefix)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return nil, errdefs.WithHint(errdefs.Invalid("invalid sandbox address range %q", prefix),
			"use an IPv4 prefix of /28 or wider that no host network uses, e.g. "+DefaultPrefix)
	}
	return &Manager{prefix: p.Masked(), log: log}, nil
}

// Slots is how many /30 links the range holds.
func (m *Manager) Slots() int { return 1 << (32 - m.prefix.Bits() - 2) }

// Addr returns the host and sandbox addresses of slot.
func (m *Manager) Addr(slot int) (host, guest netip.Addr) {
	base := m.prefix.Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(slot) * 4
	a := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return a(n + 1), a(n + 2)
}

// Names of a sandbox's namespace and host-side link. Interface names have
// at most 15 bytes.
func nsName(id string) string { return "den-" + id }
func linkName(id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	return "den" + id
}

// Path is where the sandbox's namespace is mounted.
func Path(id string) string { return filepath.Join(nsDir, nsName(id)) }

// Attach creates the namespace and link of a sandbox and addresses both
// ends. Whatever was left from an earlier attach is replaced: gVisor takes
// the addresses off the link when it starts, so each boot needs them anew.
func (m *Manager) Attach(ctx context.Context, id string, slot int) (att sandbox.Attachment, err error) {
	if slot < 0 || slot >= m.Slots() {
		return att, errdefs.Invalid("network slot %d outside the range's %d slots", slot, m.Slots())
	}
	if err := m.Detach(ctx, id); err != nil {
		return att, err
	}
	defer func() {
		if err != nil {
			m.Detach(context.WithoutCancel(ctx), id)
		}
	}()
	host, guest := m.Addr(slot)
	if err := addrFree(host, guest); err != nil {
		return att, err
	}
	ns, err := newNamed(nsName(id))
	if err != nil {
		return att, fmt.Errorf("creating network namespace: %w", err)
	}
	defer ns.Close()

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: linkName(id), MTU: 1500},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return att, fmt.Errorf("creating link %s: %w", veth.Name, err)
	}
	hostLink, err := netlink.LinkByName(veth.Name)
	if err != nil {
		return att, fmt.Errorf("finding link %s: %w", veth.Name, err)
	}
	if err := netlink.AddrAdd(hostLink, addr(host)); err != nil {
		return att, fmt.Errorf("addressing link %s: %w", veth.Name, err)
	}
	if err := netlink.LinkSetUp(hostLink); err != nil {
		return att, fmt.Errorf("raising link %s: %w", veth.Name, err)
	}

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return att, fmt.Errorf("opening namespace: %w", err)
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return att, fmt.Errorf("finding %s in namespace: %w", name, err)
		}
		if name == "eth0" {
			if err := h.AddrAdd(l, addr(guest)); err != nil {
				return att, fmt.Errorf("addressing eth0: %w", err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return att, fmt.Errorf("raising %s in namespace: %w", name, err)
		}
	}
	return sandbox.Attachment{Netns: Path(id), Host: host, Guest: guest}, nil
}

// addrFree refuses a slot whose addresses some host interface already
// has: traffic for the sandbox would go there instead.
func addrFree(addrs ...netip.Addr) error {
	have, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing host addresses: %w", err)
	}
	for _, h := range have {
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(h.IP); ok && ip.Unmap() == a {
				name := "another interface"
				if l, err := netlink.LinkByIndex(h.LinkIndex); err == nil {
					name = "interface " + l.Attrs().Name
				}
				return errdefs.WithHint(errdefs.Conflict("sandbox address %s is already in use on %s", a, name),
					"another dend or a leftover link uses this range: give this dend its own --subnet, or remove the link")
			}
		}
	}
	return nil
}

func addr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(30, 32)}}
}

// newNamed creates a network namespace mounted under nsDir without moving
// the calling goroutine's thread into it for longer than the call.
func newNamed(name string) (netns.NsHandle, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return 0, err
	}
	defer orig.Close()
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		return 0, err
	}
	ns, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		// The thread is stuck in the new namespace: never reuse it.
		runtime.LockOSThread()
		if err == nil {
			ns.Close()
		}
		return 0, fmt.Errorf("returning to the host namespace: %w", serr)
	}
	return ns, err
}

// Detach removes the link and the namespace. Missing parts are fine.
func (m *Manager) Detach(ctx context.Context, id string) error {
	if l, err := netlink.LinkByName(linkName(id)); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			return fmt.Errorf("removing link %s: %w", linkName(id), err)
		}
	}
	if err := netns.DeleteNamed(nsName(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing network namespace of %s: %w", id, err)
	}
	return nil
}

// Enforce installs a sandbox's network policy. Only mode none, where the
// namespace has no route out, is enforced so far.
func (m *Manager) Enforce(ctx context.Context, id string, slot int, p sandbox.NetworkPolicy) error {
	if p.Mode == "" || p.Mode == sandbox.NetworkNone {
		return nil
	}
	return errdefs.Unavailable("network mode %s is not available yet", p.Mode)
}
