package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestCopyPath(t *testing.T) {
	ctx := t.Context()
	from, to := t.TempDir(), t.TempDir()
	write := func(root, p, data string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(from, "work/a/notes.txt", "mine")
	if err := os.Symlink("notes.txt", filepath.Join(from, "work/a/link")); err != nil {
		t.Fatal(err)
	}
	write(to, "work/image-file", "the image's")
	var c PathCopier

	copied, err := c.CopyPath(ctx, from, to, "/work")
	if err != nil || !copied {
		t.Fatalf("CopyPath(/work) = %v, %v", copied, err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "work/a/notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("copied file = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(to, "work/a/notes.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("copied mode = %v, %v; want 0640", fi.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(to, "work/a/link")); err != nil || l != "notes.txt" {
		t.Errorf("symlink copied as %q, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(to, "work/image-file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the new root's own /work was not replaced: %v", err)
	}

	// Nothing there: nothing changes.
	if copied, err := c.CopyPath(ctx, from, to, "/srv"); err != nil || copied {
		t.Errorf("CopyPath(/srv) = %v, %v; want false, nil", copied, err)
	}

	// A symlink on the way leads out of the root: refused.
	outside := t.TempDir()
	write(outside, "secret", "host")
	if err := os.Symlink(outside, filepath.Join(from, "opt")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyPath(ctx, from, to, "/opt/secret"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("CopyPath through a symlink in the old root = %v, want conflict", err)
	}
	write(from, "data/x", "x")
	if err := os.Symlink(outside, filepath.Join(to, "data")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyPath(ctx, from, to, "/data/x"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("CopyPath through a symlink in the new root = %v, want conflict", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written outside the root: %v", err)
	}

	// A kept path that is itself a symlink would keep the link, not what
	// it points to: refused, naming the path and no host path, and
	// nothing is written in the new root.
	write(outside, "data/y", "host")
	if err := os.Symlink(filepath.Join(outside, "data"), filepath.Join(from, "keep")); err != nil {
		t.Fatal(err)
	}
	write(to, "keep/image-file", "the image's")
	_, err = c.CopyPath(ctx, from, to, "/keep")
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "/keep") || strings.Contains(err.Error(), from) || errdefs.Hint(err) == "" {
		t.Errorf("CopyPath of a symlink = %v, want a conflict naming /keep with a hint", err)
	}
	if _, err := os.Stat(filepath.Join(to, "keep/image-file")); err != nil {
		t.Errorf("the new root's /keep was touched: %v", err)
	}
	// A file on the way is refused too.
	write(from, "plain", "a file")
	if _, err := c.CopyPath(ctx, from, to, "/plain/x"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("CopyPath under a file = %v, want conflict", err)
	}
	if _, err := c.CopyPath(ctx, from, to, "../etc"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("CopyPath(../etc) = %v, want invalid", err)
	}
}
