package grant

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeSealer "seals" by copying, in t's temporary directory.
type fakeSealer struct {
	t       *testing.T
	key     string
	ready   error
	openErr error
	scratch []string
	removed []string
}

func (f *fakeSealer) Scratch(name string) (string, error) {
	dir := filepath.Join(f.t.TempDir(), name)
	f.scratch = append(f.scratch, dir)
	return dir, os.Mkdir(dir, 0o700)
}

func (f *fakeSealer) SealDir(src, dst, last string) (string, error) {
	b, err := os.ReadFile(filepath.Join(src, last))
	if err != nil {
		return "", err
	}
	return f.key, os.WriteFile(filepath.Join(dst, last), append([]byte("sealed:"), b...), 0o600)
}

func (f *fakeSealer) OpenDir(src, dst, keyID string) error { return f.openErr }
func (f *fakeSealer) Ready() error                         { return f.ready }
func (f *fakeSealer) KeyID() string                        { return f.key }

func (f *fakeSealer) Remove(dir string) error {
	f.removed = append(f.removed, dir)
	return os.RemoveAll(dir)
}

func TestSeal(t *testing.T) {
	f := &fakeSealer{t: t, key: "k1"}
	dst := t.TempDir()
	keyID, err := Seal(f, "ck-1", dst, "checkpoint.img", func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("state"), 0o600)
	})
	if err != nil || keyID != "k1" {
		t.Fatalf("Seal = %q, %v", keyID, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "checkpoint.img")); err != nil || string(b) != "sealed:state" {
		t.Fatalf("sealed image %q, %v", b, err)
	}
	if len(f.removed) != 1 || f.removed[0] != f.scratch[0] {
		t.Fatalf("scratch %v, removed %v", f.scratch, f.removed)
	}

	// A failed save is told as such, and its plaintext removed.
	boom := errors.New("engine failed")
	if _, err := Seal(f, "ck-2", dst, "checkpoint.img", func(string) error { return boom }); !errors.Is(err, boom) || err.Error() != "saving memory: engine failed" {
		t.Fatalf("failed save: %v", err)
	}
	if len(f.removed) != 2 {
		t.Fatalf("scratch of a failed save kept: %v", f.removed)
	}
	// A sealer that is not ready is asked before anything is written.
	f.ready = errors.New("another key")
	if _, err := Seal(f, "ck-3", dst, "checkpoint.img", func(string) error { t.Fatal("saved"); return nil }); err != f.ready {
		t.Fatalf("not ready: %v", err)
	}
}

func TestOpen(t *testing.T) {
	f := &fakeSealer{t: t, key: "k1"}
	dir, err := Open(f, t.TempDir(), "restore-i1", "ck1", "k1")
	if err != nil || dir != f.scratch[0] || len(f.removed) != 0 {
		t.Fatalf("Open = %q, %v; removed %v", dir, err, f.removed)
	}
	f.openErr = errors.New("wrong key")
	if _, err := Open(f, t.TempDir(), "restore-i2", "ck1", "k2"); !errors.Is(err, f.openErr) ||
		err.Error() != "opening the sealed memory image of checkpoint ck1: wrong key" {
		t.Fatalf("failed open: %v", err)
	}
	if len(f.removed) != 1 || f.removed[0] != f.scratch[1] {
		t.Fatalf("scratch of a failed open kept: %v", f.removed)
	}
}

func TestKeyName(t *testing.T) {
	if got := KeyName(nil); got != "none" {
		t.Errorf("no sealer: %q", got)
	}
	if got := KeyName(&fakeSealer{}); got != "none" {
		t.Errorf("no key yet: %q", got)
	}
	if got := KeyName(&fakeSealer{key: "k1"}); got != "k1" {
		t.Errorf("KeyName = %q", got)
	}
}
