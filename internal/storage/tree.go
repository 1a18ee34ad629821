package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
)

// Probe tells whether the directory at path (fi is its Lstat) is a volume,
// and if it is, whether it is read-only. Each driver has its own way to
// tell: a btrfs subvolume root, or a marker file beside a plain directory.
type Probe func(path string, fi fs.FileInfo) (isVolume, readOnly bool, err error)

// Place is what a key names in a pool.
type Place int

// Places.
const (
	Absent    Place = iota // nothing: the key is free
	Volume                 // a volume
	Directory              // a plain directory holding other volumes
	Blocked                // inside a volume, or at or under something that is not a directory
)

// Tree is the layout both drivers share: volume key lives at Root/key, and
// the directories above it are plain directories. Names that start with "."
// are never keys; drivers keep their bookkeeping under them.
type Tree struct {
	Root  string
	Probe Probe
}

// Path is where key lives, or "" when key is invalid.
func (t Tree) Path(key string) string {
	if ValidateKey(key) != nil {
		return ""
	}
	return filepath.Join(t.Root, filepath.FromSlash(key))
}

// Lookup says what the valid key names. For a Volume, info describes it.
// It stops at the first volume on the way down, so it never looks inside
// one (where whoever uses the volume controls the names).
func (t Tree) Lookup(key string) (Place, Info, error) {
	segs := strings.Split(key, "/")
	p := t.Root
	for i, seg := range segs {
		p = filepath.Join(p, seg)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return Absent, Info{}, nil
		}
		if err != nil {
			return 0, Info{}, fmt.Errorf("looking up volume %q: %w", key, err)
		}
		if !fi.IsDir() {
			return Blocked, Info{}, nil
		}
		vol, ro, err := t.Probe(p, fi)
		if err != nil {
			return 0, Info{}, fmt.Errorf("looking up volume %q: %w", key, err)
		}
		last := i == len(segs)-1
		switch {
		case vol && last:
			return Volume, Info{Key: key, Path: p, ReadOnly: ro}, nil
		case vol:
			return Blocked, Info{}, nil
		case last:
			return Directory, Info{}, nil
		}
	}
	return 0, Info{}, errdefs.Invalid("volume key is empty")
}

// List returns the volumes whose key starts with prefix, sorted by key.
func (t Tree) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	dir, partial := SplitKey(prefix)
	if dir != "" {
		place, _, err := t.Lookup(dir)
		if err != nil {
			return nil, err
		}
		if place != Directory {
			return nil, nil // nothing can live under it
		}
	}
	var out []Info
	if err := t.walk(ctx, dir, partial, &out); err != nil {
		return nil, fmt.Errorf("listing volumes %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// walk adds to out the volumes under directory key dir (the root for "")
// whose last-level name starts with partial, and all volumes below the
// plain directories that match.
func (t Tree) walk(ctx context.Context, dir, partial string, out *[]Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	abs := filepath.Join(t.Root, filepath.FromSlash(dir))
	entries, err := os.ReadDir(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	depth := 0
	if dir != "" {
		depth = strings.Count(dir, "/") + 1
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.IsDir() || !strings.HasPrefix(name, partial) {
			continue
		}
		key := name
		if dir != "" {
			key = dir + "/" + name
		}
		p := filepath.Join(abs, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we looked
		}
		if err != nil {
			return err
		}
		vol, ro, err := t.Probe(p, fi)
		if err != nil {
			return err
		}
		switch {
		case vol:
			*out = append(*out, Info{Key: key, Path: p, ReadOnly: ro})
		case depth+1 < MaxKeySegments:
			if err := t.walk(ctx, key, "", out); err != nil {
				return err
			}
		}
	}
	return nil
}

// ApparentSize adds up the sizes of the files and symbolic links under dir,
// counting a file with several links once. Files that vanish during the
// walk are skipped.
func ApparentSize(ctx context.Context, dir string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return ctx.Err()
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			id := inode{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring volume: %w", err)
	}
	return total, nil
}

// Volume finds the existing volume key.
func (t Tree) Volume(key string) (Info, error) {
	place, info, err := t.Lookup(key)
	if err != nil {
		return Info{}, err
	}
	if place != Volume {
		return Info{}, errdefs.NotFound("volume %q not found", key)
	}
	return info, nil
}

// Stat describes volume key.
func (t Tree) Stat(key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	info, err := t.Volume(key)
	if err != nil {
		return Info{}, fmt.Errorf("looking up %q: %w", key, err)
	}
	return info, nil
}

// Usage adds up the sizes of the files in volume key.
func (t Tree) Usage(ctx context.Context, key string) (int64, error) {
	info, err := t.Stat(key)
	if err != nil {
		return 0, err
	}
	n, err := ApparentSize(ctx, info.Path)
	if err != nil {
		return 0, fmt.Errorf("measuring %q: %w", key, err)
	}
	return n, nil
}
