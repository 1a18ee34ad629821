package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/specs"
)

// SSH keys let a token's holder reach sandboxes through dend's SSH
// gateway. A key belongs to the token that registered it and acts with
// that token's rights: an owner token's key reaches its owner's sandboxes,
// an admin's every sandbox. Once the token is revoked or expired, its keys
// let nobody in; they stay listed until removed.

// SSHKey is a registered public key.
type SSHKey struct {
	// Fingerprint is the key's SHA256 fingerprint as OpenSSH prints it
	// (SHA256:base64): it names the key, and no two keys share it.
	Fingerprint string
	// Name is unique among the keys of one token.
	Name    string
	TokenID string
	// Type is the key's algorithm, e.g. ssh-ed25519.
	Type string
	// PublicKey is the key in authorized_keys form, "TYPE BASE64".
	PublicKey string
	Comment   string
	CreatedAt time.Time
}

// KeyStore keeps SSH keys. Both stores implement it.
type KeyStore interface {
	// CreateSSHKey inserts k. ErrConflict when its fingerprint is
	// registered already, or its token has a key of that name.
	CreateSSHKey(ctx context.Context, k *SSHKey) error
	// GetSSHKey finds a key by fingerprint. ErrNotFound when none.
	GetSSHKey(ctx context.Context, fingerprint string) (*SSHKey, error)
	// ListSSHKeys returns the keys of one token, or of every token when
	// tokenID is "", oldest first.
	ListSSHKeys(ctx context.Context, tokenID string) ([]*SSHKey, error)
	// DeleteSSHKey removes a key by fingerprint. ErrNotFound when none.
	DeleteSSHKey(ctx context.Context, fingerprint string) error
}

// maxKeyText bounds a key file: an RSA key of 16384 bits fits many times.
const maxKeyText = 16 << 10

// ParseKey reads one public key in authorized_keys form ("TYPE BASE64
// [COMMENT]"), as ssh-keygen writes it to FILE.pub. It refuses anything
// else with a message that says what was given: a private key, several
// keys, options (which den would not honour), certificates, or text that
// is no key at all.
func ParseKey(text []byte) (ssh.PublicKey, string, error) {
	if len(text) > maxKeyText {
		return nil, "", errdefs.Invalid("the key file is %d bytes: a public key is a single line of a few hundred", len(text))
	}
	if bytes.Contains(text, []byte("PRIVATE KEY")) {
		return nil, "", errdefs.WithHint(errdefs.Invalid("this is a private key"),
			"give the public half, the FILE.pub ssh-keygen wrote beside it; never hand a private key to anyone")
	}
	var lines []string
	for l := range strings.Lines(string(text)) {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	switch {
	case len(lines) == 0:
		return nil, "", errdefs.WithHint(errdefs.Invalid("the key file holds no public key"), "give a FILE.pub as ssh-keygen writes it")
	case len(lines) > 1:
		return nil, "", errdefs.WithHint(errdefs.Invalid("the key file holds %d lines: give one key at a time", len(lines)),
			"register each key under its own name")
	}
	key, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(lines[0]))
	if err != nil {
		return nil, "", errdefs.WithHint(errdefs.Invalid("not an SSH public key: %v", err),
			"give a FILE.pub as ssh-keygen writes it: `ssh-ed25519 AAAA... comment`")
	}
	if len(options) > 0 || len(rest) > 0 {
		return nil, "", errdefs.WithHint(errdefs.Invalid("the key has authorized_keys options (%s), which den does not honour", strings.Join(options, ",")),
			"give the key alone: `TYPE BASE64 [COMMENT]`")
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, "", errdefs.WithHint(errdefs.Invalid("this is an SSH certificate, not a plain public key"),
			"give the public key the certificate was made for")
	}
	return key, strings.TrimSpace(comment), nil
}

// Fingerprint is the name den gives a public key: its SHA256
// fingerprint, as OpenSSH prints it.
func Fingerprint(key ssh.PublicKey) string { return ssh.FingerprintSHA256(key) }

