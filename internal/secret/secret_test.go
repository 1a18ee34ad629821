package secret_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/sqlite"
)

type env struct {
	dir string
	st  *sqlite.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{dir: dir, st: st}
}

// open opens a vault over the env's store with the key file at keyFile
// (relative to the env's directory).
func (e *env) open(t *testing.T, keyFile string) *secret.Vault {
	t.Helper()
	v, err := secret.Open(t.Context(), secret.Config{KeyFile: filepath.Join(e.dir, keyFile), Store: e.st})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return v
}

func mustSet(t *testing.T, v *secret.Vault, name, value string) {
	t.Helper()
	if _, err := v.Set(t.Context(), name, []byte(value)); err != nil {
		t.Fatalf("Set(%s): %v", name, err)
	}
}

func mustReveal(t *testing.T, v *secret.Vault, name string) string {
	t.Helper()
	b, err := v.Reveal(t.Context(), name)
	if err != nil {
		t.Fatalf("Reveal(%s): %v", name, err)
	}
	return string(b)
}

func TestSetRevealListRemove(t *testing.T) {
	e := newEnv(t)
	v := e.open(t, "secrets.key")
	info, err := v.Set(t.Context(), "DB_PASSWORD", []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "DB_PASSWORD" || info.CreatedAt.IsZero() || !info.UpdatedAt.Equal(info.CreatedAt) {
		t.Errorf("Set = %+v", info)
	}
	mustSet(t, v, "A", "")
	binary := string([]byte{0, 1, 2, 0xff, '\n'})
	mustSet(t, v, "_BIN", binary)
	for name, want := range map[string]string{"DB_PASSWORD": "hunter2", "A": "", "_BIN": binary} {
		if got := mustReveal(t, v, name); got != want {
			t.Errorf("Reveal(%s) = %q, want %q", name, got, want)
		}
	}
	mustSet(t, v, "DB_PASSWORD", "correct horse")
	if got := mustReveal(t, v, "DB_PASSWORD"); got != "correct horse" {
		t.Errorf("after replacing: %q", got)
	}
	list, err := v.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "A,DB_PASSWORD,_BIN" {
		t.Errorf("List names = %v", names)
	}
	if err := v.Remove(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Reveal(t.Context(), "A"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Reveal of a removed secret = %v, want not found", err)
	}
	if err := v.Remove(t.Context(), "A"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Remove of a removed secret = %v, want not found", err)
	}

	// A new vault with the same key file reads what the first sealed.
	again := e.open(t, "secrets.key")
	if got := mustReveal(t, again, "DB_PASSWORD"); got != "correct horse" {
		t.Errorf("after reopening: %q", got)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	v := e.open(t, "secrets.key")
	for _, name := range []string{"", "1ABC", "A-B", "A B", "ÄRGER", strings.Repeat("A", 65), "A\x00"} {
		if _, err := v.Set(t.Context(), name, []byte("x")); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Set(%q) = %v, want invalid", name, err)
		}
		if _, err := v.Reveal(t.Context(), name); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Reveal(%q) = %v, want invalid", name, err)
		}
	}
	if _, err := v.Set(t.Context(), strings.Repeat("A", 64), bytes.Repeat([]byte("x"), secret.MaxValueBytes)); err != nil {
		t.Errorf("the longest name with the largest value: %v", err)
	}
	_, err := v.Set(t.Context(), "BIG", bytes.Repeat([]byte("x"), secret.MaxValueBytes+1))
	if !errors.Is(err, errdefs.ErrTooLarge) || errdefs.Hint(err) == "" {
		t.Errorf("oversized value: %v", err)
	}
	_, err = v.Reveal(t.Context(), "NOPE")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `secret "NOPE" not found`) {
		t.Errorf("Reveal of an unknown secret = %v", err)
	}
	list, _ := v.List(t.Context())
	if len(list) != 1 {
		t.Errorf("refused sets stored something: %+v", list)
	}
}

