package granting

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeCore is one sandbox and the secrets set on this den.
type fakeCore struct {
	sb      *sandbox.Sandbox
	set     map[string]bool
	locked  bool
	events  []string
	removed []string
}

func (f *fakeCore) CheckSecretsSet(_ context.Context, grants []grant.Grant) error {
	for _, g := range grants {
		if !f.set[g.Name] {
			return errdefs.NotFound("secret %q", g.Name)
		}
	}
	return nil
}

func (f *fakeCore) WithSandbox(_ context.Context, ref string, fn func(sb *sandbox.Sandbox) error) error {
	if ref != f.sb.Name {
		return errdefs.NotFound("sandbox %q", ref)
	}
	f.locked = true
	return fn(f.sb)
}

func (f *fakeCore) Record(_ context.Context, _ *sandbox.Sandbox, evType, msg string) error {
	f.events = append(f.events, evType+": "+msg)
	return nil
}

func (f *fakeCore) GuestFor(*sandbox.Sandbox) sandbox.Guest { return fakeGuest{f: f} }

// fakeGuest removes files; any other call would panic.
type fakeGuest struct {
	sandbox.Guest
	f *fakeCore
}

func (g fakeGuest) Remove(_ context.Context, path string, _ bool) error {
	g.f.removed = append(g.f.removed, path)
	return nil
}

func TestSetSecrets(t *testing.T) {
	ctx := context.Background()
	old := []grant.Grant{{Name: "TOKEN", Env: "TOKEN"}, {Name: "KEY", File: "key"}}
	tests := []struct {
		name    string
		state   sandbox.State
		grants  []grant.Grant
		wantErr error
		locked  bool
		removed []string
	}{
		{name: "revoking a file removes it from a running sandbox", state: sandbox.StateRunning,
			grants: []grant.Grant{{Name: "TOKEN", Env: "TOKEN"}}, locked: true, removed: []string{grant.FilePath("key")}},
		{name: "a stopped sandbox has no files to remove", state: sandbox.StateStopped,
			grants: nil, locked: true},
		{name: "a secret not set is refused before the sandbox is locked", state: sandbox.StateRunning,
			grants: []grant.Grant{{Name: "MISSING", Env: "MISSING"}}, wantErr: errdefs.ErrNotFound},
		{name: "a sandbox being created is refused", state: sandbox.StateCreating,
			grants: []grant.Grant{{Name: "TOKEN", Env: "TOKEN"}}, wantErr: errdefs.ErrConflict, locked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCore{sb: &sandbox.Sandbox{Name: "web", State: tt.state, Spec: sandbox.Spec{Secrets: old}},
				set: map[string]bool{"TOKEN": true, "KEY": true}}
			s := New(Config{Sandboxes: f})
			sb, err := s.SetSecrets(ctx, "web", tt.grants)
			if f.locked != tt.locked {
				t.Errorf("locked = %v, want %v", f.locked, tt.locked)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("SetSecrets: %v, want %v", err, tt.wantErr)
				}
				if len(f.events) != 0 {
					t.Fatalf("recorded %v after a refusal", f.events)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetSecrets: %v", err)
			}
			if !slices.Equal(sb.Spec.Secrets, tt.grants) || !sb.Spec.SecretsGranted {
				t.Errorf("spec = %+v, want grants %v and SecretsGranted", sb.Spec, tt.grants)
			}
			if len(f.events) != 1 || f.events[0] != sandbox.EventSecrets+": secrets: "+grant.Names(tt.grants) {
				t.Errorf("events = %q", f.events)
			}
			if !slices.Equal(f.removed, tt.removed) {
				t.Errorf("removed %q, want %q", f.removed, tt.removed)
			}
		})
	}
}
