// Package peers holds peering: a sandbox (NAME) sees a read-only view of
// another sandbox's files (OTHER), so one agent can read what another
// wrote without a disk they both write. It provides what a view is
// (Peer), the rules for adding one (ValidateMountPoint, Addable), finding
// one (Find), planning the views of a sandbox made from a checkpoint
// (Plan), the views' storage (Views), and where an instance's views
// are when it boots: its views directory and the views mounted one by
// one (BootDir, BootMounts), placed on the host before it boots (Place).
//
// A view is NAME's own read-only snapshot of OTHER's root filesystem (or
// of one of OTHER's checkpoints), taken when the peer is added or
// refreshed, or, for a live view, OTHER's root itself; either is mounted
// read-only into NAME at its mount point. OTHER is only read: nothing of
// NAME is written into it or its record, and OTHER's removal leaves
// NAME's snapshot views as they were.
//
// The engine fixes an instance's mounts when it boots, and restores a
// memory image only with the mounts it was taken with. So every sandbox
// boots with one mount of den's own at Root, its views directory, where
// den mounts and unmounts views on the host while it runs (place.go):
// views under Root change while it runs or is paused. A view elsewhere
// is there too, and den-init binds it onto its mount point inside the
// sandbox, so it changes while the sandbox runs (not while it is
// paused: den-init is frozen then). Sandboxes made before either keep
// their views fixed at boot: those change only while the sandbox has no
// instance, when stopped or, on request, by restarting it. The
// peers are in the sandbox's spec, so a hibernated sandbox wakes with
// the views it slept with, and checkpoints record them: a memory image
// restores only where the sandbox has peers at the same mount points.
// The view's bytes are not part of NAME's checkpoints.
//
// This package never imports internal/sandbox and keeps no state of its
// own: the views a sandbox has live in its spec, and internal/peering
// (the verbs, above the core) changes them under the sandbox's lock,
// checks its state, and records them through the core. It knows
// sandboxes only by id and name.
package peers

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// Peer is one read-only view a sandbox has of another's files.
type Peer struct {
	ID        string `json:"id"`         // the view's own id
	SandboxID string `json:"sandbox_id"` // OTHER
	// Sandbox is OTHER's name when the view was taken; it stays when
	// OTHER goes.
	Sandbox string `json:"sandbox"`
	// At is where the view appears inside the sandbox.
	At string `json:"at"`
	// Checkpoint is the checkpoint of OTHER the view shows; "" when it
	// shows OTHER's files as they were at TakenAt.
	Checkpoint string    `json:"checkpoint,omitempty"`
	TakenAt    time.Time `json:"taken_at"`
	// View is the storage key of the read-only snapshot mounted at At;
	// "" for a live view.
	View string `json:"view"`
	// Live views show OTHER's files as they are, not a snapshot: a
	// read-only mount of OTHER's root (place.go).
	Live bool `json:"live,omitempty"`
}

// Max is the most views one sandbox may have.
const Max = 8

// Root is where a view appears by default: Root/OTHER.
const Root = "/peers"

// reservedMounts are the mount points den itself uses: a view may not
// sit on one of them or under it.
var reservedMounts = []string{"/proc", "/dev", "/sys", "/.den", "/etc/resolv.conf", guest.SecretDir}

