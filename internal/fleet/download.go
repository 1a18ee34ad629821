package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// hasLocalCopy says whether ck's files, and memory image if it has one,
// are on this host.
func (bs *Blobs) hasLocalCopy(ctx context.Context, ck *sandbox.Checkpoint) bool {
	if !bs.hasVolume(ctx, ck.VolumeKey()) {
		return false
	}
	if !ck.Memory {
		return true
	}
	fi, err := os.Stat(bs.svc.MemoryImageFile(ck.ID))
	return err == nil && fi.Size() > 0
}

// EnsureLocal makes ck's files and memory image be here, downloading
// what is missing from the blob store. It fails, naming the checkpoint,
// when they are gone and it is not uploaded, or when the blob store
// cannot give them back intact.
func (bs *Blobs) EnsureLocal(ctx context.Context, ck *sandbox.Checkpoint) error {
	if bs.hasLocalCopy(ctx, ck) {
		return nil
	}
	if ck.Location != sandbox.LocationUploaded {
		return nil // the step that needs them says what is missing
	}
	defer bs.svc.Pin(ck.ID)()
	bs.downloads.Lock()
	defer bs.downloads.Unlock()
	if bs.hasLocalCopy(ctx, ck) { // another download brought it
		return nil
	}
	start := time.Now()
	if err := bs.pullFiles(ctx, ck); err != nil {
		return bs.downloadFailed(ck, err)
	}
	if ck.Memory {
		dir := bs.svc.MemoryDir(ck.ID)
		if _, err := os.Stat(bs.svc.MemoryImageFile(ck.ID)); err != nil {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("clearing checkpoint %s's partial memory image: %w", ck.ID, err)
			}
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				return err
			}
			if err := bs.offsite.PullDir(ctx, dir, ck.Blobs.Memory); err != nil {
				return bs.downloadFailed(ck, err)
			}
		}
	}
	bs.log.Info("checkpoint downloaded from the blob store", "checkpoint", ck.ID, "sandbox_id", ck.SandboxID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// pullFiles receives the links of ck's chain from the last one whose
// base is here.
func (bs *Blobs) pullFiles(ctx context.Context, ck *sandbox.Checkpoint) error {
	layers := ck.Blobs.Files
	if len(layers) == 0 || ck.Blobs.Format != bs.offsite.Format() {
		return errdefs.Unavailable("its files were uploaded as %q, which this host's storage cannot receive", ck.Blobs.Format)
	}
	if bs.hasVolume(ctx, ck.VolumeKey()) {
		return nil
	}
	start := len(layers) - 1
	for start > 0 && !bs.layerHere(ctx, layers[start-1]) {
		start--
	}
	var scratch []string
	defer func() {
		for _, key := range scratch {
			if err := bs.volumes.Remove(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				bs.log.Error("removing a downloaded base", "volume", key, "err", err)
			}
		}
	}()
	for i, l := range layers[start:] {
		// Links made for a checkpoint since removed go with the next
		// garbage collection; until then they are held here.
		if id, ok := strings.CutPrefix(l.Volume, "checkpoints/"); ok {
			defer bs.svc.Pin(id)()
		}
		if bs.layerHere(ctx, l) {
			continue
		}
		key := l.Volume
		if !bs.mayReceive(ctx, l) {
			// An image rebuilt or removed since: its stream serves
			// as a base under a name of its own, then goes.
			key = fmt.Sprintf("checkpoints/%s-base%d", ck.ID, start+i)
			defer bs.svc.Pin(fmt.Sprintf("%s-base%d", ck.ID, start+i))()
			scratch = append(scratch, key)
		}
		if err := bs.volumes.Remove(ctx, key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("clearing a partial copy of %s: %w", key, err)
		}
		if err := bs.offsite.PullVolume(ctx, key, l.Manifest); err != nil {
			return err
		}
	}
	return nil
}

// layerHere says whether the volume a layer makes is here: a checkpoint's
// volume is always the one it names, an image version's only while that
// version's record names the stream uploaded.
func (bs *Blobs) layerHere(ctx context.Context, l sandbox.BlobLayer) bool {
	if !bs.hasVolume(ctx, l.Volume) {
		return false
	}
	name, version, ok := sandbox.ParseImageVolumeKey(l.Volume)
	if !ok {
		return true
	}
	im, err := bs.store.GetImageVersion(ctx, name, version)
	return err == nil && len(im.Blobs.Files) > 0 && im.Blobs.Files[len(im.Blobs.Files)-1].Manifest == l.Manifest
}

// mayReceive says whether a missing layer may be received under the key
// it names: always for a checkpoint, and for an image whose record names
// that same stream (a host without the image gets it back).
func (bs *Blobs) mayReceive(ctx context.Context, l sandbox.BlobLayer) bool {
	name, version, ok := sandbox.ParseImageVolumeKey(l.Volume)
	if !ok {
		return true
	}
	im, err := bs.store.GetImageVersion(ctx, name, version)
	return err == nil && len(im.Blobs.Files) > 0 && im.Blobs.Files[len(im.Blobs.Files)-1].Manifest == l.Manifest &&
		!bs.volumeExists(ctx, l.Volume)
}

// volumeExists says whether anything is at volume key.
func (bs *Blobs) volumeExists(ctx context.Context, key string) bool {
	_, err := bs.volumes.Stat(ctx, key)
	return err == nil
}

// downloadFailed says which checkpoint could not be brought back, and
// why, as unavailable: what the blob store holds is missing or damaged,
// or it cannot be reached.
func (bs *Blobs) downloadFailed(ck *sandbox.Checkpoint, err error) error {
	bs.log.Error("downloading a checkpoint from the blob store", "checkpoint", ck.ID, "err", err)
	if errdefs.Class(err) == nil {
		err = errdefs.Unavailable("%v", err)
	}
	hint := "den refuses to boot from bytes it cannot check; `den recover NAME --rollback` goes to another checkpoint"
	if h := errdefs.Hint(err); h != "" {
		hint = h // the store did not answer: try again once it does
	}
	return errdefs.WithHint(fmt.Errorf("checkpoint %s is not on this host and cannot be downloaded from the blob store: %w", ck.ID, err), hint)
}

// FetchImage downloads image name's root filesystem from the blob store
// when another node of the fleet uploaded it and this host lacks it, so
// a sandbox placed here can be made from it.
func (bs *Blobs) FetchImage(ctx context.Context, name string) error {
	im, err := bs.store.GetImage(ctx, name)
	if err != nil || im.Location != sandbox.LocationUploaded || len(im.Blobs.Files) == 0 || bs.volumeExists(ctx, im.VolumeKey()) {
		return nil // Ensure says what is missing, or builds it
	}
	l := bs.lock("image:" + name)
	l.Lock()
	defer l.Unlock()
	if bs.volumeExists(ctx, im.VolumeKey()) {
		return nil
	}
	if im.Blobs.Format != bs.offsite.Format() {
		return errdefs.Unavailable("image %q was uploaded as %q, which this host's storage cannot receive", name, im.Blobs.Format)
	}
	start := time.Now()
	last := im.Blobs.Files[len(im.Blobs.Files)-1]
	if err := bs.offsite.PullVolume(ctx, im.VolumeKey(), last.Manifest); err != nil {
		return errdefs.WithHint(fmt.Errorf("image %q is not on this host and cannot be downloaded from the blob store: %w", name, err),
			"try again once the blob store answers, or make the image here (`den image pull` or `den image import`)")
	}
	bs.log.Info("image downloaded from the blob store", "image", name, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
