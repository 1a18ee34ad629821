package checkpointgc

import (
	"context"
	"os"
	"time"

	"github.com/den-dev/den/internal/sandbox"
)

// What a fleet with a blob store changes: each sandbox's last upload is
// kept, and memory images sent ahead of a hand-over are dropped once it
// is clear it will not happen.

// isLastUpload reports whether ck is its sandbox's newest uploaded
// checkpoint (see lastUploads).
func (c *Collector) isLastUpload(ctx context.Context, ck *sandbox.Checkpoint) bool {
	if ck.Location != sandbox.LocationUploaded {
		return false
	}
	cks, err := c.store.ListCheckpoints(ctx, ck.SandboxID)
	if err != nil {
		return true // keep it: the next collection looks again
	}
	return c.lastUploads(cks)[ck.ID]
}

// lastUploads names, of cks (oldest first), each sandbox's newest
// uploaded checkpoint. In a fleet with a blob store garbage collection
// keeps it, whatever its kind, until a newer one is uploaded: it is what
// another node brings the sandbox back from when this one is lost, and a
// sandbox that moved woke from one (a hibernation's) that nothing else
// needs once it runs.
func (c *Collector) lastUploads(cks []*sandbox.Checkpoint) map[string]bool {
	if !c.svc.Movable() {
		return nil
	}
	newest := map[string]string{}
	for _, ck := range cks {
		if ck.Location == sandbox.LocationUploaded {
			newest[ck.SandboxID] = ck.ID
		}
	}
	kept := make(map[string]bool, len(newest))
	for _, id := range newest {
		kept[id] = true
	}
	return kept
}

// hasAnyLocal reports whether anything of ck's copy is on this host: its
// file snapshot or its memory image.
func (c *Collector) hasAnyLocal(ck *sandbox.Checkpoint) bool {
	if _, err := os.Stat(c.volumes.Path(ck.VolumeKey())); err == nil {
		return true
	}
	_, err := os.Stat(c.svc.MemoryDir(ck.ID))
	return err == nil
}

// handoverGrace is how long a memory image another node sent ahead of a
// hand-over waits for it (see internal/fleet's ReceiveAhead).
const handoverGrace = 10 * time.Minute

// dropStaleHandover removes the memory image of ck, a checkpoint of a
// sandbox on another node, that was sent here for a hand-over that did
// not happen: the sandbox stayed where it was, or went elsewhere. Only an
// uploaded checkpoint's: this node's copy of one not yet uploaded, of a
// sandbox that moved away, waits for its upload.
func (c *Collector) dropStaleHandover(ctx context.Context, ck *sandbox.Checkpoint) {
	if ck.Location != sandbox.LocationUploaded || c.svc.Pinned(ck.ID) {
		return
	}
	owner, err := c.store.GetSandbox(ctx, ck.SandboxID)
	if err != nil || owner.Node == c.node {
		return
	}
	dir := c.svc.MemoryDir(ck.ID)
	fi, err := os.Stat(dir)
	if err != nil || c.svc.Now().Sub(fi.ModTime()) < handoverGrace {
		return
	}
	c.log.Info("removing a memory image sent for a hand-over that did not happen", "checkpoint", ck.ID, "sandbox", owner.Name, "node", owner.Node)
	if err := os.RemoveAll(dir); err != nil {
		c.log.Error("removing a memory image", "checkpoint", ck.ID, "err", err)
	}
}
