// Package keyfile writes dend's keys to files: hex digits and a newline,
// 0600, made once and on disk before they are used.
package keyfile

import (
	"encoding/hex"
	"os"
	"path/filepath"
)

// Create writes key to a new file at path (0600, in a directory made
// 0700 when missing), synced to disk with its directory entry. When the
// file exists already (another process made it first) the error wraps
// fs.ErrExist and the file is left as it is; after any other failure no
// file is left.
func Create(path string, key []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// syncDir makes a new entry in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
