package memimage

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// copySealer "seals" by copying StateFile, in t's temporary directory.
type copySealer struct {
	t       *testing.T
	key     string
	removed []string
}

func (f *copySealer) Scratch(name string) (string, error) {
	dir := filepath.Join(f.t.TempDir(), name)
	return dir, os.Mkdir(dir, 0o700)
}

func (f *copySealer) SealDir(src, dst, last string) (string, error) {
	b, err := os.ReadFile(filepath.Join(src, last))
	if err != nil {
		return "", err
	}
	return f.key, os.WriteFile(filepath.Join(dst, last), b, 0o600)
}

func (f *copySealer) OpenDir(src, dst, keyID string) error { return nil }
func (f *copySealer) Ready() error                         { return nil }
func (f *copySealer) KeyID() string                        { return f.key }

func (f *copySealer) Remove(dir string) error {
	f.removed = append(f.removed, dir)
	return os.RemoveAll(dir)
}

func TestImagesMakeSumVerify(t *testing.T) {
	im := NewImages(filepath.Join(t.TempDir(), "checkpoints"), nil, slog.New(slog.DiscardHandler))
	dir, err := im.Make("ck1")
	if err != nil || dir != im.Dir("ck1") {
		t.Fatalf("Make = %q, %v", dir, err)
	}
	if im.Whole("ck1") {
		t.Fatal("an image without its state file is whole")
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte("state"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !im.Whole("ck1") {
		t.Fatal("an image with its state file is not whole")
	}
	files, total, err := im.Sum("ck1")
	if err != nil || total != 5 || len(files) != 1 {
		t.Fatalf("Sum = %v, %d, %v", files, total, err)
	}
	if err := im.StartSync("ck1")(); err != nil {
		t.Fatal(err)
	}
	if err := im.Verify("ck1", files); err != nil {
		t.Fatalf("Verify of an intact image: %v", err)
	}
	os.WriteFile(filepath.Join(dir, StateFile), []byte("stale"), 0o600)
	if err := im.Verify("ck1", files); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "does not match its manifest") {
		t.Fatalf("Verify of a damaged image: %v", err)
	}
	if err := im.Verify("gone", files); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "is unreadable") {
		t.Fatalf("Verify of a missing image: %v", err)
	}
	if err := im.Remove("ck1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("removed image still there: %v", err)
	}
}

func TestImagesSealed(t *testing.T) {
	f := &copySealer{t: t, key: "k1"}
	im := NewImages(t.TempDir(), f, slog.New(slog.DiscardHandler))
	if !im.Seals() || im.KeyID() != "k1" {
		t.Fatalf("Seals = %v, KeyID = %q", im.Seals(), im.KeyID())
	}
	if _, err := im.Make("ck1"); err != nil {
		t.Fatal(err)
	}
	keyID, err := im.SaveSealed("ck1", func(dir string) error {
		return os.WriteFile(filepath.Join(dir, StateFile), []byte("state"), 0o600)
	})
	if err != nil || keyID != "k1" || !im.Whole("ck1") {
		t.Fatalf("SaveSealed = %q, %v", keyID, err)
	}
	if err := im.CheckKey("ck1", "k1"); err != nil {
		t.Fatalf("CheckKey with our key: %v", err)
	}
	if err := im.CheckKey("ck1", "k2"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "sealed with images key k2, but dend's images key is k1") {
		t.Fatalf("CheckKey with another key: %v", err)
	}
	dir, done, err := im.Open("ck1", "k1", "inst")
	if err != nil || dir == im.Dir("ck1") {
		t.Fatalf("Open of a sealed image = %q, %v", dir, err)
	}
	done()
	if len(f.removed) != 2 || f.removed[1] != dir {
		t.Fatalf("opened image not removed: %v", f.removed)
	}

	// Without a sealer, a plain image opens in place; a sealed one cannot.
	plain := NewImages(t.TempDir(), nil, slog.New(slog.DiscardHandler))
	if dir, _, err := plain.Open("ck1", "", "inst"); err != nil || dir != plain.Dir("ck1") {
		t.Fatalf("Open of a plain image = %q, %v", dir, err)
	}
	if _, _, err := plain.Open("ck1", "k1", "inst"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no images key") {
		t.Fatalf("Open of a sealed image without a sealer: %v", err)
	}
	if err := plain.CheckKey("ck1", "k1"); err == nil || !strings.Contains(err.Error(), "dend's images key is none") {
		t.Fatalf("CheckKey without a sealer: %v", err)
	}
}
