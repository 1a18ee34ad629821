package fleet

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Sending ahead. A node handing a sandbox over (giveAway) uploads the
// checkpoint it sleeps in, and the target would then download it: two
// transfers of every byte, one after the other. So while it uploads, the
// node also streams the checkpoint's files and memory image straight to
// the target, which keeps them: adopting the sandbox then finds them
// there. The blob store's copy is still the one the hand-over waits for;
// whatever did not arrive whole is downloaded from it as before.

// Parts of a checkpoint a node sends ahead.
const (
	HandoverMemory = "memory" // the memory image, as SendDir writes it
	HandoverFiles  = "files"  // the files, as SendVolume writes them
)

// Handover names what a node sends ahead to the one it hands a sandbox
// over to.
type Handover struct {
	Sandbox    string // its id
	Checkpoint string // the checkpoint it is handed over in
	Part       string // HandoverMemory or HandoverFiles
	// Base is, for the files, the read-only volume the stream is a diff
	// from ("" for whole): the target must have it.
	Base string
}

// sendAhead starts sending the parts of ck the target of p needs, and
// returns what waits for them to end.
func (n *Node) sendAhead(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint, p MoveParams) (wait func()) {
	var wg sync.WaitGroup
	send := func(h Handover, write func(w io.Writer) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.peers.SendAhead(ctx, p.To, h, write); err != nil {
				n.log.Warn("sending a checkpoint straight to the node a sandbox moves to; it downloads it instead",
					"sandbox", sb.Name, "to", p.To, "part", h.Part, "err", err)
			}
		}()
	}
	base := n.aheadBase(ctx, ck)
	send(Handover{Sandbox: sb.ID, Checkpoint: ck.ID, Part: HandoverFiles, Base: base}, func(w io.Writer) error {
		return n.blobs.offsite.SendVolume(ctx, ck.VolumeKey(), base, w)
	})
	if !p.Cold && ck.Memory {
		send(Handover{Sandbox: sb.ID, Checkpoint: ck.ID, Part: HandoverMemory}, func(w io.Writer) error {
			return n.blobs.offsite.SendDir(n.svc.MemoryDir(ck.ID), w)
		})
	}
	return wg.Wait
}

// aheadBase is what ck's files are sent ahead as a diff from: the
// volume of its image, which the target most likely has (it is the
// base of the uploaded chain too), or "" to send them whole.
func (n *Node) aheadBase(ctx context.Context, ck *sandbox.Checkpoint) string {
	im, err := n.store.GetImage(ctx, ck.Manifest.Spec.Image)
	if err != nil || !n.blobs.hasVolume(ctx, im.VolumeKey()) {
		return ""
	}
	return im.VolumeKey()
}

// ReceiveAhead keeps a part of the checkpoint sandbox h.Sandbox is in,
// which node from is handing over to this one (see sendAhead), read from
// r. whole says, once r is read to its end, whether it came whole; what
// did not, or does not match the checkpoint, is not kept.
func (n *Node) ReceiveAhead(ctx context.Context, from string, h Handover, r io.Reader, whole func() error) error {
	if n.blobs == nil {
		return errdefs.Conflict("this node has no blob store: it takes no sandboxes from other nodes")
	}
	sb, err := n.store.GetSandbox(ctx, h.Sandbox)
	if err != nil {
		return err
	}
	if sb.Node != from || sb.State != sandbox.StateHibernated || sb.Checkpoint != h.Checkpoint {
		return errdefs.Conflict("sandbox %q is not being handed over by node %s in checkpoint %s", sb.Name, from, h.Checkpoint)
	}
	ck, err := n.store.GetCheckpoint(ctx, sb.ID, h.Checkpoint)
	if err != nil {
		return err
	}
	defer n.svc.Pin(ck.ID)()
	n.blobs.downloads.Lock() // see EnsureLocal
	defer n.blobs.downloads.Unlock()
	start := time.Now()
	switch h.Part {
	case HandoverMemory:
		err = n.receiveMemory(ck, r, whole)
	case HandoverFiles:
		err = n.receiveFiles(ctx, ck, h.Base, r, whole)
	default:
		return errdefs.Invalid("unknown part %q of a checkpoint: memory or files", h.Part)
	}
	if err != nil {
		return err
	}
	n.log.Info("checkpoint received from the node handing a sandbox over", "sandbox", sb.Name, "checkpoint", ck.ID,
		"part", h.Part, "from", from, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (n *Node) receiveMemory(ck *sandbox.Checkpoint, r io.Reader, whole func() error) error {
	if !ck.Memory {
		return errdefs.Invalid("checkpoint %s has no memory image", ck.ID)
	}
	dir := n.svc.MemoryDir(ck.ID)
	if _, err := os.Stat(dir); err == nil {
		return nil // here already
	}
	if err := n.blobs.offsite.ReceiveDir(dir, r); err != nil {
		return err
	}
	err := whole()
	if err == nil {
		err = n.svc.VerifyImage(ck)
	}
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("receiving the memory image of checkpoint %s: %w", ck.ID, err)
	}
	return nil
}

func (n *Node) receiveFiles(ctx context.Context, ck *sandbox.Checkpoint, base string, r io.Reader, whole func() error) error {
	if n.blobs.hasVolume(ctx, ck.VolumeKey()) {
		return nil // here already
	}
	if base != "" && !n.blobs.hasVolume(ctx, base) {
		return errdefs.Conflict("the files of checkpoint %s come as a diff from %s, which this node does not have", ck.ID, base)
	}
	return n.blobs.offsite.ReceiveVolume(ctx, ck.VolumeKey(), r, whole)
}
