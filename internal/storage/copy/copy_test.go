package copy_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/den-dev/den/internal/storage"
	copydriver "github.com/den-dev/den/internal/storage/copy"
	"github.com/den-dev/den/internal/storage/storagetest"
)

func TestStorageCopy(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Driver {
		d, err := copydriver.Open(filepath.Join(t.TempDir(), "pool"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		// Volumes may hold directories a user other than root cannot
		// empty: remove them the driver's way before t.TempDir tries.
		t.Cleanup(func() {
			list, err := d.List(context.Background(), "")
			if err != nil {
				t.Error(err)
			}
			for _, v := range list {
				if err := d.Remove(context.Background(), v.Key); err != nil {
					t.Error(err)
				}
			}
		})
		return d
	})
}

// A crash leaves half-made and half-removed volumes in the bookkeeping
// directories; the next Open clears them and they never show as volumes.
func TestStorageCopyOpenClearsLeftovers(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	d, err := copydriver.Open(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(t.Context(), "images/kept"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".tmp/snap-1/v/etc/file", ".trash/rm-1/v/locked/file"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("left over"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, ".trash/rm-1/v/locked"), 0o500); err != nil {
		t.Fatal(err)
	}

	d, err = copydriver.Open(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{".tmp", ".trash"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil || len(entries) != 0 {
			t.Errorf("%s after Open: %d entries, %v; want it empty", sub, len(entries), err)
		}
	}
	list, err := d.List(t.Context(), "")
	if err != nil || len(list) != 1 || list[0].Key != "images/kept" {
		t.Errorf("List after reopening = %+v, %v; want just images/kept", list, err)
	}
}
