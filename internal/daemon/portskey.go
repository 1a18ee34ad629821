package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/keyfile"
)

// portsKeyBytes is the size of the key that signs URLs to exposed ports.
const portsKeyBytes = 32

// PortsKeyFile is where the key signing URLs to exposed ports lives.
// Removing it (and restarting dend) revokes every URL signed so far.
func (c *Config) PortsKeyFile() string { return filepath.Join(c.DataDir, "ports.key") }

// loadPortsKey reads the key signing port URLs, making it (0600) on first
// use: 64 hex digits and a newline.
func loadPortsKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createPortsKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ports key: %w", err)
	}
	key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(key) != portsKeyBytes {
		return nil, errdefs.WithHint(errdefs.Invalid("the ports key file is malformed: it must hold %d hex digits", 2*portsKeyBytes),
			"remove it and restart dend to make a new one (URLs signed with the old one stop working)")
	}
	return key, nil
}

func createPortsKey(path string) ([]byte, error) {
	key := make([]byte, portsKeyBytes)
	rand.Read(key)
	err := keyfile.Create(path, key)
	if errors.Is(err, fs.ErrExist) {
		return loadPortsKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the ports key: %w", err)
	}
	return key, nil
}

var domainLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validDomain checks a ports domain: a host name of lowercase labels.
func validDomain(d string) bool {
	if d == "" || len(d) > 200 {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if !domainLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}