// AddKey registers the public key in text under name for the principal's
// token. Root on the unix socket and the token file have no token to tie
// a key to; read-only tokens can change nothing, keys included.
func (s *Service) AddKey(ctx context.Context, p Principal, name string, text []byte) (*SSHKey, error) {
	if s.keys == nil {
		return nil, errdefs.Unavailable("this dend keeps no SSH keys")
	}
	if p.TokenID == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("%s has no API token to tie an SSH key to", p.Name),
			"register keys with a token (DEN_TOKEN): a key acts with its token's rights and stops working when the token is revoked")
	}
	if err := specs.ValidateName("key", name); err != nil {
		return nil, err
	}
	key, comment, err := ParseKey(text)
	if err != nil {
		return nil, err
	}
	k := &SSHKey{
		Fingerprint: Fingerprint(key), Name: name, TokenID: p.TokenID, Type: key.Type(),
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), Comment: comment, CreatedAt: s.now().UTC(),
	}
	if err := s.keys.CreateSSHKey(ctx, k); err != nil {
		return nil, fmt.Errorf("registering SSH key %q: %w", name, err)
	}
	return k, nil
}

// ListKeys returns the keys p may see: an admin's, every key; anyone
// else's, those of its own token.
func (s *Service) ListKeys(ctx context.Context, p Principal) ([]*SSHKey, error) {
	if s.keys == nil {
		return []*SSHKey{}, nil
	}
	if p.Scope.Admin() {
		return s.keys.ListSSHKeys(ctx, "")
	}
	if p.TokenID == "" {
		return []*SSHKey{}, nil
	}
	return s.keys.ListSSHKeys(ctx, p.TokenID)
}

// RemoveKey removes one of the keys p may see, named by its name (its
// own token's first) or fingerprint, and returns it.
func (s *Service) RemoveKey(ctx context.Context, p Principal, ref string) (*SSHKey, error) {
	if ref == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("no key given"), "name the key by its name or fingerprint, see `den ssh-key ls`")
	}
	keys, err := s.ListKeys(ctx, p)
	if err != nil {
		return nil, err
	}
	k, err := pickKey(keys, p.TokenID, ref)
	if err != nil {
		return nil, err
	}
	if err := s.keys.DeleteSSHKey(ctx, k.Fingerprint); err != nil {
		return nil, fmt.Errorf("removing SSH key %q: %w", k.Name, err)
	}
	return k, nil
}

// pickKey finds ref among keys: a fingerprint, else a name of mine's
// token, else a name only one other token uses.
func pickKey(keys []*SSHKey, mine, ref string) (*SSHKey, error) {
	var byName []*SSHKey
	for _, k := range keys {
		switch {
		case k.Fingerprint == ref:
			return k, nil
		case k.Name == ref && k.TokenID == mine:
			return k, nil
		case k.Name == ref:
			byName = append(byName, k)
		}
	}
	switch len(byName) {
	case 0:
		return nil, errdefs.WithHint(errdefs.NotFound("SSH key %q not found", ref), "list keys with `den ssh-key ls`")
	case 1:
		return byName[0], nil
	}
	return nil, errdefs.WithHint(errdefs.Conflict("%d tokens have a key named %q", len(byName), ref),
		"name the key by its fingerprint, see `den ssh-key ls`")
}

// KeyPrincipal returns the principal a public key stands for: its
// token's, while that token is active. Every refusal is the same error,
// whether the key is unknown or its token revoked or expired.
func (s *Service) KeyPrincipal(ctx context.Context, key ssh.PublicKey) (Principal, error) {
	refused := Unauthorized("SSH key not accepted")
	if s.keys == nil {
		return Principal{}, refused
	}
	k, err := s.keys.GetSSHKey(ctx, Fingerprint(key))
	if errors.Is(err, errdefs.ErrNotFound) {
		return Principal{}, refused
	}
	if err != nil {
		return Principal{}, fmt.Errorf("looking up an SSH key: %w", err)
	}
	// The stored key is compared whole, not only by its fingerprint.
	if k.PublicKey != strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) {
		return Principal{}, refused
	}
	t, err := s.store.GetToken(ctx, k.TokenID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return Principal{}, refused
	}
	if err != nil {
		return Principal{}, fmt.Errorf("looking up the token of an SSH key: %w", err)
	}
	if t.ID != k.TokenID || t.Status(s.now().UTC()) != StatusActive {
		return Principal{}, refused
	}
	return Principal{TokenID: t.ID, Name: t.Name, Scope: t.Scope, Owner: t.Owner}, nil
}
