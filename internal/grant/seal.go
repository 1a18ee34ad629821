package grant

import "fmt"

// A sandbox that was ever granted secrets may hold one in memory den does
// not see: a process that shed the holders' mark, a copy in its tmpfs.
// Its memory images are sealed (encrypted and authenticated) before they
// reach a disk: the engine writes the plaintext into a scratch directory
// in memory, the sealer seals it into the checkpoint's directory and
// removes it; a restore opens it into memory again, and the scratch copy
// is removed as soon as the engine holds it. Sandboxes never granted a
// secret keep the direct path.

// Sealer seals memory images under a key kept apart from them.
type Sealer interface {
	// Scratch makes a new empty directory named name in memory (never on
	// a disk) for a plaintext image.
	Scratch(name string) (string, error)
	// SealDir seals the image in src into dst, removing src; last is
	// sealed after every other file. It returns the sealing key's id.
	SealDir(src, dst, last string) (keyID string, err error)
	// OpenDir opens the image in src, sealed with keyID, into dst, a
	// Scratch directory; it refuses any other key.
	OpenDir(src, dst, keyID string) error
	// Ready refuses, before an image is written, to seal with a key other
	// than the one the images here were sealed with.
	Ready() error
	// KeyID names the key new images are sealed with, "" before the first.
	KeyID() string
	// Remove removes a Scratch directory.
	Remove(dir string) error
}

// Seal has save write a memory image into a Scratch directory named
// name, and seals it into dst, last after every other file, never leaving
// the plaintext on a disk. It returns the sealing key's id.
func Seal(s Sealer, name, dst, last string, save func(dir string) error) (keyID string, err error) {
	if err := s.Ready(); err != nil {
		return "", err
	}
	plain, err := s.Scratch(name)
	if err != nil {
		return "", fmt.Errorf("saving memory: %w", err)
	}
	defer s.Remove(plain)
	if err := save(plain); err != nil {
		return "", fmt.Errorf("saving memory: %w", err)
	}
	keyID, err = s.SealDir(plain, dst, last)
	if err != nil {
		return "", fmt.Errorf("sealing memory: %w", err)
	}
	return keyID, nil
}

// Open opens the memory image of checkpoint in src, sealed with keyID,
// into a Scratch directory named name, and returns that directory: the
// caller removes it once the engine holds the image.
func Open(s Sealer, src, name, checkpoint, keyID string) (string, error) {
	plain, err := s.Scratch(name)
	if err != nil {
		return "", err
	}
	if err := s.OpenDir(src, plain, keyID); err != nil {
		s.Remove(plain)
		return "", fmt.Errorf("opening the sealed memory image of checkpoint %s: %w", checkpoint, err)
	}
	return plain, nil
}

// KeyName names the key s seals new images with, for a message: "none"
// without a sealer or before its first image.
func KeyName(s Sealer) string {
	if s == nil || s.KeyID() == "" {
		return "none"
	}
	return s.KeyID()
}
