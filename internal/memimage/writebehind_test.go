package memimage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WriteBehind follows the files that appear in the image directory, and
// once stopped holds none of them open; a directory not there yet is no
// error.
func TestWriteBehind(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	dir := filepath.Join(t.TempDir(), "image")
	before := fds()
	stop := WriteBehind(dir)
	time.Sleep(2 * writeBehindEvery)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pages.img", "checkpoint.img"} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for fds() < before+2 && time.Now().Before(deadline) {
		time.Sleep(writeBehindEvery / 2)
	}
	if n := fds(); n < before+2 {
		t.Fatalf("%d descriptors open while the image is written, want the image's 2 files among them (%d before)", n, before)
	}
	stop()
	if n := fds(); n != before {
		t.Fatalf("%d descriptors open once stopped, want %d as before", n, before)
	}
}
