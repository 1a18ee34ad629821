package sandbox

import (
	"context"
)

// Checkpoints in the blob store. With a blob store, internal/fleet
// uploads every checkpoint in the background once it is recorded, and
// downloads one whose files or memory image are gone from this host when
// a restore, a wake or a fork needs it (internal/fleet blobs.go). The
// core asks it through BlobStore; a dend without a blob store has none,
// and checkpoints live on this host only.

// CheckpointFetcher brings the bytes of a checkpoint back to this host.
type CheckpointFetcher interface {
	// EnsureLocal makes ck's files and memory image be here, downloading
	// what is missing from the blob store. It fails, naming the
	// checkpoint, when the blob store cannot give them back intact; one
	// that is not uploaded is left for the step that needs it to say
	// what is missing.
	EnsureLocal(ctx context.Context, ck *Checkpoint) error
}

// ImageFetcher shares images' root filesystems between the nodes of a
// fleet through the blob store.
type ImageFetcher interface {
	// FetchImage downloads image name's root filesystem when another
	// node uploaded it and this host lacks it.
	FetchImage(ctx context.Context, name string) error
	// ShareImage uploads im in the background, once, so that any node
	// can make sandboxes from it.
	ShareImage(im *Image)
}

// BlobStore is the blob store as the core uses it.
type BlobStore interface {
	CheckpointFetcher
	ImageFetcher
	// CheckpointRecorded is told the id of each checkpoint just
	// recorded on this node, to upload it in the background.
	CheckpointRecorded(id string)
}

// UseBlobStore makes b the blob store checkpoints and images are kept
// in. Call it once, before Recover; without it there is none.
func (s *Service) UseBlobStore(b BlobStore) { s.blobs = b }

// queueUpload uploads checkpoint id in the background, when there is a
// blob store.
func (s *Service) queueUpload(id string) {
	if s.blobs != nil {
		s.blobs.CheckpointRecorded(id)
	}
}

// ensureLocal makes ck's files and memory image be here, from the blob
// store if need be (CheckpointFetcher).
func (s *Service) ensureLocal(ctx context.Context, ck *Checkpoint) error {
	if s.blobs == nil {
		return nil // the step that needs them says what is missing
	}
	return s.blobs.EnsureLocal(ctx, ck)
}

// fetchImage downloads image name's root filesystem from the blob store
// when another node of the fleet uploaded it and this host lacks it, so
// a sandbox placed here can be made from it.
func (s *Service) fetchImage(ctx context.Context, name string) error {
	if s.blobs == nil {
		return nil
	}
	return s.blobs.FetchImage(ctx, name)
}

// shareImage uploads an image in the background, once, so that any node
// of the fleet can make sandboxes from it.
func (s *Service) shareImage(im *Image) {
	if s.blobs != nil {
		s.blobs.ShareImage(im)
	}
}
