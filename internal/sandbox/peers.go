package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// Peering: a sandbox (NAME) sees a read-only view of another sandbox's
// files (OTHER), so one agent can read what another wrote without a disk
// they both write.
//
// A view is NAME's own read-only snapshot of OTHER's root filesystem (or
// of one of OTHER's checkpoints), taken when the peer is added or
// refreshed, and bind-mounted read-only into NAME at its mount point.
// OTHER is only read: nothing of NAME is written into it or its record,
// and OTHER's removal leaves NAME's view as it was.
//
// The engine fixes an instance's mounts when it boots, and restores a
// memory image only with the mounts it was taken with. So a sandbox's
// peers change only while it has no instance: when stopped, or, on
// request, by restarting it (its processes end, its files stay). The
// peers are in the sandbox's spec, so a hibernated sandbox wakes with
// the views it slept with, and checkpoints record them: a memory image
// restores only where the sandbox has peers at the same mount points.
// The view's bytes are not part of NAME's checkpoints.

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
	// View is the storage key of the read-only snapshot mounted at At.
	View string `json:"view"`
}

// MaxPeers is the most views one sandbox may have.
const MaxPeers = 8

// PeerRoot is where a view appears by default: PeerRoot/OTHER.
const PeerRoot = "/peers"

// PeerParams is what a caller asks for when adding or refreshing a view.
type PeerParams struct {
	// Other is OTHER, by name or id, as the caller may see it.
	Other string
	// Checkpoint is a checkpoint of OTHER to show instead of its files
	// now; id or name.
	Checkpoint string
	// At is the mount point; default PeerRoot/OTHER.
	At string
	// Restart lets den restart a running or paused sandbox to apply the
	// change (its processes end, its files stay); without it only a
	// stopped sandbox's peers change.
	Restart bool
	// Reader is who reads OTHER: the owner identity of the caller ("":
	// none, no sandbox is readable), or AnyOwner for admins, who may read
	// every sandbox.
	Reader   string
	AnyOwner bool
}

// ViewMount is a read-only view mounted into an instance.
type ViewMount struct {
	Source      string // host path of the view
	Destination string // mount point inside
}

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

// viewKey is the storage key of a sandbox's view.
func viewKey(sandboxID, peerID string) string { return "peers/" + sandboxID + "-" + peerID }

// viewMounts are the views sb's instances mount.
func (s *Service) viewMounts(sb *Sandbox) []ViewMount {
	var ms []ViewMount
	for _, p := range sb.Spec.Peers {
		ms = append(ms, ViewMount{Source: s.cfg.Volumes.Path(p.View), Destination: p.At})
	}
	return ms
}

// Peers returns a sandbox's views.
func (s *Service) Peers(ctx context.Context, ref string) ([]Peer, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sb.Spec.Peers), nil
}

// readable finds OTHER as p's reader may see it: a sandbox of another
// owner is not found, in the words for one that does not exist.
func (s *Service) readable(ctx context.Context, p PeerParams) (*Sandbox, error) {
	var sb *Sandbox
	var err error
	switch {
	case p.AnyOwner:
		sb, err = s.Get(ctx, p.Other)
	case p.Reader == "":
		return nil, NotFound(p.Other) // "" owns only admins' sandboxes
	default:
		sb, err = s.GetOwned(ctx, p.Reader, p.Other)
	}
	if err == nil && sb.State == StateDestroyed {
		return nil, NotFound(p.Other)
	}
	return sb, err
}

