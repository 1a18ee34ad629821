package sshgate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/auth"
)

// The host key's files in dend's data directory. A gateway made before
// ECDSA keys were made kept an ed25519 key, which its users' clients have
// pinned: it is used while it is there. Else the ECDSA P-256 key is, made
// the first time: OpenSSH's client checks its signatures with OpenSSL's
// optimised code, against its own portable ed25519, which costs it about
// 1.5 ms more per login. Both are 128-bit strong.
const (
	HostKeyFile       = "ssh_host_ecdsa_key"
	LegacyHostKeyFile = "ssh_host_ed25519_key"
)

// LoadHostKey reads the gateway's host key from dataDir (see HostKeyFile),
// making one (mode 0600, OpenSSH's format) the first time. Clients pin it
// in known_hosts, so it is kept for good.
func LoadHostKey(dataDir string) (ssh.Signer, error) {
	path := filepath.Join(dataDir, LegacyHostKeyFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(dataDir, HostKeyFile)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := makeHostKey(path); err != nil {
			return nil, err
		}
	}
	return readHostKey(path)
}

// readHostKey reads the host key at path, which only root may read.
func readHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the SSH host key: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the SSH host key %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("reading the SSH host key %s: %w", path, err)
	}
	return signer, nil
}

// makeHostKey makes an ECDSA P-256 host key at path.
func makeHostKey(path string) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "den ssh gateway")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("making the SSH host key: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("making the SSH host key: %w", err)
	}
	// Linked, not renamed: two dends starting on one data directory
	// keep the first key either made.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		os.Remove(tmp)
		return fmt.Errorf("making the SSH host key: %w", err)
	}
	os.Remove(tmp)
	return nil
}

// HostKeyFingerprint is the SHA256 fingerprint of the gateway's host key,
// as ssh shows it.
func (g *Gate) HostKeyFingerprint() string { return auth.Fingerprint(g.cfg.HostKey.PublicKey()) }
