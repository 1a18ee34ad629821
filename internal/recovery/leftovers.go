package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
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
// the first sandbox given its slot removes it (the core's clearSlot).

// hostSandboxes is a Network that can name the sandboxes it has anything
// of on this host (a namespace, a link or firewall rules), and those
// whose links hold the addresses of a slot.
type hostSandboxes interface {
	Sandboxes(ctx context.Context) ([]string, error)
	SlotHolders(ctx context.Context, slot int) ([]string, error)
}

// clearLeftovers removes what is on this host of sandboxes no record of
// this node owns: instances is what the engine listed (already removed
// when no record owned them), own the ids of this node's records.
func (r *Service) clearLeftovers(ctx context.Context, own map[string]bool, instances []string) {
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
	if n, ok := r.network.(hostSandboxes); ok {
		found, err := n.Sandboxes(ctx)
		if err != nil {
			r.log.Error("listing the sandbox networks on this host", "err", err)
		}
		for _, id := range found {
			add(id)
		}
	}
	for _, id := range r.sandboxVolumes() {
		add(id)
	}
	for _, id := range ids {
		r.clearLeftover(ctx, id)
	}
}

// clearLeftover removes what is here of sandbox id, which has no record
// of this node: its network always (its instance is gone), its files
// and checkpoint copies only when its record says they are garbage: it
// was removed, or a node of the fleet that is not lost has it now. Files
// with no record, or recorded on a node that is not in the fleet or is
// lost (this very host under another name, say), stay for an operator
// to settle: they may be the only copy.
func (r *Service) clearLeftover(ctx context.Context, id string) {
	sb, err := r.store.GetSandbox(ctx, id)
	files := false
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		r.log.Warn("removing the network of a sandbox with no record; its files, if any, stay", "sandbox_id", id)
		sb = nil
	case err != nil:
		r.log.Error("finding the record of a sandbox with leftovers on this host; left for the next start", "sandbox_id", id, "err", err)
		return
	case sb.State == sandbox.StateDestroyed:
		r.log.Warn("removing what is left on this host of a removed sandbox", "sandbox", sb.Name, "id", id)
		files = true
	case sb.Node == r.node:
		return // listed after this node's own records were read
	case r.fleet != nil && !r.fleet.Lost(ctx, sb.Node):
		r.log.Warn("removing what is left on this host of a sandbox another node took over", "sandbox", sb.Name, "id", id, "node", sb.Node)
		files = true
	default:
		r.log.Warn("removing the network of a sandbox recorded on another node, which is lost or not in the fleet; its files, if any, stay",
			"sandbox", sb.Name, "id", id, "node", sb.Node)
	}
	if err := r.network.Detach(ctx, id); err != nil {
		r.log.Error("removing the network of a sandbox that is not this node's", "sandbox_id", id, "err", err)
	}
	if !files {
		return
	}
	if err := r.volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		r.log.Error("removing the files of a sandbox that is not this node's", "sandbox", sb.Name, "err", err)
	}
	// Copies of its uploaded checkpoints: its node downloads what it
	// needs. One not uploaded has its only copy here, which the upload
	// worker sends and then drops (internal/fleet upload.go).
	cks, err := r.store.ListCheckpoints(ctx, id)
	if err != nil {
		r.log.Error("listing the checkpoints of a sandbox that is not this node's", "sandbox", sb.Name, "err", err)
		return
	}
	for _, ck := range cks {
		if ck.Location == sandbox.LocationUploaded && !r.svc.Pinned(ck.ID) {
			r.svc.DropCheckpointFiles(ctx, ck)
		}
	}
}

// sandboxVolumes lists the ids of the sandbox volumes in the pool. Names
// that start with "." are never volumes (the engine keeps files of its
// own there).
func (r *Service) sandboxVolumes() []string {
	dir := filepath.Dir(r.volumes.Path((&sandbox.Sandbox{ID: "x"}).VolumeKey()))
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		r.log.Error("listing sandbox volumes", "err", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	return ids
}