// The key file is made by the first Set, private, and holds 32 bytes in
// hex; the database never holds a value in the clear.
func TestAtRest(t *testing.T) {
	e := newEnv(t)
	keyFile := filepath.Join(e.dir, "keys", "secrets.key")
	v := e.open(t, "keys/secrets.key")
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open made the key file before any secret: %v", err)
	}
	value := "s3cr3t-value-that-must-not-leak"
	mustSet(t, v, "TOKEN", value)
	mustSet(t, v, "TOKEN2", value)

	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := hex.DecodeString(strings.TrimSuffix(string(b), "\n")); err != nil || len(k) != 32 || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("key file holds %q, want 64 hex digits and a newline", b)
	}
	for p, want := range map[string]os.FileMode{keyFile: 0o600, filepath.Dir(keyFile): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", filepath.Base(p), fi.Mode().Perm(), want, err)
		}
	}

	r1, _ := e.st.GetSecret(t.Context(), "TOKEN")
	r2, _ := e.st.GetSecret(t.Context(), "TOKEN2")
	if bytes.Contains(r1.Ciphertext, []byte(value)) || bytes.Equal(r1.Nonce, r2.Nonce) || bytes.Equal(r1.Ciphertext, r2.Ciphertext) {
		t.Errorf("the same value sealed twice is not two different ciphertexts with fresh nonces")
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"den.db", "den.db-wal"} {
		b, err := os.ReadFile(filepath.Join(e.dir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the secret value in the clear", f)
		}
	}
}

// A ciphertext moved under another name does not open: the name is bound
// into it.
func TestSwappedCiphertextRefused(t *testing.T) {
	e := newEnv(t)
	v := e.open(t, "secrets.key")
	mustSet(t, v, "A", "value of a")
	mustSet(t, v, "B", "value of b")
	ra, err := e.st.GetSecret(t.Context(), "A")
	if err != nil {
		t.Fatal(err)
	}
	ra.Name = "B"
	if err := e.st.PutSecret(t.Context(), ra); err != nil {
		t.Fatal(err)
	}
	got, err := v.Reveal(t.Context(), "B")
	if err == nil || got != nil {
		t.Fatalf("Reveal of a swapped ciphertext = %q, %v; want an error", got, err)
	}
	if !strings.Contains(err.Error(), "altered") {
		t.Errorf("error %q does not say the record was altered", err)
	}
}

// A vault given another key than the secrets were sealed with says so,
// by key id, and never returns garbage; it refuses to mix keys, but lets
// the old secrets be listed and removed.
func TestWrongKeyFile(t *testing.T) {
	e := newEnv(t)
	mustSet(t, e.open(t, "right.key"), "A", "a")

	wrong := e.open(t, "wrong.key")
	mustSetErr := func(name string) error {
		_, err := wrong.Set(t.Context(), name, []byte("x"))
		return err
	}
	// The wrong key file does not exist yet: the vault has no key at all.
	err := mustSetErr("B")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no secrets key file") {
		t.Errorf("Set with no key file beside sealed secrets = %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "wrong.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file was made although secrets are sealed with another key")
	}

	// Now with a key file that holds another key.
	other := bytes.Repeat([]byte{7}, 32)
	if err := os.WriteFile(filepath.Join(e.dir, "wrong.key"), []byte(hex.EncodeToString(other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong = e.open(t, "wrong.key")
	got, err := wrong.Reveal(t.Context(), "A")
	if got != nil || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "sealed with key") ||
		!strings.Contains(err.Error(), "key file holds key") || errdefs.Hint(err) == "" {
		t.Errorf("Reveal with the wrong key = %q, %v", got, err)
	}
	if strings.Contains(err.Error(), e.dir) {
		t.Errorf("error names a host path: %v", err)
	}
	if err := mustSetErr("B"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Set with the wrong key = %v, want unavailable", err)
	}
	if list, err := wrong.List(t.Context()); err != nil || len(list) != 1 {
		t.Errorf("List with the wrong key = %v, %v", list, err)
	}
	if err := wrong.Remove(t.Context(), "A"); err != nil {
		t.Fatalf("Remove with the wrong key: %v", err)
	}
	if err := mustSetErr("B"); err != nil {
		t.Errorf("Set once the old secrets are gone: %v", err)
	}
	if got := mustReveal(t, wrong, "B"); got != "x" {
		t.Errorf("Reveal = %q", got)
	}
}

func TestMalformedKeyFile(t *testing.T) {
	for name, content := range map[string]string{
		"empty":        "",
		"short":        strings.Repeat("ab", 31) + "\n",
		"long":         strings.Repeat("ab", 33) + "\n",
		"not hex":      strings.Repeat("zz", 32) + "\n",
		"raw bytes":    strings.Repeat("k", 32),
		"two newlines": strings.Repeat("ab", 32) + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.WriteFile(filepath.Join(e.dir, "secrets.key"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := secret.Open(t.Context(), secret.Config{KeyFile: filepath.Join(e.dir, "secrets.key"), Store: e.st})
			if err == nil || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("Open = %v, want a malformed key file error", err)
			}
		})
	}
}

func TestLooseKeyFileTightened(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "secrets.key")
	if err := os.WriteFile(path, []byte(strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	v := e.open(t, "secrets.key")
	mustSet(t, v, "A", "a")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600 (%v)", fi.Mode().Perm(), err)
	}
}
