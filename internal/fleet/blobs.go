package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/sandbox"
)

// Checkpoints in the blob store. With a blob store, every checkpoint is
// uploaded in the background once it is recorded: its files as a diff
// from its parent's when the parent is uploaded and still here (else
// from its image's), its memory image whole (the blob store keeps each
// chunk once, so what is the same as any earlier image costs nothing).
// Its record goes local → uploading → uploaded, and names the chain of
// manifests that makes its files again: the whole stream first (its
// image's, uploaded once before it), then each diff. A chain grows at
// most maxChain long; then the next starts from the image again, and
// costs only the chunks the bucket lacks.
//
// A checkpoint whose files or memory image are gone from this host is
// downloaded when a restore, a wake or a fork needs it, the chain's
// missing links first (download.go). Nothing is ever booted from a
// download the blob store could not check byte for byte.

// Offsite keeps the bytes of checkpoints in a blob store, away from this
// host, as streams named by their manifests (see blobs.go). Pushing
// never changes what is on the host; pulling makes what was pushed again,
// checked, or fails naming what is damaged.
type Offsite interface {
	// Format names how volumes are sent ("btrfs-send" or "tar"): a chain
	// sent in another format cannot be received here.
	Format() string
	// PushVolume sends read-only volume key, as what differs from
	// read-only volume base when base is set and the pool can diff.
	PushVolume(ctx context.Context, key, base string) (manifest string, diff bool, st sandbox.BlobStats, err error)
	// PushDir sends the regular files of dir.
	PushDir(ctx context.Context, dir string) (manifest string, st sandbox.BlobStats, err error)
	// PullVolume makes read-only volume key from the stream manifest
	// names; a diff needs its base's volume here.
	PullVolume(ctx context.Context, key, manifest string) error
	// PullDir makes dir, which must not exist, from the stream manifest
	// names: whole, or not at all.
	PullDir(ctx context.Context, dir, manifest string) error
	// SendDir writes the regular files of dir to w, and ReceiveDir makes
	// dir, which must not exist, from what it wrote: whole, or not at all.
	// SendVolume writes read-only volume key to w, a diff from base when
	// set and the pool can; ReceiveVolume makes volume key from what it
	// wrote, and keeps it only if whole, asked once r is read to its end,
	// says it came whole. A node hands a checkpoint straight to another
	// this way while it uploads it (handahead.go).
	SendDir(dir string, w io.Writer) error
	ReceiveDir(dir string, r io.Reader) error
	SendVolume(ctx context.Context, key, base string, w io.Writer) error
	ReceiveVolume(ctx context.Context, key string, r io.Reader, whole func() error) error
	// Collect removes from the blob store what keep (manifests) does not
	// need and was not written or reused within its grace period.
	Collect(ctx context.Context, keep []string) (sandbox.BlobCollection, error)
}

// maxChain bounds how many streams make one checkpoint's files.
const maxChain = 8

// BlobsConfig is what Blobs is made of.
type BlobsConfig struct {
	// Service is this node's sandbox core, whose checkpoints Blobs keeps.
	Service *sandbox.Service
	Store   sandbox.Store
	Volumes sandbox.Volumes
	Offsite Offsite
	// Node is this node's name.
	Node   string
	Logger *slog.Logger
}

// Blobs keeps this node's checkpoints and images in the blob store:
// it uploads them in the background and downloads them when they are
// needed here. It is the Service's sandbox.BlobStore.
type Blobs struct {
	svc     *sandbox.Service
	store   sandbox.Store
	volumes sandbox.Volumes
	offsite Offsite
	self    string
	log     *slog.Logger

	// uploads are the checkpoints waiting for the blob store; it has
	// its own lock.
	uploads *uploadQueue
	// downloads serializes downloads from the blob store: one chain at a
	// time, so two restores never receive the same volume.
	downloads sync.Mutex

	mu sync.Mutex
	// locks holds one lock per checkpoint uploaded ("upload:ID") and
	// image uploaded or downloaded ("image:NAME").
	locks map[string]*sync.Mutex
}

var _ sandbox.BlobStore = (*Blobs)(nil)

// NewBlobs returns the Blobs cfg describes, and makes it the blob store
// of cfg.Service.
func NewBlobs(cfg BlobsConfig) *Blobs {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bs := &Blobs{svc: cfg.Service, store: cfg.Store, volumes: cfg.Volumes, offsite: cfg.Offsite, self: cfg.Node, log: cfg.Logger,
		uploads: newUploadQueue(), locks: map[string]*sync.Mutex{}}
	cfg.Service.UseBlobStore(bs)
	return bs
}

