package sandbox

import (
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestMask(t *testing.T) {
	secrets := [][]byte{[]byte("hunter22"), []byte("abcd")}
	in := []byte("pw=hunter22 and hunter22, abcdabcd!")
	got := mask(in, secrets)
	if want := "pw=******** and ********, ********!"; string(got) != want {
		t.Fatalf("mask = %q, want %q", got, want)
	}
	if string(in) != "pw=hunter22 and hunter22, abcdabcd!" {
		t.Fatal("mask changed its input in place")
	}
	plain := []byte("nothing here")
	if got := mask(plain, secrets); &got[0] != &plain[0] {
		t.Fatal("mask copied output without secrets")
	}
	if r := redactions(nil); r != nil {
		t.Fatalf("redactions of none: %v", r)
	}
}

func TestValidateGrants(t *testing.T) {
	gs := []SecretGrant{{Name: "TLS_KEY", File: "key.pem"}, {Name: "GH_TOKEN"}, {Name: "DB", Env: "PGPASSWORD"}}
	if err := ValidateGrants(gs); err != nil {
		t.Fatal(err)
	}
	if gs[0].Name != "DB" || gs[1].Env != "GH_TOKEN" || gs[2].File != "key.pem" {
		t.Fatalf("grants after validation: %+v", gs)
	}
	for _, bad := range [][]SecretGrant{
		{{Name: "1BAD"}},
		{{Name: "A", File: "../etc/passwd"}},
		{{Name: "A", File: "sub/dir"}},
		{{Name: "A", File: ".hidden"}},
		{{Name: "A", Env: "X", File: "f"}},
		{{Name: "A", Env: "BAD-NAME"}},
		{{Name: "A"}, {Name: "B", Env: "A"}},
		{{Name: "A", File: "f"}, {Name: "B", File: "f"}},
	} {
		if err := ValidateGrants(bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("grants %+v: %v, want invalid", bad, err)
		}
	}
	many := make([]SecretGrant, MaxSecretGrants+1)
	for i := range many {
		many[i] = SecretGrant{Name: "S", Env: "V" + string(rune('A'+i%26)) + string(rune('A'+i/26))}
	}
	if err := ValidateGrants(many); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("%d grants: %v, want too large", len(many), err)
	}
}
