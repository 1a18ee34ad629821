package sshgate

import (
	"crypto/ed25519"
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

// HostKeyFile is the host key's file in dend's data directory.
const HostKeyFile = "ssh_host_ed25519_key"

// LoadHostKey reads the gateway's host key from path, making an ed25519
// key there (mode 0600, OpenSSH's format) the first time. Clients pin it
// in known_hosts, so it is kept for good.
func LoadHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return makeHostKey(path)
	}
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

func makeHostKey(path string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "den ssh gateway")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("making the SSH host key: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("making the SSH host key: %w", err)
	}
	// Linked, not renamed: two dends starting on one data directory
	// keep the first key either made.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		os.Remove(tmp)
		return nil, fmt.Errorf("making the SSH host key: %w", err)
	}
	os.Remove(tmp)
	return LoadHostKey(path)
}

// HostKeyFingerprint is the SHA256 fingerprint of the gateway's host key,
// as ssh shows it.
func (g *Gate) HostKeyFingerprint() string { return auth.Fingerprint(g.cfg.HostKey.PublicKey()) }