// lock returns the lock named key.
func (bs *Blobs) lock(key string) *sync.Mutex {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	l, ok := bs.locks[key]
	if !ok {
		l = &sync.Mutex{}
		bs.locks[key] = l
	}
	return l
}

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

// CheckpointRecorded uploads checkpoint id in the background.
func (bs *Blobs) CheckpointRecorded(id string) { bs.uploads.add(id) }

// Run starts uploading, in the background, every checkpoint not yet
// uploaded and each one made from now on, retrying failures every
// retry; and collects the blob store every collectEvery (0: never).
// Both end when the Service is closed.
func (bs *Blobs) Run(ctx context.Context, retry, collectEvery time.Duration) error {
	if err := bs.queueNotUploaded(ctx); err != nil {
		return err
	}
	bs.svc.Go(func(ctx context.Context) {
		t := time.NewTicker(retry)
		defer t.Stop()
		for {
			for id, ok := bs.uploads.take(); ok; id, ok = bs.uploads.take() {
				if err := bs.upload(ctx, id, 0); err != nil && ctx.Err() == nil {
					bs.log.Error("uploading a checkpoint to the blob store; will retry", "checkpoint", id, "err", err)
				}
				// Its sandbox may have been removed while the upload
				// held it: it goes now.
				bs.svc.CollectFreed(ctx, id)
			}
			select {
			case <-ctx.Done():
				return
			case <-bs.uploads.wake:
			case <-t.C:
				if err := bs.queueNotUploaded(ctx); err != nil && ctx.Err() == nil {
					bs.log.Error("listing checkpoints to upload", "err", err)
				}
			}
		}
	})
	if collectEvery > 0 {
		bs.svc.Every(collectEvery, func(ctx context.Context) {
			if _, err := bs.CollectBlobs(ctx); err != nil && ctx.Err() == nil {
				bs.log.Error("collecting the blob store", "err", err)
			}
		})
	}
	return nil
}

// RetryUploads queues every checkpoint still to be uploaded now, rather
// than at the next retry: the blob store answers again.
func (bs *Blobs) RetryUploads() {
	ctx := bs.svc.Lifetime()
	if err := bs.queueNotUploaded(ctx); err != nil && ctx.Err() == nil {
		bs.log.Error("listing checkpoints to upload", "err", err)
	}
}

// queueNotUploaded queues every checkpoint that is not uploaded and still
// has its bytes here. One left "uploading" by a dend that stopped is
// uploaded again from the start.
func (bs *Blobs) queueNotUploaded(ctx context.Context) error {
	cks, err := bs.store.ListCheckpoints(ctx, "")
	if err != nil {
		return err
	}
	for _, ck := range cks {
		if ck.Location != sandbox.LocationUploaded && bs.hasLocalCopy(ctx, ck) {
			bs.uploads.add(ck.ID)
		}
	}
	return nil
}

// CollectBlobs removes from the blob store what no record needs: the
// manifests named by no checkpoint or image, and the chunks only they
// used, once older than the grace period. Mark (every manifest the store's records
// name) and sweep (see blob.Store.Collect).
func (bs *Blobs) CollectBlobs(ctx context.Context) (sandbox.BlobCollection, error) {
	cks, err := bs.store.ListCheckpoints(ctx, "")
	if err != nil {
		return sandbox.BlobCollection{}, err
	}
	ims, err := bs.store.ListImages(ctx)
	if err != nil {
		return sandbox.BlobCollection{}, err
	}
	var keep []string
	for _, ck := range cks {
		keep = append(keep, ck.Blobs.Manifests()...)
	}
	older, err := bs.store.ListImageVersions(ctx, "")
	if err != nil {
		return sandbox.BlobCollection{}, err
	}
	for _, im := range append(ims, older...) {
		keep = append(keep, im.Blobs.Manifests()...)
	}
	start := time.Now()
	st, err := bs.offsite.Collect(ctx, keep)
	if err != nil {
		return st, fmt.Errorf("collecting the blob store: %w", err)
	}
	bs.log.Info("blob store collected", "manifests", st.Manifests, "manifests_removed", st.ManifestsRemoved,
		"chunks", st.Chunks, "chunks_removed", st.ChunksRemoved, "freed", units.BytesSize(float64(st.BytesRemoved)),
		"missing_manifests", st.MissingManifests, "took", time.Since(start).Round(time.Millisecond))
	return st, nil
}

// hasVolume says whether read-only volume key is on this host, whole.
func (bs *Blobs) hasVolume(ctx context.Context, key string) bool {
	v, err := bs.volumes.Stat(ctx, key)
	return err == nil && v.ReadOnly
}
