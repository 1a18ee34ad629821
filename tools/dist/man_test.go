package main

import (
	"os"
	"path/filepath"
	"testing"
)

// make install's man pages land where man finds them, by section.
func TestPlaceMan(t *testing.T) {
	_, gen := fakeBuild(t)
	dir := t.TempDir()
	if err := placeMan(gen.man, dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"man1/den.1.gz": "1", "man8/dend.8.gz": "8"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
}
