package imagecrypt

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/keyfile"
)

// Config says where a Sealer keeps its key and its plaintext.
type Config struct {
	// KeyFile holds the images key (64 hex digits), 0600, made on first
	// use; kept apart from the images, like the secrets key.
	KeyFile string
	// Scratch is a directory on a tmpfs where plaintext images live while
	// the engine writes or reads them: plaintext never reaches a disk. It
	// is emptied when the Sealer is made (a crash may have left some).
	Scratch string
	Logger  *slog.Logger
}

// Sealer seals memory image directories under the images key, and opens
// them into scratch directories in memory for the engine to restore.
type Sealer struct {
	cfg Config
	log *slog.Logger

	mu  sync.Mutex
	key *Key // nil until the key file exists
	// expect are the ids of the keys existing images were sealed with: a
	// new key is not made while they name another.
	expect []string
}

// New opens the key file, if there is one, and empties the scratch
// directory.
func New(cfg Config) (*Sealer, error) {
	s := &Sealer{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	b, err := os.ReadFile(cfg.KeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading the images key: %w", err)
	default:
		if s.key, err = parseKey(b); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(cfg.Scratch); err != nil {
		return nil, fmt.Errorf("emptying the images scratch directory: %w", err)
	}
	return s, nil
}

func parseKey(b []byte) (*Key, error) {
	raw, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(raw) != KeySize {
		return nil, errdefs.WithHint(errdefs.Invalid("the images key file is malformed: it must hold %d hex digits", 2*KeySize),
			"give dend the images key file its memory images were sealed with")
	}
	defer clear(raw)
	return NewKey(raw)
}

// Expect tells the Sealer which keys sealed the images that exist: while
// any of them is not its own, it seals nothing new (mixing keys would
// leave some images unreadable whichever key file dend is given). A
// foreign key is logged once, when it first appears.
func (s *Sealer) Expect(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.expect
	s.expect = slices.Clone(ids)
	for _, id := range ids {
		if (s.key == nil || id != s.key.ID()) && !slices.Contains(before, id) {
			s.log.Error("memory images were sealed with another images key", "sealed_with", id, "key_file", s.cfg.KeyFile)
		}
	}
}

// KeyID names the key new images are sealed with ("" before the first).
func (s *Sealer) KeyID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil {
		return ""
	}
	return s.key.ID()
}

// Ready refuses, before any image is written, what SealDir would: a key
// other than the one the images here were sealed with. It makes the key
// file on first use.
func (s *Sealer) Ready() error {
	_, err := s.sealingKey()
	return err
}

// sealingKey returns the key to seal with, making the key file on first
// use; it refuses to mix keys.
func (s *Sealer) sealingKey() (*Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.expect {
		if s.key == nil || id != s.key.ID() {
			have := "none"
			if s.key != nil {
				have = s.key.ID()
			}
			return nil, errdefs.WithHint(errdefs.Unavailable("memory images were sealed with images key %s, but dend's images key is %s: it saves no new ones with another key", id, have),
				"give dend the images key file its images were sealed with, and restart it")
		}
	}
	if s.key != nil {
		return s.key, nil
	}
	raw := make([]byte, KeySize)
	rand.Read(raw)
	defer clear(raw)
	key, err := NewKey(raw)
	if err != nil {
		return nil, err
	}
	if err := keyfile.Create(s.cfg.KeyFile, raw); err != nil {
		return nil, fmt.Errorf("making the images key: %w", err)
	}
	s.key = key
	s.log.Info("made the images key", "key_file", s.cfg.KeyFile, "key_id", key.ID())
	return key, nil
}

// Scratch makes a new, empty directory named name in memory for a
// plaintext image, refusing when the scratch directory is not on a tmpfs.
func (s *Sealer) Scratch(name string) (string, error) {
	if err := os.MkdirAll(s.cfg.Scratch, 0o700); err != nil {
		return "", fmt.Errorf("making the images scratch directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.Scratch, &st); err != nil {
		return "", fmt.Errorf("checking the images scratch directory: %w", err)
	}
	if st.Type != unix.TMPFS_MAGIC && st.Type != unix.RAMFS_MAGIC {
		s.log.Error("the images scratch directory is not in memory", "dir", s.cfg.Scratch)
		return "", errdefs.WithHint(errdefs.Unavailable("dend's scratch directory for memory images is not on a tmpfs: a sandbox granted secrets is not saved through it"),
			"give dend a scratch directory on a tmpfs (such as /dev/shm)")
	}
	dir := filepath.Join(s.cfg.Scratch, name)
	os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("making an images scratch directory: %w", err)
	}
	return dir, nil
}

// SealDir seals every file of the plaintext image in src into dst, under
// the same names, removing each plaintext file once sealed, and src at
// the end. last, when there, is sealed after all others, so its presence
// in dst says the image is whole. It returns the id of the key used.
func (s *Sealer) SealDir(src, dst, last string) (string, error) {
	key, err := s.sealingKey()
	if err != nil {
		return "", err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return "", fmt.Errorf("reading plaintext image: %w", err)
	}
	sort.SliceStable(ents, func(i, j int) bool { return ents[j].Name() == last && ents[i].Name() != last })
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := sealFile(key, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(src); err != nil {
		return "", fmt.Errorf("removing plaintext image: %w", err)
	}
	return key.ID(), nil
}

func sealFile(key *Key, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("sealing memory image: %w", err)
	}
	defer in.Close()
	tmp := dst + ".sealing"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sealing memory image: %w", err)
	}
	err = key.Seal(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sealing memory image: %w", err)
	}
	// Gone from memory as soon as it is sealed: a large image is never
	// held twice.
	return os.Remove(src)
}

// OpenDir opens the sealed image in src into dst, a directory from
// Scratch. keyID is the key the manifest says sealed it; a different key
// file is refused with both ids. On failure dst is removed.
func (s *Sealer) OpenDir(src, dst, keyID string) (err error) {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	if key == nil || key.ID() != keyID {
		have := "none"
		if key != nil {
			have = key.ID()
		}
		s.log.Error("opening a memory image sealed with another images key", "sealed_with", keyID, "key_id", have, "key_file", s.cfg.KeyFile)
		return errdefs.WithHint(&WrongKeyError{Sealed: keyID, Have: have},
			"give dend the images key file the image was sealed with; or boot its files alone with `den recover NAME --cold`")
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dst)
		}
	}()
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading sealed image: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := openFile(key, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return fmt.Errorf("opening memory image file %s: %w", e.Name(), err)
		}
	}
	return nil
}

func openFile(key *Key, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = key.Open(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// Remove removes a scratch directory.
func (s *Sealer) Remove(dir string) error { return os.RemoveAll(dir) }
