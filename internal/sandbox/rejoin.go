package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// What a dend finds on its host, when it starts, of sandboxes that are no
// longer this node's. A node declared lost whose sandboxes another node
// took over (`den recover --rollback`), or that died in the middle of a
// move after the target took the sandbox, comes back to their network
// link and namespace, firewall rules, files and checkpoint copies; a
// create that died before its record was written leaves files no record
// names. None of it is any sandbox's here: left, a link holds the
// address of a slot this node hands out again, and every later sandbox
// given that slot would fail to attach. Recover removes it all, after
// the engine instances no record owns; and should a link be left anyway,
// the first sandbox given its slot removes it (clearSlot).

// hostSandboxes is a Network that can name the sandboxes it has anything
// of on this host (a namespace, a link or firewall rules), and those
// whose links hold the addresses of a slot.
type hostSandboxes interface {
	Sandboxes(ctx context.Context) ([]string, error)
	SlotHolders(ctx context.Context, slot int) ([]string, error)
}

// clearSlot removes the network of every sandbox that holds sb's slot's
// addresses and that no record of this node owns: a leftover, since this
// node gives a slot to one sandbox at a time. It reports whether it
// removed any, for the attach to be tried again.
func (s *Service) clearSlot(ctx context.Context, sb *Sandbox) bool {
	n, ok := s.cfg.Network.(hostSandboxes)
	if !ok {
		return false
	}
	holders, err := n.SlotHolders(ctx, sb.Slot)
	if err != nil {
		s.log.Error("finding what holds a sandbox's address", "sandbox", sb.Name, "slot", sb.Slot, "err", err)
		return false
	}
	cleared := false
	for _, id := range holders {
		if id == sb.ID {
			continue
		}
		if other, err := s.cfg.Store.GetSandbox(ctx, id); err == nil && other.Node == s.cfg.Node && other.State != StateDestroyed {
			s.log.Error("two sandboxes of this node have one address slot", "sandbox", sb.Name, "other", other.Name, "slot", sb.Slot)
			continue
		} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Error("finding the record of a sandbox that holds another's address", "sandbox_id", id, "err", err)
			continue
		}
		s.log.Warn("removing the leftover network of a sandbox that is not this node's, which holds the address of the slot given to another",
			"leftover", id, "sandbox", sb.Name, "slot", sb.Slot)
		if err := s.cfg.Network.Detach(ctx, id); err != nil {
			s.log.Error("removing a leftover network", "sandbox_id", id, "err", err)
			continue
		}
		cleared = true
	}
	return cleared
}

// clearLeftovers removes what is on this host of sandboxes no record of
// this node owns: instances is what the engine listed (already removed
// when no record owned them), own the ids of this node's records.
func (s *Service) clearLeftovers(ctx context.Context, own map[string]bool, instances []string) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !own[id] && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, inst := range instances {
		id, _, _ := strings.Cut(inst, "-g")
		add(id)
	}
	if n, ok := s.cfg.Network.(hostSandboxes); ok {
		found, err := n.Sandboxes(ctx)
		if err != nil {
			s.log.Error("listing the sandbox networks on this host", "err", err)
		}
		for _, id := range found {
			add(id)
		}
	}
	for _, id := range s.sandboxVolumes() {
		add(id)
	}
	for _, id := range ids {
		s.clearLeftover(ctx, id)
	}
}

// clearLeftover removes what is here of sandbox id, which has no record
// of this node: its network always (its instance is gone), its files
// and checkpoint copies only when its record says they are garbage: it
// was removed, or a node of the fleet that is not lost has it now. Files
// with no record, or recorded on a node that is not in the fleet or is
// lost (this very host under another name, say), stay for an operator
// to settle: they may be the only copy.
func (s *Service) clearLeftover(ctx context.Context, id string) {
	sb, err := s.cfg.Store.GetSandbox(ctx, id)
	files := false
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		s.log.Warn("removing the network of a sandbox with no record; its files, if any, stay", "sandbox_id", id)
		sb = nil
	case err != nil:
		s.log.Error("finding the record of a sandbox with leftovers on this host; left for the next start", "sandbox_id", id, "err", err)
		return
	case sb.State == StateDestroyed:
		s.log.Warn("removing what is left on this host of a removed sandbox", "sandbox", sb.Name, "id", id)
		files = true
	case sb.Node == s.cfg.Node:
		return // listed after this node's own records were read
	case s.cfg.Fleet != nil && !s.cfg.Fleet.Lost(ctx, sb.Node):
		s.log.Warn("removing what is left on this host of a sandbox another node took over", "sandbox", sb.Name, "id", id, "node", sb.Node)
		files = true
	default:
		s.log.Warn("removing the network of a sandbox recorded on another node, which is lost or not in the fleet; its files, if any, stay",
			"sandbox", sb.Name, "id", id, "node", sb.Node)
	}
	if err := s.cfg.Network.Detach(ctx, id); err != nil {
		s.log.Error("removing the network of a sandbox that is not this node's", "sandbox_id", id, "err", err)
	}
	if !files {
		return
	}
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing the files of a sandbox that is not this node's", "sandbox", sb.Name, "err", err)
	}
	// Copies of its uploaded checkpoints: its node downloads what it
	// needs. One not uploaded has its only copy here, which the upload
	// worker sends and then drops (internal/fleet upload.go).
	cks, err := s.cfg.Store.ListCheckpoints(ctx, id)
	if err != nil {
		s.log.Error("listing the checkpoints of a sandbox that is not this node's", "sandbox", sb.Name, "err", err)
		return
	}
	for _, ck := range cks {
		if ck.Location == LocationUploaded && !s.isPinned(ck.ID) {
			s.dropCheckpointFiles(ctx, ck)
		}
	}
}

// sandboxVolumes lists the ids of the sandbox volumes in the pool. Names
// that start with "." are never volumes (the engine keeps files of its
// own there).
func (s *Service) sandboxVolumes() []string {
	dir := filepath.Dir(s.cfg.Volumes.Path((&Sandbox{ID: "x"}).VolumeKey()))
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		s.log.Error("listing sandbox volumes", "err", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	return ids
}
