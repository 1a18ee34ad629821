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

	"github.com/den-dev/den/internal/keyfile"
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
	key := make([]byte, keyBytes)
	rand.Read(key)
	err := keyfile.Create(path, key)
	if errors.Is(err, fs.ErrExist) {
		return readKey(path, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		return nil, err
	}
	return key, nil
}
