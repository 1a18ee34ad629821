package storetest

import (
	"errors"
	"testing"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
)

var sshKeyTests = []accessCase{
	{"RoundTripsEveryField", testSSHKeyRoundTrip},
	{"Missing", testSSHKeyMissing},
	{"FingerprintAndNameUnique", testSSHKeyUnique},
	{"ListByToken", testSSHKeyList},
}

func newSSHKey(fp, name, token string, sec int) *auth.SSHKey {
	return &auth.SSHKey{Fingerprint: fp, Name: name, TokenID: token, Type: "ssh-ed25519",
		PublicKey: "ssh-ed25519 AAAA" + fp, Comment: "me@laptop", CreatedAt: at(sec)}
}

func mustCreateSSHKey(t *testing.T, st AccessStore, k *auth.SSHKey) {
	t.Helper()
	if err := st.CreateSSHKey(t.Context(), k); err != nil {
		t.Fatalf("CreateSSHKey(%s): %v", k.Name, err)
	}
}

func testSSHKeyRoundTrip(t *testing.T, st AccessStore) {
	k := newSSHKey("SHA256:one", "laptop", "tok1", 0)
	mustCreateSSHKey(t, st, k)
	want := *k
	want.CreatedAt = utc(at(0))
	same(t, "handed back", k, &want)
	got, err := st.GetSSHKey(t.Context(), "SHA256:one")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "read", got, &want)
}

func testSSHKeyMissing(t *testing.T, st AccessStore) {
	_, err := st.GetSSHKey(t.Context(), "SHA256:nope")
	wantErr(t, err, errdefs.ErrNotFound, `SSH key "SHA256:nope" not found`, "den ssh-key ls")
	wantErr(t, st.DeleteSSHKey(t.Context(), "SHA256:nope"), errdefs.ErrNotFound, "SHA256:nope", "")
	wantErr(t, st.CreateSSHKey(t.Context(), &auth.SSHKey{Name: "x"}), errdefs.ErrInvalid, "needs a fingerprint", "")
}

// A key is registered once, whichever token asks; a name is unique among
// one token's keys only. A refused key changes nothing.
func testSSHKeyUnique(t *testing.T, st AccessStore) {
	mustCreateSSHKey(t, st, newSSHKey("SHA256:one", "laptop", "tok1", 0))
	err := st.CreateSSHKey(t.Context(), newSSHKey("SHA256:one", "other", "tok2", 1))
	wantErr(t, err, errdefs.ErrConflict, "SSH key SHA256:one is registered already", "den ssh-key ls")
	err = st.CreateSSHKey(t.Context(), newSSHKey("SHA256:two", "laptop", "tok1", 1))
	wantErr(t, err, errdefs.ErrConflict, `SSH key named "laptop" already`, "den ssh-key rm laptop")
	if _, err := st.GetSSHKey(t.Context(), "SHA256:two"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused key was stored: %v", err)
	}
	mustCreateSSHKey(t, st, newSSHKey("SHA256:three", "laptop", "tok2", 2))

	if err := st.DeleteSSHKey(t.Context(), "SHA256:one"); err != nil {
		t.Fatal(err)
	}
	mustCreateSSHKey(t, st, newSSHKey("SHA256:two", "laptop", "tok1", 3))
}

func testSSHKeyList(t *testing.T, st AccessStore) {
	mustCreateSSHKey(t, st, newSSHKey("SHA256:b", "b", "tok1", 1))
	mustCreateSSHKey(t, st, newSSHKey("SHA256:a", "a", "tok2", 2))
	mustCreateSSHKey(t, st, newSSHKey("SHA256:c", "c", "tok1", 3))
	names := func(tokenID string) []string {
		ks, err := st.ListSSHKeys(t.Context(), tokenID)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, k := range ks {
			out = append(out, k.Name)
		}
		return out
	}
	same(t, "every key", names(""), []string{"b", "a", "c"})
	same(t, "tok1's", names("tok1"), []string{"b", "c"})
	same(t, "nobody's", names("tok9"), []string{})
}
