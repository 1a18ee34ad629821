package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// Leftovers. A dend that comes back after another node took over its
// sandboxes, or died between two steps, finds on the host links,
// namespaces and rules of sandboxes that are no longer its: the sandbox
// service removes them when it starts (Sandboxes names them). A link
// left anyway holds the addresses of a slot the service hands out again,
// which Attach refuses: the service then asks whose it is (SlotHolders).

// Sandboxes returns the ids of the sandboxes this dend has a namespace
// or firewall rules of on the host.
func (m *Manager) Sandboxes(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	// Its own directory, and the one dends before it used (adopt moved
	// what it could from there at start; a hidden one may remain).
	for _, dir := range []string{m.dir, legacyDir} {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("listing network namespaces: %w", err)
		}
		for _, e := range ents {
			if id, ok := strings.CutPrefix(e.Name(), nsName(m.tag, "")); ok {
				add(id)
			}
		}
	}
	fw, err := m.fw.Sandboxes()
	if err != nil {
		return nil, err
	}
	for _, id := range fw {
		add(id)
	}
	return ids, nil
}

// SlotHolders returns the ids of the sandboxes of this dend whose links
// hold the addresses of slot, as their namespaces or rules tell: an
// Attach to slot refuses them (addrFree), and the sandbox service, which
// knows which sandbox each slot is, removes those that are leftovers.
func (m *Manager) SlotHolders(ctx context.Context, slot int) ([]string, error) {
	host, guest := m.Addr(slot)
	have, err := hostAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing host addresses: %w", err)
	}
	var links []string
	for _, h := range have {
		ip, ok := netip.AddrFromSlice(h.IP)
		if !ok || (ip.Unmap() != host && ip.Unmap() != guest) {
			continue
		}
		if l, err := netlink.LinkByIndex(h.LinkIndex); err == nil && m.isSandboxLink(l) {
			links = append(links, l.Attrs().Name)
		}
	}
	if len(links) == 0 {
		return nil, nil
	}
	ids, err := m.Sandboxes(ctx)
	if err != nil {
		return nil, err
	}
	var holders []string
	for _, id := range ids {
		if slices.Contains(links, linkName(m.tag, id)) {
			holders = append(holders, id)
		}
	}
	return holders, nil
}

// isSandboxLink reports whether l is the host end of a sandbox link of
// this dend: a veth named as Attach names them.
func (m *Manager) isSandboxLink(l netlink.Link) bool {
	prefix := linkName(m.tag, "")
	name := l.Attrs().Name
	return l.Type() == "veth" && strings.HasPrefix(name, prefix) && len(name) > len(prefix)
}
