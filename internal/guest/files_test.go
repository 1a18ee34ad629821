package guest_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd"
)

func TestFilesRoundTrip(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")

	if err := c.WriteFile(ctx, file, strings.NewReader("hello"), guest.WriteOptions{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name != "a.txt" || fi.Path != file || fi.Size != 5 || fi.Mode != 0o640 || fi.Type != "file" {
		t.Fatalf("stat = %+v", fi)
	}
	rc, info, err := c.ReadFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" || info.Size != 5 {
		t.Fatalf("read %q, %+v", b, info)
	}

	// Files that say they are empty but are not.
	rc, _, err = c.ReadFile(ctx, "/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(b), "Pid:") {
		t.Fatalf("/proc/self/status read as %q", b)
	}

	// Replacing keeps the mode when none is given.
	if err := c.WriteFile(ctx, file, strings.NewReader("bye"), guest.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := c.Stat(ctx, file); fi.Mode != 0o640 || fi.Size != 3 {
		t.Fatalf("after replace: %+v", fi)
	}
	// An empty file.
	if err := c.WriteFile(ctx, filepath.Join(dir, "empty"), nil, guest.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

}

func TestDirectories(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	must(t, os.WriteFile(file, []byte("a"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))

	sub := filepath.Join(dir, "x", "y")
	if err := c.Mkdir(ctx, guest.MkdirRequest{Path: sub}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("mkdir without parents: %v", err)
	}
	if err := c.Mkdir(ctx, guest.MkdirRequest{Path: sub, Parents: true, Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, guest.MkdirRequest{Path: sub}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("mkdir twice: %v", err)
	}
	if fi, _ := c.Stat(ctx, sub); fi.Type != "dir" || fi.Mode != 0o700 {
		t.Fatalf("mkdir: %+v", fi)
	}
	// With parents, as mkdir -p: a directory there already keeps its
	// mode (E2B's rename makes its destination's directory so, and a
	// rename into /tmp must leave /tmp world-writable and sticky).
	shared := filepath.Join(t.TempDir(), "shared")
	must(t, os.Mkdir(shared, 0o755))
	must(t, os.Chmod(shared, fs.ModeSticky|0o777))
	if err := c.Mkdir(ctx, guest.MkdirRequest{Path: shared, Parents: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shared); err != nil || fi.Mode()&(fs.ModePerm|fs.ModeSticky) != fs.ModeSticky|0o777 {
		t.Fatalf("mkdir with parents of an existing 1777 directory left it %v (%v)", fi.Mode(), err)
	}
	if err := c.Move(ctx, file, filepath.Join(sub, "b.txt")); err != nil {
		t.Fatal(err)
	}
	os.Symlink("x/y/b.txt", filepath.Join(dir, "link"))

	list, err := c.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name+":"+e.Type+":"+e.Target)
	}
	if got := strings.Join(names, " "); got != "empty:file: link:symlink:x/y/b.txt x:dir:" {
		t.Fatalf("list = %s", got)
	}
	// Reading through the link reads the file; writing through it replaces
	// the file, not the link.
	if err := c.WriteFile(ctx, filepath.Join(dir, "link"), strings.NewReader("via link"), guest.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(sub, "b.txt")); string(b) != "via link" {
		t.Fatalf("write through link: %q", b)
	}

	if err := c.Remove(ctx, filepath.Join(dir, "x"), false); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("remove non-empty: %v", err)
	}
	if err := c.Remove(ctx, filepath.Join(dir, "x"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, sub); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("stat removed: %v", err)
	}
}

func TestFileErrors(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	tests := []struct {
		name  string
		do    func() error
		class error
	}{
		{"stat missing", func() error { _, err := c.Stat(ctx, dir+"/missing"); return err }, errdefs.ErrNotFound},
		{"read missing", func() error { _, _, err := c.ReadFile(ctx, dir+"/missing"); return err }, errdefs.ErrNotFound},
		{"read dir", func() error { _, _, err := c.ReadFile(ctx, dir); return err }, errdefs.ErrInvalid},
		{"list file", func() error { _, err := c.ReadDir(ctx, dir+"/f"); return err }, errdefs.ErrInvalid},
		{"write without dir", func() error { return c.WriteFile(ctx, dir+"/no/f", strings.NewReader("x"), guest.WriteOptions{}) }, errdefs.ErrNotFound},
		{"write over dir", func() error { return c.WriteFile(ctx, dir, strings.NewReader("x"), guest.WriteOptions{}) }, errdefs.ErrInvalid},
		{"bad mode", func() error {
			return c.WriteFile(ctx, dir+"/g", strings.NewReader("x"), guest.WriteOptions{Mode: 0o17777})
		}, errdefs.ErrInvalid},
		{"remove root", func() error { return c.Remove(ctx, "/", true) }, errdefs.ErrInvalid},
		{"remove missing", func() error { return c.Remove(ctx, dir+"/missing", false) }, errdefs.ErrNotFound},
		{"move missing", func() error { return c.Move(ctx, dir+"/missing", dir+"/g") }, errdefs.ErrNotFound},
		{"move into missing dir", func() error { return c.Move(ctx, dir+"/f", dir+"/no/g") }, errdefs.ErrNotFound},
		{"move into itself", func() error { return c.Move(ctx, dir, dir+"/inside") }, errdefs.ErrInvalid},
		{"mkdir over file", func() error { return c.Mkdir(ctx, guest.MkdirRequest{Path: dir + "/f", Parents: true}) }, errdefs.ErrConflict},
		{"archive missing", func() error { _, err := c.ReadTar(ctx, dir+"/missing"); return err }, errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.class) {
				t.Fatalf("got %v, want class %v", err, tt.class)
			}
		})
	}
}

// Every file route validates its path the same way.
func TestPathValidation(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	for _, p := range []string{"", "relative", "./x", "/a/../b", "/..", "/a\x00b"} {
		t.Run(p, func(t *testing.T) {
			for name, err := range map[string]error{
				"stat":  func() error { _, err := c.Stat(ctx, p); return err }(),
				"list":  func() error { _, err := c.ReadDir(ctx, p); return err }(),
				"read":  func() error { _, _, err := c.ReadFile(ctx, p); return err }(),
				"write": c.WriteFile(ctx, p, strings.NewReader("x"), guest.WriteOptions{}),
				"mkdir": c.Mkdir(ctx, guest.MkdirRequest{Path: p, Parents: true}),
				"rm":    c.Remove(ctx, p, true),
				"mv":    c.Move(ctx, p, "/tmp/x"),
				"tar":   func() error { _, err := c.ReadTar(ctx, p); return err }(),
				"untar": c.WriteTar(ctx, p, bytes.NewReader(nil)),
			} {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Errorf("%s %q: %v, want invalid", name, p, err)
				}
			}
		})
	}
}

