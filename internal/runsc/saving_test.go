package runsc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A process writes an image while it holds one of the image's files open
// to write, also once the image's directory is removed; one it holds to
// read (a restore loading pages), or another file it writes, is no save.
func TestWritesImage(t *testing.T) {
	self := "/proc/self"
	dir := t.TempDir()
	open := func(name string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), flag|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	want := func(what string, saving bool) {
		t.Helper()
		got, err := writesImage(self)
		if err != nil || got != saving {
			t.Fatalf("%s: writesImage = %v, %v; want %v", what, got, err, saving)
		}
	}
	want("nothing open", false)
	other := open("notes.img", os.O_RDWR)
	want("another file open to write", false)
	other.Close()
	pages := open("pages.img", os.O_RDONLY)
	want("an image file open to read", false)
	pages.Close()
	state := open("checkpoint.img", os.O_WRONLY)
	want("an image file open to write", true)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	want("an image file open to write, its directory removed", true)
	state.Close()
	want("the image's files closed", false)
	if got, err := writesImage("/proc/0"); err != nil || got {
		t.Fatalf("writesImage of no process = %v, %v; want false", got, err)
	}
}

// Saving reads the engine's pid from runsc's record, here one naming this
// test's own process; an instance runsc holds no record of saves nothing.
func TestSaving(t *testing.T) {
	r := &Runtime{cfg: Config{Root: t.TempDir()}}
	ctx := context.Background()
	if saving, err := r.Saving(ctx, "gone-g1"); err != nil || saving {
		t.Fatalf("Saving of an instance runsc does not know = %v, %v; want false", saving, err)
	}
	sf := r.stateFile("sb-g1")
	rec := fmt.Sprintf(`{"status":"running","sandbox":{"pid":%d,"controlSocketPath":"/run/x.sock"}}`, os.Getpid())
	if err := os.WriteFile(sf.lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf.path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if saving, err := r.Saving(ctx, "sb-g1"); err != nil || saving {
		t.Fatalf("Saving of an engine with no image open = %v, %v; want false", saving, err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "pages.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if saving, err := r.Saving(ctx, "sb-g1"); err != nil || !saving {
		t.Fatalf("Saving of an engine writing an image = %v, %v; want true", saving, err)
	}
}
