package checkpointing

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeCore is the core and the checkpoints' records as the verbs see
// them: sandboxes, their checkpoints, and which sandboxes need which.
type fakeCore struct {
	sandboxes []*sandbox.Sandbox
	cks       []*sandbox.Checkpoint
	needs     map[string][]string
	locked    string
	deleted   []string
}

func (f *fakeCore) Get(_ context.Context, ref string) (*sandbox.Sandbox, error) {
	for _, sb := range f.sandboxes {
		if sb.Name == ref || sb.ID == ref {
			return sb, nil
		}
	}
	return nil, errdefs.NotFound("sandbox %q not found", ref)
}

func (f *fakeCore) WithSandbox(ctx context.Context, ref string, fn func(sb *sandbox.Sandbox) error) error {
	sb, err := f.Get(ctx, ref)
	if err != nil {
		return err
	}
	f.locked = sb.Name
	defer func() { f.locked = "" }()
	return fn(sb)
}

func (f *fakeCore) CheckpointOf(_ context.Context, sb *sandbox.Sandbox, ref string) (*sandbox.Checkpoint, error) {
	for _, ck := range f.cks {
		if ck.SandboxID == sb.ID && (ck.ID == ref || ck.Name == ref) {
			c := *ck
			return &c, nil
		}
	}
	return nil, errdefs.NotFound("checkpoint %q not found", ref)
}

func (f *fakeCore) Needs(context.Context) (map[string][]string, error) { return f.needs, nil }

func (f *fakeCore) FillNeededBy(_ context.Context, ck *sandbox.Checkpoint) (*sandbox.Checkpoint, error) {
	ck.NeededBy = f.needs[ck.ID]
	return ck, nil
}

func (f *fakeCore) DeleteCheckpointLocked(_ context.Context, owner *sandbox.Sandbox, ck *sandbox.Checkpoint) error {
	if f.locked != owner.Name {
		return errors.New("deleting a checkpoint without its sandbox's lock")
	}
	f.deleted = append(f.deleted, ck.ID)
	return nil
}

func (f *fakeCore) ListCheckpoints(_ context.Context, sandboxID string) ([]*sandbox.Checkpoint, error) {
	var out []*sandbox.Checkpoint
	for _, ck := range f.cks {
		if ck.SandboxID == sandboxID {
			c := *ck
			out = append(out, &c)
		}
	}
	return out, nil
}

// newFake is sandbox web with checkpoints ck-1 (named "base", which
// child was forked from) and ck-2 (files only, which nothing needs).
func newFake() (*fakeCore, *Service) {
	f := &fakeCore{
		sandboxes: []*sandbox.Sandbox{
			{ID: "sb-web", Name: "web"},
			{ID: "sb-child", Name: "child", Origin: "ck-1"},
		},
		needs: map[string][]string{"ck-1": {"child"}},
		cks: []*sandbox.Checkpoint{
			{ID: "ck-1", SandboxID: "sb-web", Name: "base", Memory: true},
			{ID: "ck-2", SandboxID: "sb-web"},
		},
	}
	return f, New(Config{Sandboxes: f, Store: f})
}

func TestCheckpointsNamesWhatNeedsEach(t *testing.T) {
	_, s := newFake()
	cks, err := s.Checkpoints(t.Context(), "web")
	if err != nil {
		t.Fatalf("Checkpoints: %v", err)
	}
	if len(cks) != 2 || cks[0].ID != "ck-1" || cks[1].ID != "ck-2" {
		t.Fatalf("checkpoints = %+v, want ck-1 then ck-2", cks)
	}
	if !slices.Equal(cks[0].NeededBy, []string{"child"}) || len(cks[1].NeededBy) != 0 {
		t.Errorf("needed by %q and %q, want [child] and none", cks[0].NeededBy, cks[1].NeededBy)
	}
	if _, err := s.Checkpoints(t.Context(), "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Checkpoints of an unknown sandbox: %v, want not found", err)
	}
}

func TestGetCheckpoint(t *testing.T) {
	_, s := newFake()
	ck, err := s.GetCheckpoint(t.Context(), "web", "base")
	if err != nil {
		t.Fatalf("GetCheckpoint: %v", err)
	}
	if ck.ID != "ck-1" || !slices.Equal(ck.NeededBy, []string{"child"}) {
		t.Errorf("checkpoint = %+v, want ck-1 needed by child", ck)
	}
	if _, err := s.GetCheckpoint(t.Context(), "web", "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetCheckpoint of an unknown checkpoint: %v, want not found", err)
	}
	if _, err := s.GetCheckpoint(t.Context(), "gone", "base"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetCheckpoint of an unknown sandbox: %v, want not found", err)
	}
}

func TestRemoveCheckpoint(t *testing.T) {
	tests := []struct {
		name    string
		ckpt    string
		wantErr error
		wantMsg string
		deleted []string
	}{
		{name: "one nothing needs goes, under its sandbox's lock", ckpt: "ck-2", deleted: []string{"ck-2"}},
		{name: "one a sandbox was forked from stays", ckpt: "base", wantErr: errdefs.ErrConflict,
			wantMsg: `checkpoint ck-1 (base) of sandbox "web" is needed by child`},
		{name: "an unknown one is not found", ckpt: "nope", wantErr: errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s := newFake()
			err := s.RemoveCheckpoint(t.Context(), "web", tt.ckpt)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("RemoveCheckpoint: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("RemoveCheckpoint: %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q, want it to say %q", err, tt.wantMsg)
			}
			if !slices.Equal(f.deleted, tt.deleted) {
				t.Errorf("deleted %q, want %q", f.deleted, tt.deleted)
			}
		})
	}
}
