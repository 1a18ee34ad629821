package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
)

// Checkpoints in the blob store. With an Offsite configured, every
// checkpoint is uploaded in the background once it is recorded: its files
// as a diff from its parent's when the parent is uploaded and still here
// (else from its image's), its memory image whole (the blob store keeps each chunk
// once, so what is the same as any earlier image costs nothing). Its
// record goes local → uploading → uploaded, and names the chain of
// manifests that makes its files again: the whole stream first (its
// image's, uploaded once before it), then each diff. A chain grows at
// most maxChain long; then the next starts from the image again, and
// costs only the chunks the bucket lacks.
//
// A checkpoint whose files or memory image are gone from this host is
// downloaded when a restore, a wake or a fork needs it, the chain's
// missing links first. Nothing is ever booted from a download the blob
// store could not check byte for byte.

// maxChain bounds how many streams make one checkpoint's files.
const maxChain = 8

// uploadQueue holds the ids of checkpoints waiting to be uploaded, in the
// order they were made; one worker takes them. Its lock is its own.
type uploadQueue struct {
	mu     sync.Mutex
	ids    []string
	queued map[string]bool
	wake   chan struct{}
}

func newUploadQueue() *uploadQueue {
	return &uploadQueue{queued: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (q *uploadQueue) add(id string) {
	q.mu.Lock()
	if !q.queued[id] {
		q.queued[id] = true
		q.ids = append(q.ids, id)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *uploadQueue) take() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ids) == 0 {
		return "", false
	}
	id := q.ids[0]
	q.ids = q.ids[1:]
	delete(q.queued, id)
	return id, true
}

// queueUpload uploads ck in the background, when there is a blob store.
func (s *Service) queueUpload(id string) {
	if s.uploads != nil {
		s.uploads.add(id)
	}
}

// RunOffsite starts uploading, in the background, every checkpoint not
// yet uploaded and each one made from now on, retrying failures every
// retry; and collects the blob store every collectEvery (0: never). It
// does nothing without an Offsite.
func (s *Service) RunOffsite(ctx context.Context, retry, collectEvery time.Duration) error {
	if s.cfg.Offsite == nil {
		return nil
	}
	if err := s.queueNotUploaded(ctx); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(retry)
		defer t.Stop()
		for {
			for id, ok := s.uploads.take(); ok; id, ok = s.uploads.take() {
				if err := s.upload(s.ctx, id, 0); err != nil && s.ctx.Err() == nil {
					s.log.Error("uploading a checkpoint to the blob store; will retry", "checkpoint", id, "err", err)
				}
				// Its sandbox may have been removed while the upload
				// held it: it goes now.
				s.collectFreed(s.ctx, id)
			}
			select {
			case <-s.ctx.Done():
				return
			case <-s.uploads.wake:
			case <-t.C:
				if err := s.queueNotUploaded(s.ctx); err != nil && s.ctx.Err() == nil {
					s.log.Error("listing checkpoints to upload", "err", err)
				}
			}
		}
	}()
	if collectEvery > 0 {
		s.every(collectEvery, func(ctx context.Context) {
			if _, err := s.CollectBlobs(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("collecting the blob store", "err", err)
			}
		})
	}
	return nil
}

// RetryUploads queues every checkpoint still to be uploaded now, rather
// than at the next retry: the blob store answers again.
func (s *Service) RetryUploads() {
	if s.uploads == nil {
		return
	}
	if err := s.queueNotUploaded(s.ctx); err != nil && s.ctx.Err() == nil {
		s.log.Error("listing checkpoints to upload", "err", err)
	}
}

// queueNotUploaded queues every checkpoint that is not uploaded and still
// has its bytes here. One left "uploading" by a dend that stopped is
// uploaded again from the start.
func (s *Service) queueNotUploaded(ctx context.Context) error {
	cks, err := s.cfg.Store.ListCheckpoints(ctx, "")
	if err != nil {
		return err
	}
	for _, ck := range cks {
		if ck.Location != LocationUploaded && s.hasLocalCopy(ctx, ck) {
			s.uploads.add(ck.ID)
		}
	}
	return nil
}

