package memimage

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
)

// Images are the memory images of a host's checkpoints, each in a
// directory of its own under one root, named by its checkpoint's id; an
// image of a sandbox that was ever granted secrets is sealed under the
// sealer's key (grant.Seal). It knows images by their checkpoint's id
// and the key they were sealed with, and nothing of checkpoints'
// records: which image is sealed, and when one is made, checked or
// removed, is the core's.
type Images struct {
	root   string
	sealer grant.Sealer // nil: images are never sealed
	log    *slog.Logger
}

// NewImages returns the images kept under root, sealed with sealer (nil
// for none).
func NewImages(root string, sealer grant.Sealer, log *slog.Logger) *Images {
	return &Images{root: root, sealer: sealer, log: log}
}

// recoverHint is what brings a sandbox back whose memory image cannot be
// restored.
const recoverHint = "`den recover NAME --cold` boots the checkpoint's files without its processes, or `--rollback` goes to an earlier checkpoint"

// Dir is where the memory image of checkpoint id lives.
func (im *Images) Dir(id string) string { return filepath.Join(im.root, id) }

// Make creates the empty directory of checkpoint id's memory image.
func (im *Images) Make(id string) (string, error) {
	if err := os.MkdirAll(im.root, 0o700); err != nil {
		return "", fmt.Errorf("creating checkpoint directory: %w", err)
	}
	dir := im.Dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating memory image directory: %w", err)
	}
	return dir, nil
}

// Remove removes checkpoint id's memory image, whatever of it exists.
func (im *Images) Remove(id string) error { return os.RemoveAll(im.Dir(id)) }

// Whole says whether the engine finished writing checkpoint id's memory
// image: its StateFile is there and not empty.
func (im *Images) Whole(id string) bool {
	fi, err := os.Stat(filepath.Join(im.Dir(id), StateFile))
	return err == nil && fi.Size() != 0
}

// Sum lists checkpoint id's memory image (see Sum).
func (im *Images) Sum(id string) ([]File, int64, error) { return Sum(im.Dir(id)) }

// StartSync starts writing checkpoint id's memory image to disk (see
// StartSync).
func (im *Images) StartSync(id string) (wait func() error) { return StartSync(im.Dir(id)) }

// Verify checks checkpoint id's memory image against want, the list Sum
// made of it, before it is restored: a damaged image must fail here, not
// inside the engine.
func (im *Images) Verify(id string, want []File) error {
	ok, err := Matches(im.Dir(id), want)
	if err != nil {
		return errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s is unreadable: %v", id, err), recoverHint)
	}
	if !ok {
		return errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s does not match its manifest (damaged on disk)", id), recoverHint)
	}
	return nil
}

// Seals says whether there is a sealer, so images can be sealed.
func (im *Images) Seals() bool { return im.sealer != nil }

// KeyID names the key new images are sealed with, "" before the first;
// there must be a sealer (Seals).
func (im *Images) KeyID() string { return im.sealer.KeyID() }

// SaveSealed has save write checkpoint id's memory image into a scratch
// directory in memory and seals it into the image's directory, its
// StateFile last; it returns the sealing key's id.
func (im *Images) SaveSealed(id string, save func(dir string) error) (keyID string, err error) {
	return grant.Seal(im.sealer, "ck-"+id, im.Dir(id), StateFile, save)
}

// Open returns the directory to restore checkpoint id's memory image
// from, sealed with keyID ("" for not sealed), for instance, and what
// removes it once the engine has it open: the image's own directory, or,
// for a sealed image, its plaintext opened into memory.
func (im *Images) Open(id, keyID, instance string) (string, func(), error) {
	if keyID == "" {
		return im.Dir(id), func() {}, nil
	}
	if im.sealer == nil {
		return "", nil, errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s is sealed, and this dend has no images key", id), recoverHint)
	}
	plain, err := grant.Open(im.sealer, im.Dir(id), "restore-"+instance, id, keyID)
	if err != nil {
		return "", nil, err
	}
	return plain, func() {
		if err := im.sealer.Remove(plain); err != nil {
			im.log.Error("removing an opened memory image", "checkpoint", id, "err", err)
		}
	}, nil
}

// CheckKey refuses checkpoint id's memory image, sealed with keyID (""
// for not sealed), when the sealer's key cannot open it.
func (im *Images) CheckKey(id, keyID string) error {
	if keyID == "" {
		return nil
	}
	have := grant.KeyName(im.sealer)
	if have != keyID {
		im.log.Error("a memory image was sealed with another images key", "checkpoint", id, "sealed_with", keyID, "key_id", have)
		return errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s was sealed with images key %s, but dend's images key is %s", id, keyID, have),
			"give dend the images key file (DATA_DIR/images.key) the image was sealed with; or boot its files alone with `den recover NAME --cold`")
	}
	return nil
}
