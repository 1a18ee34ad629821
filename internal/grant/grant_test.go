package grant

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestValidate(t *testing.T) {
	gs := []Grant{{Name: "TLS_KEY", File: "key.pem"}, {Name: "GH_TOKEN"}, {Name: "DB", Env: "PGPASSWORD"}}
	if err := Validate(gs); err != nil {
		t.Fatal(err)
	}
	if gs[0].Name != "DB" || gs[1].Env != "GH_TOKEN" || gs[2].File != "key.pem" {
		t.Fatalf("grants after validation: %+v", gs)
	}
	for _, bad := range [][]Grant{
		{{Name: "1BAD"}},
		{{Name: "A", File: "../etc/passwd"}},
		{{Name: "A", File: "sub/dir"}},
		{{Name: "A", File: ".hidden"}},
		{{Name: "A", Env: "X", File: "f"}},
		{{Name: "A", Env: "BAD-NAME"}},
		{{Name: "A"}, {Name: "B", Env: "A"}},
		{{Name: "A", File: "f"}, {Name: "B", File: "f"}},
	} {
		if err := Validate(bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("grants %+v: %v, want invalid", bad, err)
		}
	}
	many := make([]Grant, Max+1)
	for i := range many {
		many[i] = Grant{Name: "S", Env: "V" + string(rune('A'+i%26)) + string(rune('A'+i/26))}
	}
	if err := Validate(many); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("%d grants: %v, want too large", len(many), err)
	}
}

// fakeVault keeps secrets by name.
type fakeVault map[string]string

func (v fakeVault) Reveal(_ context.Context, name string) ([]byte, error) {
	s, ok := v[name]
	if !ok {
		return nil, errdefs.NotFound("no secret %s", name)
	}
	return []byte(s), nil
}

func TestReveal(t *testing.T) {
	ctx := context.Background()
	v := fakeVault{"TOKEN": "t0k3n", "TLS_KEY": "pem"}
	gs := []Grant{{Name: "TLS_KEY", File: "key.pem"}, {Name: "TOKEN", Env: "TOKEN"}}
	got, err := Reveal(ctx, v, "web", gs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].File != "/run/secrets/key.pem" || string(got[0].Value) != "pem" || got[1].Env != "TOKEN" || string(got[1].Value) != "t0k3n" {
		t.Fatalf("revealed %+v", got)
	}
	Wipe(got)
	if string(got[1].Value) != "\x00\x00\x00\x00\x00" {
		t.Fatalf("not wiped: %q", got[1].Value)
	}
	if err := CheckSet(ctx, v, gs); err != nil {
		t.Fatal(err)
	}
	gone := []Grant{{Name: "GONE", Env: "GONE"}}
	if _, err := Reveal(ctx, v, "web", gone); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("reveal of an unset secret: %v, want not found", err)
	}
	if err := CheckSet(ctx, v, gone); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("check of an unset secret: %v, want not found", err)
	}
	if err := CheckSet(ctx, nil, gs); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("no vault: %v, want unavailable", err)
	}
	if err := CheckSet(ctx, nil, nil); err != nil {
		t.Errorf("no grants, no vault: %v", err)
	}
}

func TestNamesAndFilesGone(t *testing.T) {
	gs := []Grant{{Name: "DB", Env: "PGPASSWORD"}, {Name: "GH_TOKEN", Env: "GH_TOKEN"}, {Name: "TLS_KEY", File: "key.pem"}}
	if got, want := Names(gs), "DB (as PGPASSWORD), GH_TOKEN, TLS_KEY (file key.pem)"; got != want {
		t.Errorf("Names = %q, want %q", got, want)
	}
	if Names(nil) != "none" {
		t.Errorf("Names of none = %q", Names(nil))
	}
	if got := FilesGone(gs, gs[:2]); !slices.Equal(got, []string{"key.pem"}) {
		t.Errorf("FilesGone = %v", got)
	}
}