// upload copies checkpoint id to the blob store and records where it is.
// depth counts the parents uploaded first on its behalf.
func (s *Service) upload(ctx context.Context, id string, depth int) error {
	defer s.pin(id)()
	// One upload of a checkpoint at a time: a move waits for the
	// worker's, then finds it uploaded.
	l := s.lock("upload:" + id)
	l.Lock()
	defer l.Unlock()
	ck, err := s.cfg.Store.GetCheckpoint(ctx, "", id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // removed meanwhile
	}
	if err != nil || ck.Location == LocationUploaded {
		return err
	}
	if !s.hasLocalCopy(ctx, ck) {
		return fmt.Errorf("checkpoint %s has no copy on this host to upload", ck.ID)
	}
	if err := s.setLocation(ctx, ck, LocationUploading, Blobs{}); err != nil {
		return err
	}
	start := time.Now()
	b, err := s.push(ctx, ck, depth)
	if err != nil {
		if lerr := s.setLocation(context.WithoutCancel(ctx), ck, LocationLocal, Blobs{}); lerr != nil {
			s.log.Error("recording a failed upload", "checkpoint", ck.ID, "err", lerr)
		}
		return err
	}
	if err := s.setLocation(ctx, ck, LocationUploaded, b); err != nil {
		return err
	}
	if owner, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID); err == nil && owner.Node != s.cfg.Node {
		// Its sandbox moved to another node, which downloads it if it
		// needs it: this host's copy has served.
		s.dropCheckpointFiles(ctx, ck)
	}
	s.log.Info("checkpoint uploaded", "checkpoint", ck.ID, "layers", len(b.Files),
		"stream", units.BytesSize(float64(b.StreamBytes)), "sent", units.BytesSize(float64(b.SentBytes)),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// setLocation records where ck is; a checkpoint removed meanwhile is not
// an error.
func (s *Service) setLocation(ctx context.Context, ck *Checkpoint, loc string, b Blobs) error {
	err := s.cfg.Store.SetCheckpointLocation(ctx, ck.ID, loc, b)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("recording where checkpoint %s is: %w", ck.ID, err)
	}
	ck.Location, ck.Blobs = loc, b
	return nil
}

