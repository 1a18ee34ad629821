// Package atomicfile replaces a file whole or not at all: a reader, a
// sandbox booting or a dend starting after a crash sees the old content
// or the new one, never half of one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data and mode: a temporary file beside it,
// synced, renamed over it, and the directory synced, so the new content
// survives a crash once Write returns.
func Write(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
