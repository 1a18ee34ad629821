package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// upload copies checkpoint id to the blob store and records where it is.
// depth counts the parents uploaded first on its behalf.
func (bs *Blobs) upload(ctx context.Context, id string, depth int) error {
	defer bs.svc.Pin(id)()
	// One upload of a checkpoint at a time: a move waits for the
	// worker's, then finds it uploaded.
	l := bs.lock("upload:" + id)
	l.Lock()
	defer l.Unlock()
	ck, err := bs.store.GetCheckpoint(ctx, "", id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // removed meanwhile
	}
	if err != nil || ck.Location == sandbox.LocationUploaded {
		return err
	}
	if !bs.hasLocalCopy(ctx, ck) {
		return fmt.Errorf("checkpoint %s has no copy on this host to upload", ck.ID)
	}
	if err := bs.setLocation(ctx, ck, sandbox.LocationUploading, sandbox.Blobs{}); err != nil {
		return err
	}
	start := time.Now()
	b, err := bs.push(ctx, ck, depth)
	if err != nil {
		if lerr := bs.setLocation(context.WithoutCancel(ctx), ck, sandbox.LocationLocal, sandbox.Blobs{}); lerr != nil {
			bs.log.Error("recording a failed upload", "checkpoint", ck.ID, "err", lerr)
		}
		return err
	}
	if err := bs.setLocation(ctx, ck, sandbox.LocationUploaded, b); err != nil {
		return err
	}
	if owner, err := bs.store.GetSandbox(ctx, ck.SandboxID); err == nil && owner.Node != bs.self {
		// Its sandbox moved to another node, which downloads it if it
		// needs it: this host's copy has served.
		bs.svc.DropCheckpointFiles(ctx, ck)
	}
	bs.log.Info("checkpoint uploaded", "checkpoint", ck.ID, "layers", len(b.Files),
		"stream", units.BytesSize(float64(b.StreamBytes)), "sent", units.BytesSize(float64(b.SentBytes)),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// setLocation records where ck is; a checkpoint removed meanwhile is not
// an error.
func (bs *Blobs) setLocation(ctx context.Context, ck *sandbox.Checkpoint, loc string, b sandbox.Blobs) error {
	err := bs.store.SetCheckpointLocation(ctx, ck.ID, loc, b)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("recording where checkpoint %s is: %w", ck.ID, err)
	}
	ck.Location, ck.Blobs = loc, b
	return nil
}

// push sends ck's files and memory image.
func (bs *Blobs) push(ctx context.Context, ck *sandbox.Checkpoint, depth int) (sandbox.Blobs, error) {
	b := sandbox.Blobs{Format: bs.offsite.Format()}
	base, chain, unpin := bs.uploadBase(ctx, ck, depth)
	defer unpin()
	id, diff, st, err := bs.offsite.PushVolume(ctx, ck.VolumeKey(), base)
	if err != nil {
		return b, err
	}
	if !diff {
		chain = nil
	}
	b.Files = append(append([]sandbox.BlobLayer(nil), chain...), sandbox.BlobLayer{Manifest: id, Volume: ck.VolumeKey()})
	b.StreamBytes, b.SentBytes = st.StreamBytes, st.SentBytes
	if ck.Memory {
		id, st, err := bs.offsite.PushDir(ctx, bs.svc.MemoryDir(ck.ID))
		if err != nil {
			return b, err
		}
		b.Memory = id
		b.StreamBytes += st.StreamBytes
		b.SentBytes += st.SentBytes
	}
	return b, nil
}

// uploadBase picks what ck's files are sent as a diff from: its parent,
// once uploaded (first, if need be) and still here in the same format
// with room in its chain; else its image, uploaded first if need be. It
// returns the base's volume and chain, or "" to send them whole, and what
// unpins the base.
func (bs *Blobs) uploadBase(ctx context.Context, ck *sandbox.Checkpoint, depth int) (string, []sandbox.BlobLayer, func()) {
	if key, chain, unpin := bs.parentBase(ctx, ck, depth); key != "" {
		return key, chain, unpin
	}
	im, err := bs.uploadImage(ctx, ck.Manifest.Spec.Image)
	if err != nil {
		bs.log.Warn("uploading an image to diff a checkpoint from; sending its files whole", "checkpoint", ck.ID, "image", ck.Manifest.Spec.Image, "err", err)
		return "", nil, func() {}
	}
	return im.VolumeKey(), im.Blobs.Files, func() {}
}

// parentBase is uploadBase's choice of ck's parent, or "".
func (bs *Blobs) parentBase(ctx context.Context, ck *sandbox.Checkpoint, depth int) (string, []sandbox.BlobLayer, func()) {
	none := func() {}
	if ck.Parent == "" {
		return "", nil, none
	}
	unpin := bs.svc.Pin(ck.Parent)
	p, err := bs.store.GetCheckpoint(ctx, "", ck.Parent)
	if err != nil || !bs.hasVolume(ctx, p.VolumeKey()) {
		unpin()
		return "", nil, none
	}
	if p.Location != sandbox.LocationUploaded && depth < maxChain {
		if err := bs.upload(ctx, p.ID, depth+1); err != nil {
			bs.log.Warn("uploading a parent checkpoint first; sending the files whole", "checkpoint", ck.ID, "parent", p.ID, "err", err)
		} else if p, err = bs.store.GetCheckpoint(ctx, "", ck.Parent); err != nil {
			unpin()
			return "", nil, none
		}
	}
	if p.Location != sandbox.LocationUploaded || p.Blobs.Format != bs.offsite.Format() || len(p.Blobs.Files) >= maxChain {
		unpin()
		return "", nil, none
	}
	return p.VolumeKey(), p.Blobs.Files, unpin
}

// uploadImage sends image name's root filesystem whole, unless it is
// uploaded already, and returns its record.
func (bs *Blobs) uploadImage(ctx context.Context, name string) (*sandbox.Image, error) {
	im, err := bs.store.GetImage(ctx, name)
	if err != nil {
		return nil, err
	}
	if !bs.hasVolume(ctx, im.VolumeKey()) {
		return nil, errdefs.NotFound("image %q is not on this host", name)
	}
	if im.Location == sandbox.LocationUploaded && im.Blobs.Format == bs.offsite.Format() {
		return im, nil
	}
	if err := bs.store.SetImageLocation(ctx, name, sandbox.LocationUploading, sandbox.Blobs{}); err != nil {
		return nil, err
	}
	start := time.Now()
	id, _, st, err := bs.offsite.PushVolume(ctx, im.VolumeKey(), "")
	if err != nil {
		if lerr := bs.store.SetImageLocation(context.WithoutCancel(ctx), name, sandbox.LocationLocal, sandbox.Blobs{}); lerr != nil {
			bs.log.Error("recording a failed upload", "image", name, "err", lerr)
		}
		return nil, err
	}
	im.Location = sandbox.LocationUploaded
	im.Blobs = sandbox.Blobs{Format: bs.offsite.Format(), Files: []sandbox.BlobLayer{{Manifest: id, Volume: im.VolumeKey()}},
		StreamBytes: st.StreamBytes, SentBytes: st.SentBytes}
	if err := bs.store.SetImageLocation(ctx, name, im.Location, im.Blobs); err != nil {
		return nil, err
	}
	bs.log.Info("image uploaded", "image", name, "stream", units.BytesSize(float64(st.StreamBytes)),
		"sent", units.BytesSize(float64(st.SentBytes)), "took", time.Since(start).Round(time.Millisecond))
	return im, nil
}

// ShareImage uploads an image in the background, once, so that any node
// of the fleet can make sandboxes from it.
func (bs *Blobs) ShareImage(im *sandbox.Image) {
	if im.Location == sandbox.LocationUploaded || im.Location == sandbox.LocationUploading {
		return
	}
	bs.svc.Go(func(ctx context.Context) {
		l := bs.lock("image:" + im.Name)
		l.Lock()
		defer l.Unlock()
		if _, err := bs.uploadImage(ctx, im.Name); err != nil && ctx.Err() == nil {
			bs.log.Warn("uploading an image to the blob store", "image", im.Name, "err", err)
		}
	})
}
