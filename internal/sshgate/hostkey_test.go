package sshgate

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// A fresh data directory gets an ECDSA P-256 host key, private to root,
// kept across starts; one that holds the ed25519 key an earlier dend made
// keeps using it, so clients that pinned it still match.
func TestLoadHostKey(t *testing.T) {
	dir := t.TempDir()
	k, err := LoadHostKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.PublicKey().Type(); got != ssh.KeyAlgoECDSA256 {
		t.Fatalf("a new host key is %s, want %s", got, ssh.KeyAlgoECDSA256)
	}
	st, err := os.Stat(filepath.Join(dir, HostKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("host key file: %v %v", st, err)
	}
	again, err := LoadHostKey(dir)
	if err != nil || string(again.PublicKey().Marshal()) != string(k.PublicKey().Marshal()) {
		t.Fatalf("the host key changed on the second start: %v", err)
	}

	legacy := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, LegacyHostKeyFile), pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err = LoadHostKey(legacy)
	if err != nil || k.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Fatalf("with an earlier ed25519 key: %v %v", k, err)
	}
	if _, err := os.Stat(filepath.Join(legacy, HostKeyFile)); !os.IsNotExist(err) {
		t.Errorf("an ECDSA key was made beside the ed25519 one: %v", err)
	}

	// A key others may read is refused.
	os.Chmod(filepath.Join(dir, HostKeyFile), 0o644)
	if _, err := LoadHostKey(dir); err == nil {
		t.Error("a host key readable by others was accepted")
	}
}
