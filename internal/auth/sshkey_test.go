package auth_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
)

// newPublicKey returns a fresh ed25519 public key and its FILE.pub text.
func newPublicKey(t *testing.T, comment string) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	if comment != "" {
		line += " " + comment
	}
	return key, []byte(line + "\n")
}

func TestParseKey(t *testing.T) {
	key, text := newPublicKey(t, "me@laptop")
	got, comment, err := auth.ParseKey(append([]byte("# my key\n\n"), text...))
	if err != nil {
		t.Fatal(err)
	}
	if auth.Fingerprint(got) != auth.Fingerprint(key) || comment != "me@laptop" {
		t.Errorf("ParseKey = %s %q, want %s me@laptop", auth.Fingerprint(got), comment, auth.Fingerprint(key))
	}
	if !strings.HasPrefix(auth.Fingerprint(key), "SHA256:") {
		t.Errorf("fingerprint %q is not in OpenSSH's SHA256: form", auth.Fingerprint(key))
	}
	_, other := newPublicKey(t, "")
	for _, tc := range []struct{ name, text, says string }{
		{"empty", "", "holds no public key"},
		{"comments only", "# nothing\n", "holds no public key"},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "this is a private key"},
		{"two keys", string(text) + string(other), "holds 2 lines"},
		{"garbage", "hello world\n", "not an SSH public key"},
		{"bad base64", "ssh-ed25519 !!!!\n", "not an SSH public key"},
		{"options", `command="/bin/true" ` + string(text), "authorized_keys options"},
		{"huge", strings.Repeat("a", 20000), "a public key is a single line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := auth.ParseKey([]byte(tc.text))
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ParseKey = %v, want invalid saying %q", err, tc.says)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me\n"))
	f.Add([]byte(`no-pty,command="x" ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ x`))
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----"))
	f.Add([]byte("ssh-ed25519-cert-v01@openssh.com AAAA"))
	f.Fuzz(func(t *testing.T, text []byte) {
		key, _, err := auth.ParseKey(text)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("ParseKey error %v is not invalid", err)
			}
			return
		}
		// What was accepted round-trips through its authorized_keys form.
		again, _, err := auth.ParseKey(ssh.MarshalAuthorizedKey(key))
		if err != nil || auth.Fingerprint(again) != auth.Fingerprint(key) {
			t.Fatalf("accepted key does not round-trip: %v", err)
		}
	})
}

func TestSSHKeys(t *testing.T) {
	e := newEnv(t, "")
	ctx := t.Context()
	alice, _ := e.create(t, auth.CreateParams{Name: "alice", Scope: auth.ScopeOwner})
	admin, _ := e.create(t, auth.CreateParams{Name: "ops", Scope: auth.ScopeAdmin})
	pa := auth.Principal{TokenID: alice.ID, Name: alice.Name, Scope: alice.Scope, Owner: alice.Owner}
	pops := auth.Principal{TokenID: admin.ID, Name: admin.Name, Scope: admin.Scope}

	key, text := newPublicKey(t, "alice@laptop")
	k, err := e.svc.AddKey(ctx, pa, "laptop", text)
	if err != nil {
		t.Fatal(err)
	}
	if k.Fingerprint != auth.Fingerprint(key) || k.TokenID != alice.ID || k.Type != "ssh-ed25519" || k.Comment != "alice@laptop" {
		t.Errorf("AddKey = %+v", k)
	}
	p, err := e.svc.KeyPrincipal(ctx, key)
	if err != nil || p.TokenID != alice.ID || p.Owner != alice.Owner || p.Scope != auth.ScopeOwner {
		t.Fatalf("KeyPrincipal = %+v, %v; want alice's", p, err)
	}

	// Refusals change nothing.
	for _, tc := range []struct {
		name  string
		p     auth.Principal
		key   string
		text  []byte
		class error
		says  string
	}{
		{"same key again", pa, "other", text, errdefs.ErrConflict, "registered already"},
		{"same key, other token", pops, "theirs", text, errdefs.ErrConflict, "registered already"},
		{"same name", pa, "laptop", func() []byte { _, t2 := newPublicKey(t, ""); return t2 }(), errdefs.ErrConflict, `named "laptop" already`},
		{"root", auth.Root(), "root", text, errdefs.ErrInvalid, "no API token"},
		{"bad name", pa, "Bad Name", text, errdefs.ErrInvalid, "invalid key name"},
		{"private", pa, "priv", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), errdefs.ErrInvalid, "private key"},
	} {
		if _, err := e.svc.AddKey(ctx, tc.p, tc.key, tc.text); !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: AddKey = %v, want %v saying %q", tc.name, err, tc.class, tc.says)
		}
	}
	if ks, _ := e.svc.ListKeys(ctx, pops); len(ks) != 1 {
		t.Fatalf("after refusals the admin sees %d keys, want 1", len(ks))
	}

	// An owner sees its own keys only; an admin every key.
	opsKey, opsText := newPublicKey(t, "")
	if _, err := e.svc.AddKey(ctx, pops, "laptop", opsText); err != nil {
		t.Fatal(err)
	}
	if ks, _ := e.svc.ListKeys(ctx, pa); len(ks) != 1 || ks[0].Name != "laptop" || ks[0].TokenID != alice.ID {
		t.Errorf("alice lists %+v, want her key only", ks)
	}
	if ks, _ := e.svc.ListKeys(ctx, pops); len(ks) != 2 {
		t.Errorf("the admin lists %d keys, want 2", len(ks))
	}
	if _, err := e.svc.RemoveKey(ctx, pa, auth.Fingerprint(opsKey)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("alice removing the admin's key: %v, want not found", err)
	}

	// Revoking the token ends its keys; removing a key ends it too.
	e.clock.advance(time.Minute)
	if _, err := e.svc.Revoke(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.KeyPrincipal(ctx, key); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("key of a revoked token: %v, want unauthorized", err)
	}
	unknown, _ := newPublicKey(t, "")
	_, errUnknown := e.svc.KeyPrincipal(ctx, unknown)
	_, errRevoked := e.svc.KeyPrincipal(ctx, key)
	if errUnknown == nil || errRevoked == nil || errUnknown.Error() != errRevoked.Error() {
		t.Errorf("unknown key %v and revoked token's key %v are told apart", errUnknown, errRevoked)
	}
	if p, err := e.svc.KeyPrincipal(ctx, opsKey); err != nil || p.Scope != auth.ScopeAdmin {
		t.Fatalf("admin's key: %+v, %v", p, err)
	}
	if _, err := e.svc.RemoveKey(ctx, pops, "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.KeyPrincipal(ctx, opsKey); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("removed key: %v, want unauthorized", err)
	}
}