// AddPeer gives sandbox ref a read-only view of OTHER's files at p.At.
func (s *Service) AddPeer(ctx context.Context, ref string, p PeerParams) (*Sandbox, *Peer, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	other, err := s.readable(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if other.ID == sb.ID {
		return nil, nil, errdefs.WithHint(errdefs.Invalid("sandbox %q cannot peer with itself", sb.Name),
			"its own files are at / already; name another sandbox")
	}
	if p.At == "" {
		p.At = PeerRoot + "/" + other.Name
	}
	if err := ValidateMountPoint(p.At); err != nil {
		return nil, nil, err
	}
	if err := s.checkPeerChange(sb, p.Restart, "add a peer to"); err != nil {
		return nil, nil, err
	}
	if err := addablePeer(sb, p.At); err != nil {
		return nil, nil, err
	}
	// OTHER is read before sb is locked, and never while it is: two
	// sandboxes peering with each other at once must not wait on each
	// other.
	peer := Peer{ID: newID(8), SandboxID: other.ID, Sandbox: other.Name, At: p.At}
	peer.View = viewKey(sb.ID, peer.ID)
	if err := s.takeView(ctx, sb, other.ID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	msg := fmt.Sprintf("peer %s added at %s", describePeer(peer), peer.At)
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, msg, func(sb *Sandbox) (string, error) {
		if err := addablePeer(sb, p.At); err != nil {
			return "", err
		}
		sb.Spec.Peers = append(sb.Spec.Peers, peer)
		return "", nil
	})
	if err != nil {
		s.dropView(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RefreshPeer takes view peer of sandbox ref again: OTHER's files as
// they are now, or the checkpoint p.Checkpoint of OTHER.
func (s *Service) RefreshPeer(ctx context.Context, ref, peerRef string, p PeerParams) (*Sandbox, *Peer, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	old, err := findPeer(sb, peerRef)
	if err != nil {
		return nil, nil, err
	}
	// The caller must still be allowed to read OTHER.
	p.Other = old.SandboxID
	if _, err := s.readable(ctx, p); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, nil, errdefs.WithHint(errdefs.NotFound("sandbox %q, which view %s shows, is gone", old.Sandbox, old.At),
				fmt.Sprintf("the view keeps what it showed; remove it with `den peer rm %s %s`", sb.Name, old.ID))
		}
		return nil, nil, err
	}
	if err := s.checkPeerChange(sb, p.Restart, "refresh a peer of"); err != nil {
		return nil, nil, err
	}
	peer := *old
	peer.ID = newID(8)
	peer.View = viewKey(sb.ID, peer.ID)
	if err := s.takeView(ctx, sb, old.SandboxID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	var dropped string
	msg := fmt.Sprintf("peer %s at %s refreshed", describePeer(peer), peer.At)
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, msg, func(sb *Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q changed meanwhile", old.At, sb.Name)
		}
		dropped = sb.Spec.Peers[i].View
		sb.Spec.Peers[i] = peer
		return dropped, nil
	})
	if err != nil {
		s.dropView(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RemovePeer takes view peerRef away from sandbox ref.
func (s *Service) RemovePeer(ctx context.Context, ref, peerRef string, restart bool) (*Sandbox, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	old, err := findPeer(sb, peerRef)
	if err != nil {
		return nil, err
	}
	if err := s.checkPeerChange(sb, restart, "remove a peer of"); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("peer %s at %s removed", describePeer(*old), old.At)
	return s.changePeers(ctx, sb.ID, restart, msg, func(sb *Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q was removed meanwhile", old.At, sb.Name)
		}
		dropped := sb.Spec.Peers[i].View
		sb.Spec.Peers = slices.Delete(sb.Spec.Peers, i, i+1)
		return dropped, nil
	})
}

func describePeer(p Peer) string {
	if p.Checkpoint != "" {
		return fmt.Sprintf("%s (checkpoint %s)", p.Sandbox, p.Checkpoint)
	}
	return p.Sandbox
}

// findPeer finds a view of sb by its id, its mount point, or OTHER's name
// or id when only one view shows OTHER.
func findPeer(sb *Sandbox, ref string) (*Peer, error) {
	var found []*Peer
	for i := range sb.Spec.Peers {
		p := &sb.Spec.Peers[i]
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
		return nil, errdefs.WithHint(errdefs.NotFound("sandbox %q has no peer %q", sb.Name, ref),
			fmt.Sprintf("list its peers with `den peer ls %s`", sb.Name))
	}
	return nil, errdefs.WithHint(errdefs.Conflict("sandbox %q has %d views of %q", sb.Name, len(found), ref),
		fmt.Sprintf("name one by its id or mount point, as `den peer ls %s` shows", sb.Name))
}

// addablePeer checks that sb can take one more view at at.
func addablePeer(sb *Sandbox, at string) error {
	if len(sb.Spec.Peers) >= MaxPeers {
		return errdefs.WithHint(errdefs.Conflict("sandbox %q has %d peers, the most it may have", sb.Name, MaxPeers),
			fmt.Sprintf("remove one first with `den peer rm %s PEER`", sb.Name))
	}
	for _, p := range sb.Spec.Peers {
		if under(at, p.At) || under(p.At, at) {
			return errdefs.WithHint(errdefs.Conflict("mount point %s collides with the view of %s at %s", at, p.Sandbox, p.At),
				"choose another mount point with --at")
		}
	}
	return nil
}

// checkPeerChange refuses, before anything is done, a change to sb's
// peers its state does not allow.
func (s *Service) checkPeerChange(sb *Sandbox, restart bool, action string) error {
	if err := s.elsewhere(sb); err != nil {
		return err
	}
	switch sb.State {
	case StateStopped:
		return nil
	case StateRunning, StatePaused:
		if restart {
			return nil
		}
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is %s: a view is mounted when it boots", action, sb.Name, sb.State),
			"pass --restart to restart it now (its processes end, its files stay), or stop it first with `den stop "+sb.Name+"`")
	case StateHibernated:
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is hibernated: its memory image needs the views it slept with", action, sb.Name),
			"resume it first with `den resume "+sb.Name+"`, then use --restart, or stop it")
	}
	return require(sb, action, StateStopped, StateRunning, StatePaused)
}

// takeView makes peer.View, a read-only snapshot of OTHER's files as they
// are now, or of its checkpoint ckRef, and fills in what it shows. OTHER
// is locked meanwhile, so no verb replaces its files under the snapshot;
// a running OTHER is synced first, as a checkpoint is.
func (s *Service) takeView(ctx context.Context, sb *Sandbox, otherID, ckRef string, peer *Peer) error {
	other, unlock, err := s.lockSandbox(ctx, otherID)
	if err != nil {
		return err
	}
	defer unlock()
	if other.Node != sb.Node {
		return errdefs.Conflict("sandbox %q is on node %s and %q on node %s: a view is taken where both are", other.Name, other.Node, sb.Name, sb.Node)
	}
	peer.Sandbox = other.Name
	peer.TakenAt = s.cfg.Now().UTC()
	peer.Checkpoint = ""
	if ckRef != "" {
		ck, err := s.findCheckpoint(ctx, other, ckRef)
		if err != nil {
			return err
		}
		defer s.pin(ck.ID)()
		if err := s.ensureLocal(ctx, ck); err != nil {
			return err
		}
		if _, err := s.cfg.Volumes.Snapshot(ctx, ck.VolumeKey(), peer.View, true); err != nil {
			return fmt.Errorf("taking the view of checkpoint %s of %q: %w", ck.ID, other.Name, err)
		}
		peer.Checkpoint = ck.ID
		return nil
	}
	switch other.State {
	case StateRunning:
		if err := s.guestFor(other).Sync(ctx); err != nil {
			return fmt.Errorf("flushing the files of sandbox %q: %w", other.Name, err)
		}
	case StatePaused, StateHibernated, StateStopped, StateError:
	default:
		return require(other, "take a view of", StateRunning, StatePaused, StateHibernated, StateStopped)
	}
	if _, err := s.cfg.Volumes.Snapshot(ctx, other.VolumeKey(), peer.View, true); err != nil {
		return fmt.Errorf("taking the view of %q: %w", other.Name, err)
	}
	return nil
}

// changePeers applies change to sandbox id's peers under its lock: a
// stopped sandbox's record only, a running or paused one's by stopping
// it, recording the change and booting it again when restart allows.
// change returns the view it let go, which is removed once the new
// record is written.
func (s *Service) changePeers(ctx context.Context, id string, restart bool, msg string, change func(*Sandbox) (string, error)) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.checkPeerChange(sb, restart, "change the peers of"); err != nil {
		return nil, err
	}
	// Checked before the instance goes: a change that cannot be made
	// leaves the sandbox as it was.
	probe := *sb
	probe.Spec.Peers = slices.Clone(sb.Spec.Peers)
	if _, err := change(&probe); err != nil {
		return nil, err
	}
	boot := sb.State != StateStopped
	if boot {
		if err := s.stopLocked(ctx, sb, "stopping to change its peers"); err != nil {
			return nil, err
		}
	}
	dropped, err := change(sb)
	if err != nil {
		return nil, err
	}
	if err := s.record(ctx, sb, EventPeers, msg); err != nil {
		return nil, err
	}
	if dropped != "" {
		s.dropView(context.WithoutCancel(ctx), dropped)
	}
	if boot {
		if err := s.startLocked(ctx, sb); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// dropView removes a view's snapshot; one already gone is no error.
func (s *Service) dropView(ctx context.Context, key string) {
	if err := s.cfg.Volumes.Remove(ctx, key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing a peer view", "view", key, "err", err)
	}
}

// dropViews removes every view of sb: it is being destroyed.
func (s *Service) dropViews(ctx context.Context, sb *Sandbox) {
	for _, p := range sb.Spec.Peers {
		s.dropView(ctx, p.View)
	}
}

// planViews gives a sandbox being made from ck, whose spec is spec and
// id is id, views of its own of the peers ck was taken with, and returns
// what each is to be copied from: the views of ck's sandbox it had then
// if they are still there, else those it has now at the same mount
// points (its memory image needs views at the same places). Nothing is
// copied yet: makeViews does, once the new sandbox's record names them,
// so an undo removes its views and never its origin's.
func (s *Service) planViews(ctx context.Context, id string, spec *Spec, ck *Checkpoint) ([]string, error) {
	if len(spec.Peers) == 0 {
		return nil, nil
	}
	var now []Peer
	if src, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID); err == nil && src.State != StateDestroyed {
		now = src.Spec.Peers
	}
	peers := slices.Clone(spec.Peers)
	from := make([]string, len(peers))
	for i := range peers {
		p := &peers[i]
		from[i] = p.View
		if _, err := s.cfg.Volumes.Stat(ctx, p.View); err != nil {
			j := slices.IndexFunc(now, func(q Peer) bool { return q.At == p.At })
			if j < 0 {
				return nil, errdefs.WithHint(errdefs.Conflict("checkpoint %s was taken with a view of %s at %s, which is gone", ck.ID, p.Sandbox, p.At),
					"its files alone can be booted: take a files-only checkpoint of a sandbox without that peer")
			}
			*p = now[j]
			from[i] = now[j].View
		}
		p.ID = newID(8)
		p.View = viewKey(id, p.ID)
	}
	spec.Peers = peers
	return from, nil
}

// makeViews copies the views planViews planned for sb.
func (s *Service) makeViews(ctx context.Context, sb *Sandbox, from []string) error {
	for i, p := range sb.Spec.Peers {
		if _, err := s.cfg.Volumes.Snapshot(ctx, from[i], p.View, true); err != nil {
			return fmt.Errorf("copying the view at %s: %w", p.At, err)
		}
	}
	return nil
}

// peersDiffer says, when ck's memory image cannot be restored into sb
// because their peers are mounted at different places, what differs;
// else "".
func peersDiffer(ck *Checkpoint, sb *Sandbox) string {
	at := func(ps []Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.At)
		}
		slices.Sort(out)
		return out
	}
	was, is := at(ck.Manifest.Spec.Peers), at(sb.Spec.Peers)
	if slices.Equal(was, is) {
		return ""
	}
	show := func(a []string) string {
		if len(a) == 0 {
			return "none"
		}
		return strings.Join(a, ", ")
	}
	return fmt.Sprintf("it was taken with views at %s, and the sandbox has them at %s", show(was), show(is))
}
