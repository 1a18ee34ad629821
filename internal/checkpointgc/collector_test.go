package checkpointgc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// fake is the core and its records as the collector sees them.
type fake struct {
	dir       string
	sandboxes map[string]*sandbox.Sandbox
	cks       []*sandbox.Checkpoint
	pinned    map[string]bool
	movable   bool
	deleted   []string
	dropped   []string
}

func (f *fake) Needs(context.Context) (map[string][]string, error) {
	m := map[string][]string{}
	for _, sb := range f.sandboxes {
		for _, id := range []string{sb.Checkpoint, sb.Origin} {
			if id != "" {
				m[id] = append(m[id], sb.Name)
			}
		}
	}
	return m, nil
}
func (f *fake) Pinned(id string) bool { return f.pinned[id] }
func (f *fake) Movable() bool         { return f.movable }
func (f *fake) WithRecord(ctx context.Context, id string, fn func(*sandbox.Sandbox) error) error {
	sb, err := f.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	return fn(sb)
}
func (f *fake) DeleteCheckpointLocked(_ context.Context, _ *sandbox.Sandbox, ck *sandbox.Checkpoint) error {
	f.deleted = append(f.deleted, ck.ID)
	return nil
}
func (f *fake) DropCheckpointFiles(_ context.Context, ck *sandbox.Checkpoint) {
	f.dropped = append(f.dropped, ck.ID)
}
func (f *fake) MemoryDir(id string) string { return filepath.Join(f.dir, "mem", id) }
func (f *fake) Now() time.Time             { return time.Now() }

func (f *fake) GetSandbox(_ context.Context, id string) (*sandbox.Sandbox, error) {
	if sb, ok := f.sandboxes[id]; ok {
		c := *sb
		return &c, nil
	}
	return nil, errdefs.NotFound("sandbox %q not found", id)
}
func (f *fake) GetCheckpoint(_ context.Context, _, id string) (*sandbox.Checkpoint, error) {
	for _, ck := range f.cks {
		if ck.ID == id {
			return ck, nil
		}
	}
	return nil, errdefs.NotFound("checkpoint %q not found", id)
}
func (f *fake) ListCheckpoints(_ context.Context, sandboxID string) ([]*sandbox.Checkpoint, error) {
	var out []*sandbox.Checkpoint
	for _, ck := range f.cks {
		if ck.SandboxID == sandboxID {
			out = append(out, ck)
		}
	}
	return out, nil
}
func (f *fake) ListCheckpointsOn(context.Context, string) ([]*sandbox.Checkpoint, error) {
	return f.cks, nil
}
func (f *fake) Path(key string) string { return filepath.Join(f.dir, "vol", key) }

func newFake(t *testing.T) (*fake, *Collector) {
	f := &fake{dir: t.TempDir(), sandboxes: map[string]*sandbox.Sandbox{}, pinned: map[string]bool{}}
	c := New(Config{Sandboxes: f, Store: f, Volumes: f, CheckpointDir: filepath.Join(f.dir, "mem"), Node: "n1"})
	return f, c
}

func sorted(s []string) []string { slices.Sort(s); return s }

func TestCollectTakesWhatNothingNeeds(t *testing.T) {
	f, c := newFake(t)
	f.sandboxes["live"] = &sandbox.Sandbox{ID: "live", Name: "live", State: sandbox.StateHibernated, Node: "n1", Checkpoint: "sleep"}
	f.sandboxes["gone"] = &sandbox.Sandbox{ID: "gone", Name: "gone", State: sandbox.StateDestroyed, Node: "n1"}
	f.sandboxes["far"] = &sandbox.Sandbox{ID: "far", Name: "far", State: sandbox.StateDestroyed, Node: "n2"}
	f.cks = []*sandbox.Checkpoint{
		{ID: "sleep", SandboxID: "live", Kind: sandbox.CheckpointHibernate},  // needed
		{ID: "manual", SandboxID: "live", Kind: sandbox.CheckpointManual},    // a live sandbox's own
		{ID: "old", SandboxID: "live", Kind: sandbox.CheckpointHibernate},    // den's, free
		{ID: "pinned", SandboxID: "gone", Kind: sandbox.CheckpointFork},      // a verb uses it
		{ID: "destroyed", SandboxID: "gone", Kind: sandbox.CheckpointManual}, // its sandbox is gone
		{ID: "remote", SandboxID: "far", Kind: sandbox.CheckpointFork},       // another node's
	}
	f.pinned["pinned"] = true
	c.Collect(context.Background())
	if got, want := sorted(f.deleted), []string{"destroyed", "old"}; !slices.Equal(got, want) {
		t.Fatalf("deleted %v, want %v", got, want)
	}
	if len(f.dropped) != 0 {
		t.Fatalf("dropped files of %v, want none", f.dropped)
	}
}

func TestCollectKeepsLastUploadInAFleet(t *testing.T) {
	f, c := newFake(t)
	f.movable = true
	f.sandboxes["a"] = &sandbox.Sandbox{ID: "a", Name: "a", State: sandbox.StateRunning, Node: "n1"}
	f.cks = []*sandbox.Checkpoint{
		{ID: "up1", SandboxID: "a", Kind: sandbox.CheckpointHibernate, Location: sandbox.LocationUploaded},
		{ID: "up2", SandboxID: "a", Kind: sandbox.CheckpointHibernate, Location: sandbox.LocationUploaded},
	}
	if err := os.MkdirAll(f.MemoryDir("up2"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.Collect(context.Background())
	if !slices.Equal(f.deleted, []string{"up1"}) || !slices.Equal(f.dropped, []string{"up2"}) {
		t.Fatalf("deleted %v, dropped %v; want [up1] and the last upload's copy [up2]", f.deleted, f.dropped)
	}
	// Not movable: the last upload is not kept.
	f.movable, f.deleted, f.dropped = false, nil, nil
	c.Freed(context.Background(), "up2", "", "missing")
	if !slices.Equal(f.deleted, []string{"up2"}) {
		t.Fatalf("freed: deleted %v, want [up2]", f.deleted)
	}
}

func TestCollectRemovesFilesNoCheckpointOwns(t *testing.T) {
	f, c := newFake(t)
	for _, d := range []string{f.MemoryDir("orphan"), f.MemoryDir(".tmp"), f.MemoryDir("busy"),
		filepath.Dir(f.Path((&sandbox.Checkpoint{ID: "snap"}).VolumeKey()))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(f.Path((&sandbox.Checkpoint{ID: "snap"}).VolumeKey()), 0o755); err != nil {
		t.Fatal(err)
	}
	f.pinned["busy"] = true
	c.Collect(context.Background())
	if got, want := sorted(f.dropped), []string{"orphan", "snap"}; !slices.Equal(got, want) {
		t.Fatalf("dropped %v, want %v", got, want)
	}
}