// push sends ck's files and memory image.
func (s *Service) push(ctx context.Context, ck *Checkpoint, depth int) (Blobs, error) {
	b := Blobs{Format: s.cfg.Offsite.Format()}
	base, chain, unpin := s.uploadBase(ctx, ck, depth)
	defer unpin()
	id, diff, st, err := s.cfg.Offsite.PushVolume(ctx, ck.VolumeKey(), base)
	if err != nil {
		return b, err
	}
	if !diff {
		chain = nil
	}
	b.Files = append(append([]BlobLayer(nil), chain...), BlobLayer{Manifest: id, Volume: ck.VolumeKey()})
	b.StreamBytes, b.SentBytes = st.StreamBytes, st.SentBytes
	if ck.Memory {
		id, st, err := s.cfg.Offsite.PushDir(ctx, s.memDir(ck.ID))
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
func (s *Service) uploadBase(ctx context.Context, ck *Checkpoint, depth int) (string, []BlobLayer, func()) {
	if key, chain, unpin := s.parentBase(ctx, ck, depth); key != "" {
		return key, chain, unpin
	}
	im, err := s.uploadImage(ctx, ck.Manifest.Spec.Image)
	if err != nil {
		s.log.Warn("uploading an image to diff a checkpoint from; sending its files whole", "checkpoint", ck.ID, "image", ck.Manifest.Spec.Image, "err", err)
		return "", nil, func() {}
	}
	return im.VolumeKey(), im.Blobs.Files, func() {}
}

// parentBase is uploadBase's choice of ck's parent, or "".
func (s *Service) parentBase(ctx context.Context, ck *Checkpoint, depth int) (string, []BlobLayer, func()) {
	none := func() {}
	if ck.Parent == "" {
		return "", nil, none
	}
	unpin := s.pin(ck.Parent)
	p, err := s.cfg.Store.GetCheckpoint(ctx, "", ck.Parent)
	if err != nil || !s.hasVolume(ctx, p.VolumeKey()) {
		unpin()
		return "", nil, none
	}
	if p.Location != LocationUploaded && depth < maxChain {
		if err := s.upload(ctx, p.ID, depth+1); err != nil {
			s.log.Warn("uploading a parent checkpoint first; sending the files whole", "checkpoint", ck.ID, "parent", p.ID, "err", err)
		} else if p, err = s.cfg.Store.GetCheckpoint(ctx, "", ck.Parent); err != nil {
			unpin()
			return "", nil, none
		}
	}
	if p.Location != LocationUploaded || p.Blobs.Format != s.cfg.Offsite.Format() || len(p.Blobs.Files) >= maxChain {
		unpin()
		return "", nil, none
	}
	return p.VolumeKey(), p.Blobs.Files, unpin
}

// uploadImage sends image name's root filesystem whole, unless it is
// uploaded already, and returns its record.
func (s *Service) uploadImage(ctx context.Context, name string) (*Image, error) {
	im, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil {
		return nil, err
	}
	if !s.hasVolume(ctx, im.VolumeKey()) {
		return nil, errdefs.NotFound("image %q is not on this host", name)
	}
	if im.Location == LocationUploaded && im.Blobs.Format == s.cfg.Offsite.Format() {
		return im, nil
	}
	if err := s.cfg.Store.SetImageLocation(ctx, name, LocationUploading, Blobs{}); err != nil {
		return nil, err
	}
	start := time.Now()
	id, _, st, err := s.cfg.Offsite.PushVolume(ctx, im.VolumeKey(), "")
	if err != nil {
		if lerr := s.cfg.Store.SetImageLocation(context.WithoutCancel(ctx), name, LocationLocal, Blobs{}); lerr != nil {
			s.log.Error("recording a failed upload", "image", name, "err", lerr)
		}
		return nil, err
	}
	im.Location = LocationUploaded
	im.Blobs = Blobs{Format: s.cfg.Offsite.Format(), Files: []BlobLayer{{Manifest: id, Volume: im.VolumeKey()}},
		StreamBytes: st.StreamBytes, SentBytes: st.SentBytes}
	if err := s.cfg.Store.SetImageLocation(ctx, name, im.Location, im.Blobs); err != nil {
		return nil, err
	}
	s.log.Info("image uploaded", "image", name, "stream", units.BytesSize(float64(st.StreamBytes)),
		"sent", units.BytesSize(float64(st.SentBytes)), "took", time.Since(start).Round(time.Millisecond))
	return im, nil
}

// hasVolume says whether read-only volume key is here, whole.
func (s *Service) hasVolume(ctx context.Context, key string) bool {
	v, err := s.cfg.Volumes.Stat(ctx, key)
	return err == nil && v.ReadOnly
}

// hasLocalCopy says whether ck's files, and memory image if it has one,
// are on this host.
func (s *Service) hasLocalCopy(ctx context.Context, ck *Checkpoint) bool {
	if !s.hasVolume(ctx, ck.VolumeKey()) {
		return false
	}
	if !ck.Memory {
		return true
	}
	fi, err := os.Stat(filepath.Join(s.memDir(ck.ID), imageStateFile))
	return err == nil && fi.Size() > 0
}

// ensureLocal makes ck's files and memory image be here, downloading
// what is missing from the blob store. It fails, naming the checkpoint,
// when they are gone and it is not uploaded, or when the blob store
// cannot give them back intact.
func (s *Service) ensureLocal(ctx context.Context, ck *Checkpoint) error {
	if s.hasLocalCopy(ctx, ck) {
		return nil
	}
	if s.cfg.Offsite == nil || ck.Location != LocationUploaded {
		return nil // the step that needs them says what is missing
	}
	defer s.pin(ck.ID)()
	s.downloads.Lock()
	defer s.downloads.Unlock()
	if s.hasLocalCopy(ctx, ck) { // another download brought it
		return nil
	}
	start := time.Now()
	if err := s.pullFiles(ctx, ck); err != nil {
		return s.downloadFailed(ck, err)
	}
	if ck.Memory {
		dir := s.memDir(ck.ID)
		if _, err := os.Stat(filepath.Join(dir, imageStateFile)); err != nil {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("clearing checkpoint %s's partial memory image: %w", ck.ID, err)
			}
			if err := os.MkdirAll(s.cfg.CheckpointDir, 0o700); err != nil {
				return err
			}
			if err := s.cfg.Offsite.PullDir(ctx, dir, ck.Blobs.Memory); err != nil {
				return s.downloadFailed(ck, err)
			}
		}
	}
	s.log.Info("checkpoint downloaded from the blob store", "checkpoint", ck.ID, "sandbox_id", ck.SandboxID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// pullFiles receives the links of ck's chain from the last one whose
// base is here.
func (s *Service) pullFiles(ctx context.Context, ck *Checkpoint) error {
	layers := ck.Blobs.Files
	if len(layers) == 0 || ck.Blobs.Format != s.cfg.Offsite.Format() {
		return errdefs.Unavailable("its files were uploaded as %q, which this host's storage cannot receive", ck.Blobs.Format)
	}
	if s.hasVolume(ctx, ck.VolumeKey()) {
		return nil
	}
	start := len(layers) - 1
	for start > 0 && !s.layerHere(ctx, layers[start-1]) {
		start--
	}
	var scratch []string
	defer func() {
		for _, key := range scratch {
			if err := s.cfg.Volumes.Remove(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				s.log.Error("removing a downloaded base", "volume", key, "err", err)
			}
		}
	}()
	for i, l := range layers[start:] {
		// Links made for a checkpoint since removed go with the next
		// garbage collection; until then they are held here.
		if id, ok := strings.CutPrefix(l.Volume, "checkpoints/"); ok {
			defer s.pin(id)()
		}
		if s.layerHere(ctx, l) {
			continue
		}
		key := l.Volume
		if !s.mayReceive(ctx, l) {
			// An image rebuilt or removed since: its stream serves
			// as a base under a name of its own, then goes.
			key = fmt.Sprintf("checkpoints/%s-base%d", ck.ID, start+i)
			defer s.pin(fmt.Sprintf("%s-base%d", ck.ID, start+i))()
			scratch = append(scratch, key)
		}
		if err := s.cfg.Volumes.Remove(ctx, key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("clearing a partial copy of %s: %w", key, err)
		}
		if err := s.cfg.Offsite.PullVolume(ctx, key, l.Manifest); err != nil {
			return err
		}
	}
	return nil
}

// layerHere says whether the volume a layer makes is here: a checkpoint's
// volume is always the one it names, an image version's only while that
// version's record names the stream uploaded.
func (s *Service) layerHere(ctx context.Context, l BlobLayer) bool {
	if !s.hasVolume(ctx, l.Volume) {
		return false
	}
	name, version, ok := ParseImageVolumeKey(l.Volume)
	if !ok {
		return true
	}
	im, err := s.cfg.Store.GetImageVersion(ctx, name, version)
	return err == nil && len(im.Blobs.Files) > 0 && im.Blobs.Files[len(im.Blobs.Files)-1].Manifest == l.Manifest
}

// mayReceive says whether a missing layer may be received under the key
// it names: always for a checkpoint, and for an image whose record names
// that same stream (a host without the image gets it back).
func (s *Service) mayReceive(ctx context.Context, l BlobLayer) bool {
	name, version, ok := ParseImageVolumeKey(l.Volume)
	if !ok {
		return true
	}
	im, err := s.cfg.Store.GetImageVersion(ctx, name, version)
	return err == nil && len(im.Blobs.Files) > 0 && im.Blobs.Files[len(im.Blobs.Files)-1].Manifest == l.Manifest &&
		!s.volumeExists(ctx, l.Volume)
}

// volumeExists says whether anything is at volume key.
func (s *Service) volumeExists(ctx context.Context, key string) bool {
	_, err := s.cfg.Volumes.Stat(ctx, key)
	return err == nil
}

// downloadFailed says which checkpoint could not be brought back, and
// why, as unavailable: what the blob store holds is missing or damaged,
// or it cannot be reached.
func (s *Service) downloadFailed(ck *Checkpoint, err error) error {
	s.log.Error("downloading a checkpoint from the blob store", "checkpoint", ck.ID, "err", err)
	if errdefs.Class(err) == nil {
		err = errdefs.Unavailable("%v", err)
	}
	hint := "den refuses to boot from bytes it cannot check; `den recover NAME --rollback` goes to another checkpoint"
	if h := errdefs.Hint(err); h != "" {
		hint = h // the store did not answer: try again once it does
	}
	return errdefs.WithHint(fmt.Errorf("checkpoint %s is not on this host and cannot be downloaded from the blob store: %w", ck.ID, err), hint)
}

// CollectBlobs removes from the blob store what no record needs: the
// manifests named by no checkpoint or image, and the chunks only they
// used, once older than the grace period. Mark (every manifest the store's records
// name) and sweep (see blob.Store.Collect).
func (s *Service) CollectBlobs(ctx context.Context) (BlobCollection, error) {
	if s.cfg.Offsite == nil {
		return BlobCollection{}, errdefs.WithHint(errdefs.Unavailable("dend has no blob store"), "start dend with --blobs s3://BUCKET/PREFIX?endpoint=HOST:PORT")
	}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, "")
	if err != nil {
		return BlobCollection{}, err
	}
	ims, err := s.cfg.Store.ListImages(ctx)
	if err != nil {
		return BlobCollection{}, err
	}
	var keep []string
	for _, ck := range cks {
		keep = append(keep, ck.Blobs.Manifests()...)
	}
	older, err := s.cfg.Store.ListImageVersions(ctx, "")
	if err != nil {
		return BlobCollection{}, err
	}
	for _, im := range append(ims, older...) {
		keep = append(keep, im.Blobs.Manifests()...)
	}
	start := time.Now()
	st, err := s.cfg.Offsite.Collect(ctx, keep)
	if err != nil {
		return st, fmt.Errorf("collecting the blob store: %w", err)
	}
	s.log.Info("blob store collected", "manifests", st.Manifests, "manifests_removed", st.ManifestsRemoved,
		"chunks", st.Chunks, "chunks_removed", st.ChunksRemoved, "freed", units.BytesSize(float64(st.BytesRemoved)),
		"missing_manifests", st.MissingManifests, "took", time.Since(start).Round(time.Millisecond))
	return st, nil
}

// fetchImage downloads image name's root filesystem from the blob store
// when another node of the fleet uploaded it and this host lacks it, so
// a sandbox placed here can be made from it.
func (s *Service) fetchImage(ctx context.Context, name string) error {
	if s.cfg.Offsite == nil {
		return nil
	}
	im, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil || im.Location != LocationUploaded || len(im.Blobs.Files) == 0 || s.volumeExists(ctx, im.VolumeKey()) {
		return nil // Ensure says what is missing, or builds it
	}
	l := s.lock("image:" + name)
	l.Lock()
	defer l.Unlock()
	if s.volumeExists(ctx, im.VolumeKey()) {
		return nil
	}
	if im.Blobs.Format != s.cfg.Offsite.Format() {
		return errdefs.Unavailable("image %q was uploaded as %q, which this host's storage cannot receive", name, im.Blobs.Format)
	}
	start := time.Now()
	last := im.Blobs.Files[len(im.Blobs.Files)-1]
	if err := s.cfg.Offsite.PullVolume(ctx, im.VolumeKey(), last.Manifest); err != nil {
		return errdefs.WithHint(fmt.Errorf("image %q is not on this host and cannot be downloaded from the blob store: %w", name, err),
			"try again once the blob store answers, or make the image here (`den image pull` or `den image import`)")
	}
	s.log.Info("image downloaded from the blob store", "image", name, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// shareImage uploads an image in the background, once, so that any node
// of the fleet can make sandboxes from it.
func (s *Service) shareImage(im *Image) {
	if s.cfg.Offsite == nil || im.Location == LocationUploaded || im.Location == LocationUploading {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		l := s.lock("image:" + im.Name)
		l.Lock()
		defer l.Unlock()
		if _, err := s.uploadImage(s.ctx, im.Name); err != nil && s.ctx.Err() == nil {
			s.log.Warn("uploading an image to the blob store", "image", im.Name, "err", err)
		}
	}()
}
