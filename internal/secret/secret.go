// Package secret keeps named secrets encrypted at rest. Values are sealed
// with AES-256-GCM under a 32-byte key that lives in a file of its own,
// outside the database (by default beside it, mode 0600, made on first
// use), so a copy of the database alone reveals nothing. Each value has a
// fresh random nonce, and the secret's name is bound in as additional
// data: a ciphertext moved to another name does not open.
//
// Each record carries the id of the key that sealed it (a digest of the
// key, which says nothing about it), so a wrong key file is named as such
// instead of yielding garbage or a vague failure.
//
// The Vault serves the API (Set, List, Remove: values go in, never out)
// and the sandbox service (Reveal, its sandbox.Secrets port).
package secret

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/sandbox"
)

var _ sandbox.Secrets = (*Vault)(nil)

// MaxValueBytes bounds a secret's value.
const MaxValueBytes = 64 << 10

// ValidateName checks a secret's name: an environment variable's, the
// rule the sandboxes it is granted to use.
func ValidateName(name string) error { return grant.ValidateName(name) }

// Record is a sealed secret as the store keeps it.
type Record struct {
	Name       string
	Ciphertext []byte // the value sealed with AES-256-GCM, tag included
	Nonce      []byte
	KeyID      string // which key sealed it
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Store keeps sealed secrets. The SQLite store implements it.
type Store interface {
	// PutSecret inserts r, or replaces the secret of that name keeping
	// its CreatedAt. It sets r's times to what it stored.
	PutSecret(ctx context.Context, r *Record) error
	// GetSecret returns a secret. ErrNotFound when there is none.
	GetSecret(ctx context.Context, name string) (*Record, error)
	// ListSecrets returns every secret, by name.
	ListSecrets(ctx context.Context) ([]*Record, error)
	// DeleteSecret removes a secret. ErrNotFound when there is none.
	DeleteSecret(ctx context.Context, name string) error
}

// Config is what a Vault needs. KeyFile and Store are required.
type Config struct {
	// KeyFile holds the key: 64 hex digits and a newline. It is made,
	// mode 0600 in a 0700 directory, when the first secret is set.
	KeyFile string
	Store   Store
	Logger  *slog.Logger
}

// Info is what may be told of a secret: everything but its value.
type Info struct {
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Vault seals, keeps and reveals secrets. It is safe for concurrent use.
type Vault struct {
	store   Store
	keyFile string
	log     *slog.Logger

	// mu guards the key, which is loaded on Open or made by the first Set.
	mu    sync.Mutex
	aead  cipher.AEAD // nil until there is a key
	keyID string
}

// Open returns a Vault. It loads the key file if there is one, failing on
// one that is malformed, and logs an error when stored secrets were sealed
// with another key (those then fail clearly when used).
func Open(ctx context.Context, cfg Config) (*Vault, error) {
	if cfg.KeyFile == "" || cfg.Store == nil {
		return nil, errors.New("secret: Config needs a KeyFile and a Store")
	}
	v := &Vault{store: cfg.Store, keyFile: cfg.KeyFile, log: cfg.Logger}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	key, err := readKey(cfg.KeyFile, v.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if key != nil {
		if err := v.useKey(key); err != nil {
			return nil, err
		}
	}
	recs, err := v.store.ListSecrets(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening the secret store: %w", err)
	}
	if other := v.sealedElsewhere(recs); other != nil {
		v.log.Error("stored secrets were sealed with another key than the key file's; they cannot be revealed",
			"key_file", cfg.KeyFile, "key_id", v.keyID, "secret", other.Name, "sealed_with", other.KeyID)
	}
	return v, nil
}

// useKey makes key the vault's. Callers hold mu or own v alone.
func (v *Vault) useKey(key []byte) error {
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	v.aead, v.keyID = aead, keyID(key)
	return nil
}

// sealedElsewhere returns the first record not sealed with the vault's
// key (any record, when it has no key yet).
func (v *Vault) sealedElsewhere(recs []*Record) *Record {
	for _, r := range recs {
		if v.aead == nil || r.KeyID != v.keyID {
			return r
		}
	}
	return nil
}

// Set seals value under name, replacing any value it had.
func (v *Vault) Set(ctx context.Context, name string, value []byte) (*Info, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if len(value) > MaxValueBytes {
		return nil, errdefs.WithHint(errdefs.TooLarge("secret value is %d bytes, over the %d byte limit", len(value), MaxValueBytes),
			"keep secrets to tokens, passwords and keys; put larger files into the sandbox with `den cp`")
	}
	aead, id, err := v.sealingKey(ctx)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	r := &Record{Name: name, Nonce: nonce, KeyID: id, Ciphertext: aead.Seal(nil, nonce, value, additionalData(name))}
	if err := v.store.PutSecret(ctx, r); err != nil {
		return nil, fmt.Errorf("storing secret %q: %w", name, err)
	}
	return &Info{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, nil
}

// sealingKey returns the key new values are sealed with, making the key
// file on first use. It refuses while stored secrets were sealed with
// another key: mixing keys would leave some secrets unreadable whichever
// key file dend is given.
func (v *Vault) sealingKey(ctx context.Context) (cipher.AEAD, string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	recs, err := v.store.ListSecrets(ctx)
	if err != nil {
		return nil, "", err
	}
	if other := v.sealedElsewhere(recs); other != nil {
		return nil, "", v.wrongKey(other)
	}
	if v.aead == nil {
		key, err := createKey(v.keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("making the secrets key: %w", err)
		}
		if err := v.useKey(key); err != nil {
			return nil, "", err
		}
		v.log.Info("made the secrets key", "key_file", v.keyFile, "key_id", v.keyID)
	}
	return v.aead, v.keyID, nil
}

// wrongKey is the error for a record the vault's key did not seal. It
// names keys by id only, and no host path: the log has the file's.
func (v *Vault) wrongKey(r *Record) error {
	if v.aead == nil {
		err := errdefs.Unavailable("secret %q was sealed with key %s, but dend has no secrets key file", r.Name, r.KeyID)
		return errdefs.WithHint(err, "give dend the key file the secrets were set with; or remove them with `den secret rm` and set them again")
	}
	err := errdefs.Unavailable("secret %q was sealed with key %s, but dend's secrets key file holds key %s", r.Name, r.KeyID, v.keyID)
	return errdefs.WithHint(err, "give dend the key file the secrets were set with; or remove them with `den secret rm` and set them again")
}

// List returns every secret's name and times, by name. Never values.
func (v *Vault) List(ctx context.Context) ([]Info, error) {
	recs, err := v.store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(recs))
	for i, r := range recs {
		out[i] = Info{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// Remove deletes a secret.
func (v *Vault) Remove(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return v.store.DeleteSecret(ctx, name)
}

// Reveal returns a secret's value, for the exec that needs it. It is the
// one way a value leaves the vault.
func (v *Vault) Reveal(ctx context.Context, name string) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	r, err := v.store.GetSecret(ctx, name)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	aead, id := v.aead, v.keyID
	v.mu.Unlock()
	if aead == nil || r.KeyID != id {
		v.log.Error("revealing a secret sealed with another key", "secret", name, "key_file", v.keyFile, "sealed_with", r.KeyID, "key_id", id)
		return nil, v.wrongKey(r)
	}
	value, err := aead.Open(nil, r.Nonce, r.Ciphertext, additionalData(name))
	if err != nil {
		// The right key, yet it does not open: the record was changed.
		return nil, fmt.Errorf("secret %q does not decrypt with the key that sealed it: its stored record was altered", name)
	}
	return value, nil
}

// additionalData binds a ciphertext to its secret's name.
func additionalData(name string) []byte { return []byte("den secret v1\x00" + name) }