// pattern is a long deterministic byte stream, generated as it is read.
type pattern struct {
	n, size int64
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.n >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-p.n)]
	for i := range b {
		x := p.n + int64(i)
		b[i] = byte(x ^ x>>8 ^ x>>16)
	}
	p.n += int64(len(b))
	return len(b), nil
}

// heapWatch samples HeapInuse until stopped and returns the highest.
func heapWatch() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// A big file goes through den-init as a stream, never whole in memory.
func TestLargeFileStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	const size = 200 << 20
	const ceiling = 48 << 20 // far below the file's size
	c := serve(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "big")
	runtime.GC()

	stop := heapWatch()
	want := sha256.New()
	if err := c.WriteFile(ctx, file, io.TeeReader(&pattern{size: size}, want), guest.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, fi, err := c.ReadFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, rc)
	rc.Close()
	peak := stop()
	if err != nil || n != size || fi.Size != size {
		t.Fatalf("read back %d bytes (info says %d): %v", n, fi.Size, err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("content differs")
	}
	if peak > ceiling {
		t.Fatalf("heap in use peaked at %d MB moving a %d MB file", peak>>20, size>>20)
	}
	t.Logf("heap peak %d MB for a %d MB file", peak>>20, size>>20)
}

func TestArchiveRoundTrip(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	src := t.TempDir()
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	must(t, os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha"), 0o600))
	must(t, os.WriteFile(filepath.Join(src, "sub", "b.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("../a.txt", filepath.Join(src, "sub", "link")))
	must(t, os.Link(filepath.Join(src, "a.txt"), filepath.Join(src, "sub", "hard")))
	must(t, os.Chtimes(filepath.Join(src, "a.txt"), mtime, mtime))
	must(t, os.Chmod(filepath.Join(src, "sub", "deep"), 0o711))
	must(t, os.Chtimes(filepath.Join(src, "sub", "deep"), mtime, mtime))
	if os.Geteuid() == 0 {
		must(t, os.Lchown(filepath.Join(src, "sub", "b.sh"), 1234, 5678))
	}

	rc, err := c.ReadTar(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "a.txt sub/ sub/b.sh sub/deep/ sub/hard sub/link" {
		t.Fatalf("entries: %s", got)
	}

	dst := filepath.Join(t.TempDir(), "new", "dir")
	if err := c.WriteTar(ctx, dst, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	check := func(rel string, mode os.FileMode) os.FileInfo {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Fatalf("%s: mode %v, want %v", rel, fi.Mode(), mode)
		}
		return fi
	}
	if fi := check("a.txt", 0o600); !fi.ModTime().Equal(mtime) {
		t.Fatalf("a.txt mtime %v, want %v", fi.ModTime(), mtime)
	}
	if fi := check("sub/deep", os.ModeDir|0o711); !fi.ModTime().Equal(mtime) {
		t.Fatalf("dir mtime %v, want %v", fi.ModTime(), mtime)
	}
	b := check("sub/b.sh", 0o755)
	if os.Geteuid() == 0 {
		if st := b.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 5678 {
			t.Fatalf("owner %d:%d", st.Uid, st.Gid)
		}
	}
	check("sub/link", os.ModeSymlink|0o777)
	if target, _ := os.Readlink(filepath.Join(dst, "sub", "link")); target != "../a.txt" {
		t.Fatalf("link target %q", target)
	}
	a, h := check("a.txt", 0o600), check("sub/hard", 0o600)
	if !os.SameFile(a, h) {
		t.Fatal("hard link became a copy")
	}
}

// A single file comes as one entry named by its base name.
func TestArchiveOfFile(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "b.sh")
	must(t, os.WriteFile(file, []byte("#!/bin/sh\n"), 0o755))
	rc, err := c.ReadTar(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "b.sh" || hdr.Mode != 0o755 {
		t.Fatalf("single file entry: %+v, %v", hdr, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("more than one entry: %v", err)
	}
	rc.Close()
}

// Archives cannot write outside the directory they are extracted into.
func TestArchiveEscapes(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	type entry struct {
		name, link string
		typ        byte
		body       string
	}
	tests := []struct {
		name    string
		entries []entry
		refused bool   // else extracted, but contained
		inside  string // a file the archive wrote, resolved inside the directory
	}{
		{"absolute name", []entry{{name: "/outside/x", typ: tar.TypeReg, body: "x"}}, true, ""},
		{"dot dot", []entry{{name: "../outside/x", typ: tar.TypeReg, body: "x"}}, true, ""},
		{"dot dot inside", []entry{{name: "a/../../outside/x", typ: tar.TypeReg, body: "x"}}, true, ""},
		{"hard link out", []entry{{name: "h", link: "../outside/victim", typ: tar.TypeLink}}, true, ""},
		{"symlink then write through", []entry{
			{name: "s", link: "../outside", typ: tar.TypeSymlink},
			{name: "s/victim", typ: tar.TypeReg, body: "pwned"},
		}, false, "outside/victim"},
		{"absolute symlink then write through", []entry{
			{name: "s", link: "OUTSIDE", typ: tar.TypeSymlink},
			{name: "s/victim", typ: tar.TypeReg, body: "pwned"},
		}, false, "BASE/outside/victim"},
		{"symlink then dir through", []entry{
			{name: "s", link: "../../../../../../../..", typ: tar.TypeSymlink},
			{name: "s/outside/newdir/", typ: tar.TypeDir},
			{name: "s/outside/newdir/f", typ: tar.TypeReg, body: "x"},
		}, false, "outside/newdir/f"},
		{"replace symlink, not write through it", []entry{
			{name: "s", link: "OUTSIDE/victim", typ: tar.TypeSymlink},
			{name: "s", typ: tar.TypeReg, body: "pwned"},
		}, false, "s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			must(t, os.Mkdir(outside, 0o755))
			must(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("safe"), 0o644))
			dir := filepath.Join(base, "dir")
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tt.entries {
				link := strings.ReplaceAll(e.link, "OUTSIDE", outside)
				must(t, tw.WriteHeader(&tar.Header{Name: e.name, Linkname: link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}))
				tw.Write([]byte(e.body))
			}
			tw.Close()
			err := c.WriteTar(ctx, dir, &buf)
			if tt.refused && !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("extract: %v, want invalid", err)
			}
			if !tt.refused && err != nil {
				t.Fatalf("extract: %v", err)
			}
			ents, _ := os.ReadDir(outside)
			if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "safe" || len(ents) != 1 {
				t.Fatalf("outside changed: victim %q, %d entries", b, len(ents))
			}
			if ents, _ := os.ReadDir(base); len(ents) != 2 {
				t.Fatalf("%d entries beside the directory", len(ents))
			}
			if tt.inside != "" {
				// Paths resolve as if the directory were the root.
				in := filepath.Join(dir, strings.ReplaceAll(tt.inside, "BASE", base))
				if fi, err := os.Lstat(in); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("%s: %v, want the written file there", tt.inside, err)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Files and directories can be made for a user of the sandbox, and stat
// names owners from the sandbox's own passwd and group.
func TestFilesOwnedByUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	etc := t.TempDir()
	must(t, os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\ntester:x:1234:1300::/home/tester:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\ntesters:x:1300:\n"), 0o644))
	c := serve(t, func(cfg *initd.Config) { cfg.EtcDir = etc })
	ctx := context.Background()
	dir := t.TempDir()

	file := filepath.Join(dir, "a", "b", "f.txt")
	if err := c.WriteFile(ctx, file, strings.NewReader("x"), guest.WriteOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("write without its directory: %v, want not found", err)
	}
	if err := c.WriteFile(ctx, file, strings.NewReader("x"), guest.WriteOptions{User: "tester", Parents: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")} {
		fi, err := c.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.UID != 1234 || fi.GID != 1300 || fi.Owner != "tester" || fi.Group != "testers" {
			t.Errorf("%s: %+v, want tester:testers", p, fi)
		}
	}
	if fi, err := c.Stat(ctx, dir); err != nil || fi.UID != 0 || fi.Owner != "root" {
		t.Errorf("the existing directory changed hands: %+v %v", fi, err)
	}
	if fi, _ := c.Stat(ctx, file); fi.Mode != 0o644 {
		t.Errorf("new file mode %o, want 644", fi.Mode)
	}

	sub := filepath.Join(dir, "m", "n")
	if err := c.Mkdir(ctx, guest.MkdirRequest{Path: sub, Parents: true, User: "1234:0"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, filepath.Join(dir, "m")); err != nil || fi.UID != 1234 || fi.GID != 0 || fi.Group != "root" {
		t.Errorf("mkdir as 1234:0: %+v %v", fi, err)
	}
	for name, err := range map[string]error{
		"write": c.WriteFile(ctx, filepath.Join(dir, "g"), strings.NewReader("x"), guest.WriteOptions{User: "nobody"}),
		"mkdir": c.Mkdir(ctx, guest.MkdirRequest{Path: filepath.Join(dir, "h"), User: "nobody"}),
	} {
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s as an unknown user: %v, want invalid", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "h")); err == nil {
		t.Error("the refused mkdir made its directory")
	}
}

// A watch reports what changes under a directory, in directories made
// after it began too, and ends when the directory goes away.
func TestWatch(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "w")
	must(t, os.Mkdir(root, 0o755))

	events := make(chan guest.WatchEvent, 100)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, root, true, func() { close(ready) }, func(ev guest.WatchEvent) error {
			events <- ev
			return nil
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("watch: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	waitEvent(t, events, guest.WatchEvent{Name: "sub", Op: guest.WatchCreate})
	must(t, os.WriteFile(filepath.Join(root, "sub", "b.txt"), []byte("y"), 0o644))
	must(t, os.Rename(filepath.Join(root, "a.txt"), filepath.Join(root, "c.txt")))
	must(t, os.Chmod(filepath.Join(root, "c.txt"), 0o600))
	must(t, os.Remove(filepath.Join(root, "c.txt")))
	for _, want := range []guest.WatchEvent{
		{Name: filepath.Join("sub", "b.txt"), Op: guest.WatchCreate},
		{Name: filepath.Join("sub", "b.txt"), Op: guest.WatchWrite},
		{Name: "a.txt", Op: guest.WatchRename},
		{Name: "c.txt", Op: guest.WatchCreate},
		{Name: "c.txt", Op: guest.WatchChmod},
		{Name: "c.txt", Op: guest.WatchRemove},
	} {
		waitEvent(t, events, want)
	}
	must(t, os.RemoveAll(root))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the watch of a removed directory ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch of a removed directory did not end")
	}

	for name, p := range map[string]string{"missing": filepath.Join(dir, "nope"), "a file": filepath.Join(dir, "f")} {
		os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
		err := c.Watch(ctx, p, false, func() { t.Errorf("watching %s began", name) }, func(guest.WatchEvent) error { return nil })
		if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("watching %s: %v", name, err)
		}
	}
}

// waitEvent reads events until want comes, failing after a while.
func waitEvent(t *testing.T, events <-chan guest.WatchEvent, want guest.WatchEvent) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var seen []guest.WatchEvent
	for {
		select {
		case ev := <-events:
			if ev == want {
				return
			}
			seen = append(seen, ev)
		case <-deadline:
			t.Fatalf("no %+v; saw %+v", want, seen)
		}
	}
}

// User extended attributes: set with a write, shown by stat and list,
// kept by a write that replaces the file; other namespaces refused.
func TestFilesXattrs(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "m.txt")
	if err := syscall.Setxattr(dir, "user.den.probe", []byte("x"), 0); err != nil {
		t.Skipf("the test directory's file system keeps no user attributes: %v", err)
	}
	o := guest.WriteOptions{Xattrs: map[string]string{"user.e2b.owner": "alice", "user.e2b.empty": ""}}
	if err := c.WriteFile(ctx, file, strings.NewReader("1"), o); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(fi.Xattrs) != 2 || fi.Xattrs["user.e2b.owner"] != "alice" || fi.Xattrs["user.e2b.empty"] != "" {
		t.Fatalf("stat's xattrs = %v", fi.Xattrs)
	}
	// Replaced: the old attributes stay, the new ones win.
	o = guest.WriteOptions{Xattrs: map[string]string{"user.e2b.owner": "bob"}}
	if err := c.WriteFile(ctx, file, strings.NewReader("2"), o); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, file, strings.NewReader("3"), guest.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Xattrs["user.e2b.owner"] != "bob" || len(list[0].Xattrs) != 2 {
		t.Fatalf("list = %+v", list)
	}
	dirInfo, err := c.Stat(ctx, dir)
	if err != nil || dirInfo.Xattrs["user.den.probe"] != "x" {
		t.Errorf("a directory's attributes: %+v %v", dirInfo.Xattrs, err)
	}
	for _, bad := range []map[string]string{
		{"trusted.x": "1"}, {"user.": "1"}, {"user.big": strings.Repeat("v", guest.MaxXattrValueBytes+1)},
	} {
		err := c.WriteFile(ctx, filepath.Join(dir, "bad.txt"), strings.NewReader("x"), guest.WriteOptions{Xattrs: bad})
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("writing with xattrs %.40v: %v, want invalid", bad, err)
		}
	}
	if _, err := c.Stat(ctx, filepath.Join(dir, "bad.txt")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused write left a file: %v", err)
	}
}
