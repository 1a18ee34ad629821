package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	denns "github.com/den-dev/den/internal/netns"
)

// rawNet gives raw containers the network den gives its sandboxes: a
// network namespace of their own holding one end of a veth pair with an
// address and a default route, made fresh before every boot or restore,
// as den attaches a sandbox before each. runsc moves the address into
// the sandbox's network stack on each of them, which costs a restore some
// 10 ms; a container without a link skips that. The other ends sit in a
// namespace of the benchmark's, so nothing is added to the host's own
// network, and no packet is ever sent.
type rawNet struct {
	prefix string // names of the benchmark's namespaces
	peer   string // the namespace holding the other ends
	made   bool
	links  int // veth pairs made: each has a name of its own, since a
	// deleted namespace's pair goes only some time after
}

func newRawNet() *rawNet {
	p := "denbench-" + strconv.Itoa(os.Getpid())
	return &rawNet{prefix: p, peer: p + "-peer"}
}

// path is where container id's namespace is mounted, for its spec.
func (n *rawNet) path(id string) string { return denns.NamedPath(n.name(id)) }

func (n *rawNet) name(id string) string { return n.prefix + "-" + id }

// attach makes container id's namespace anew, with a veth end addressed
// in the documentation range (TEST-NET-2). Every container has the same
// address: each is alone in its namespace, and the other ends have none.
func (n *rawNet) attach(id string) error {
	if !n.made {
		if _, err := denns.AddNamed(n.peer); err != nil {
			return err
		}
		n.made = true
	}
	ns := n.name(id)
	if err := denns.DeleteNamed(ns); err != nil { // the one before, with its veth pair
		return err
	}
	if _, err := denns.AddNamed(ns); err != nil {
		return err
	}
	n.links++
	peerEnd := "rb" + strconv.Itoa(n.links)
	// iproute2 takes a namespace's path where it takes its name; `ip -n`
	// takes only names in /run/netns, so ipIn runs ip in it with nsenter.
	peer, own := denns.NamedPath(n.peer), n.path(id)
	if err := ip("link", "add", peerEnd, "netns", peer, "type", "veth", "peer", "name", "eth0", "netns", own); err != nil {
		return err
	}
	for _, args := range [][]string{
		{peer, "link", "set", peerEnd, "up"},
		{own, "link", "set", "lo", "up"},
		{own, "addr", "add", "198.51.100.2/30", "dev", "eth0"},
		{own, "link", "set", "eth0", "up"},
		{own, "route", "add", "default", "via", "198.51.100.1"},
	} {
		if err := ipIn(args[0], args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// close removes every namespace the benchmark made.
func (n *rawNet) close() {
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(n.path("")), n.prefix+"-*"))
	for _, path := range names {
		denns.DeleteNamed(filepath.Base(path))
	}
}

// ipIn runs ip with args in the network namespace at path.
func ipIn(path string, args ...string) error {
	cmd := exec.Command("nsenter", append([]string{"--net=" + path, "ip"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s in %s: %v: %s", strings.Join(args, " "), path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
