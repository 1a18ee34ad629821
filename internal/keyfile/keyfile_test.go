package keyfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "k.key")
	if err := Create(path, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "dead\n" {
		t.Fatalf("file holds %q, %v", b, err)
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes %v, %v", fi.Mode(), di.Mode())
	}
	if err := Create(path, []byte{1}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("creating again: %v", err)
	}
	if b2, _ := os.ReadFile(path); string(b2) != "dead\n" {
		t.Errorf("a second create changed the file: %q", b2)
	}
}
