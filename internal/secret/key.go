package secret

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// keyBytes is the size of an AES-256 key.
const keyBytes = 32

// keyID names a key without saying anything about it: the start of a
// digest of it, under a label of its own.
func keyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("den secrets key id\x00"), key...))
	return hex.EncodeToString(sum[:8])
}

// readKey loads the key in path: 64 hex digits, optionally followed by a
// newline. A file others may read is warned about and made 0600. The
// error wraps fs.ErrNotExist when there is no file.
func readKey(path string, log *slog.Logger) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets key: %w", err)
	}
	text := bytes.TrimSuffix(b, []byte("\n"))
	key, err := hex.DecodeString(string(text))
	if err != nil || len(key) != keyBytes {
		return nil, fmt.Errorf("secrets key file %s is malformed: it must hold %d hex digits (a %d-byte key) and a newline", path, 2*keyBytes, keyBytes)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets key: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		log.Warn("secrets key file was readable by others; making it 0600 (consider rotating it)", "key_file", path, "mode", mode.String())
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("restricting the secrets key: %w", err)
		}
	}
	return key, nil
}

// createKey makes a new key in path (0600, in a directory made 0700),
// synced to disk before it is used. If another process made the file
// first, its key is used.
func createKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, keyBytes)
	rand.Read(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readKey(path, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return key, nil
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
