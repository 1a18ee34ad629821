package memimage

import (
	"os"
	"path/filepath"
	"testing"
)

// An image that cannot be synced fails the checkpoint before it is
// recorded; one that can is synced with its directory.
func TestSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	if err := Sync(dir); err == nil {
		t.Fatal("syncing a missing image succeeded")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkpoint.img", "pages_meta.img", "pages.img"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "not-a-file"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Sync(dir); err != nil {
		t.Fatalf("syncing an image: %v", err)
	}
}