// ValidateMountPoint checks a view's mount point: an absolute, clean path
// with no "..", off den's own mounts.
func ValidateMountPoint(at string) error {
	hint := "use an absolute path such as /peers/NAME"
	switch {
	case at == "" || at[0] != '/':
		return errdefs.WithHint(errdefs.Invalid("mount point %q is not an absolute path", at), hint)
	case slices.Contains(strings.Split(at, "/"), ".."):
		return errdefs.WithHint(errdefs.Invalid("mount point %q contains \"..\"", at), hint)
	case path.Clean(at) != at:
		return errdefs.WithHint(errdefs.Invalid("mount point %q is not a clean path", at), "write it as "+path.Clean(at))
	case at == "/":
		return errdefs.WithHint(errdefs.Invalid("a view cannot be mounted over the root filesystem"), hint)
	case len(at) > 255 || strings.ContainsAny(at, "\x00\n,"):
		return errdefs.WithHint(errdefs.Invalid("mount point %q is too long or holds a comma, newline or NUL", at), hint)
	}
	if at == Root || under(at, Root+"/"+HiddenDir) {
		return errdefs.WithHint(errdefs.Invalid("mount point %q collides with den's own directory of views, %s", at, Root), hint)
	}
	for _, r := range reservedMounts {
		if under(at, r) || under(r, at) {
			return errdefs.WithHint(errdefs.Invalid("mount point %q collides with den's own mount %s", at, r), hint)
		}
	}
	return nil
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// ViewKey is the storage key of view peerID of sandbox sandboxID.
func ViewKey(sandboxID, peerID string) string { return "peers/" + sandboxID + "-" + peerID }

// Describe names what p shows, for events: OTHER, and its checkpoint
// when it shows one.
func Describe(p Peer) string {
	if p.Checkpoint != "" {
		return fmt.Sprintf("%s (checkpoint %s)", p.Sandbox, p.Checkpoint)
	}
	return p.Sandbox
}

// Find finds a view among peers, those of sandbox, by its id, its mount
// point, or OTHER's name or id when only one view shows OTHER.
func Find(sandbox string, peers []Peer, ref string) (*Peer, error) {
	var found []*Peer
	for i := range peers {
		p := &peers[i]
		if p.ID == ref || p.At == ref {
			return p, nil
		}
		if p.Sandbox == ref || p.SandboxID == ref {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, errdefs.WithHint(errdefs.NotFound("sandbox %q has no peer %q", sandbox, ref),
			fmt.Sprintf("list its peers with `den peer ls %s`", sandbox))
	}
	return nil, errdefs.WithHint(errdefs.Conflict("sandbox %q has %d views of %q", sandbox, len(found), ref),
		fmt.Sprintf("name one by its id or mount point, as `den peer ls %s` shows", sandbox))
}

// Addable checks that sandbox, whose views are peers, can take one more
// view at at.
func Addable(sandbox string, peers []Peer, at string) error {
	if len(peers) >= Max {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q has %d peers, the most it may have", sandbox, Max),
			fmt.Sprintf("remove one first with `den peer rm %s PEER`", sandbox))
	}
	for _, p := range peers {
		if under(at, p.At) || under(p.At, at) {
			return errdefs.WithHint(errdefs.Conflict("mount point %s collides with the view of %s at %s", at, p.Sandbox, p.At),
				"choose another mount point with --at")
		}
	}
	return nil
}

// Plan gives sandbox id, being made from a checkpoint taken with views
// peers, views of its own, each with an id from newID, and returns what
// each is to be copied from: the view the checkpoint's sandbox had then
// if kept says it is still there, else the one it has now (now) at the
// same mount point, whose record the new view takes. When a view has
// neither, Plan returns it as missing and nothing else. Nothing is
// copied: Views.Copy does, once the new sandbox's record names them.
func Plan(id string, peers, now []Peer, kept func(view string) bool, newID func() string) (plan []Peer, from []string, missing *Peer) {
	plan = slices.Clone(peers)
	from = make([]string, len(plan))
	for i := range plan {
		p := &plan[i]
		if p.Live {
			p.ID = newID() // shows OTHER itself, as it is: nothing to copy
			continue
		}
		from[i] = p.View
		if !kept(p.View) {
			j := slices.IndexFunc(now, func(q Peer) bool { return q.At == p.At })
			if j < 0 {
				return nil, nil, p
			}
			*p = now[j]
			from[i] = now[j].View
		}
		p.ID = newID()
		p.View = ViewKey(id, p.ID)
	}
	return plan, from, nil
}

// MountsDiffer says, when a memory image taken with views was cannot be
// restored into a sandbox with views is because they are mounted at
// different places, what differs; else "".
func MountsDiffer(was, is []Peer) string {
	at := func(ps []Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.At)
		}
		slices.Sort(out)
		return out
	}
	wasAt, isAt := at(was), at(is)
	if slices.Equal(wasAt, isAt) {
		return ""
	}
	show := func(a []string) string {
		if len(a) == 0 {
			return "none"
		}
		return strings.Join(a, ", ")
	}
	return fmt.Sprintf("it was taken with views at %s, and the sandbox has them at %s", show(wasAt), show(isAt))
}
