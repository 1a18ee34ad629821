package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store/sqlite"
)

// dirPool is a storage pool over plain directories: the storage drivers
// live in another package and have their own conformance suite.
type dirPool struct {
	root string

	mu      sync.Mutex
	creates int
	sealed  map[string]bool
}

func newDirPool(t *testing.T) *dirPool {
	return &dirPool{root: filepath.Join(t.TempDir(), "pool"), sealed: map[string]bool{}}
}

func (p *dirPool) Path(key string) string { return filepath.Join(p.root, filepath.FromSlash(key)) }

func (p *dirPool) Create(_ context.Context, key string) (string, error) {
	path := p.Path(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", errdefs.Conflict("volume %q exists", key)
		}
		return "", err
	}
	p.mu.Lock()
	p.creates++
	p.mu.Unlock()
	return path, nil
}

func (p *dirPool) Seal(_ context.Context, key string) error {
	if _, err := os.Lstat(p.Path(key)); err != nil {
		return errdefs.NotFound("volume %q", key)
	}
	p.mu.Lock()
	p.sealed[key] = true
	p.mu.Unlock()
	return nil
}

func (p *dirPool) Remove(_ context.Context, key string) error {
	if _, err := os.Lstat(p.Path(key)); err != nil {
		return errdefs.NotFound("volume %q", key)
	}
	p.mu.Lock()
	delete(p.sealed, key)
	p.mu.Unlock()
	return os.RemoveAll(p.Path(key))
}

func (p *dirPool) Usage(_ context.Context, key string) (int64, error) {
	var n int64
	err := filepath.WalkDir(p.Path(key), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	return n, err
}

func (p *dirPool) createCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates
}

// volumes lists the image volumes in the pool.
func (p *dirPool) volumes(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.root, "images"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

type fixture struct {
	pool    *dirPool
	records *sqlite.Store
	m       *Manager
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	records, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { records.Close() })
	f := &fixture{pool: newDirPool(t), records: records}
	cfg := Config{Pool: f.pool, Records: f.records, TempDir: t.TempDir()}
	for _, fn := range mutate {
		fn(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// assertNothingOf checks that image name left neither volume nor record.
func (f *fixture) assertNothingOf(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Lstat(f.pool.Path(volumeKey(name, 1))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume of %q left behind (lstat: %v)", name, err)
	}
	if _, err := f.records.GetImage(context.Background(), name); err == nil {
		t.Errorf("record of %q written", name)
	}
}

func assertClass(t *testing.T, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v: want class %v, got %v", err, class, errdefs.Class(err))
	}
}

// ent is one tar entry for tarOf.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
	mtime            time.Time
}

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func file(name, body string) ent { return ent{name: name, body: body, typ: tar.TypeReg, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, link: target, typ: tar.TypeSymlink, mode: 0o777}
}
func hardlink(name, target string) ent { return ent{name: name, link: target, typ: tar.TypeLink} }

// tarOf writes entries as a tar stream.
func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		mt := e.mtime
		if mt.IsZero() {
			mt = testTime
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mt, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tree describes every path under root: "dir 0755", "file 0644 body",
// "link -> target".
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		perm := unixPerm(fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = "dir " + perm
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %s %s", perm, b)
		default:
			out[rel] = "special " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func unixPerm(m fs.FileMode) string {
	p := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	return fmt.Sprintf("%04o", p)
}

func diffTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("  %s: got %q, want %q", k, got[k], want[k]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("tree differs:\n%s", strings.Join(diffs, "\n"))
	}
}
