package checkpoints

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderCheckpointsTree(t *testing.T) {
	cks := []api.Checkpoint{
		{ID: "ck-1", Name: "base", Kind: api.CheckpointManual, Memory: true, MemoryBytes: 3 << 20, FilesBytes: 40 << 20,
			CreatedAt: now.Add(-2 * time.Hour), NeededBy: []string{"kid"}, Location: api.LocationUploaded},
		{ID: "ck-2", Parent: "ck-1", Kind: api.CheckpointManual, FilesBytes: 41 << 20, CreatedAt: now.Add(-time.Hour),
			Location: api.LocationUploading},
		{ID: "ck-3", Name: "tests-pass", Parent: "ck-2", Kind: api.CheckpointManual, Memory: true, MemoryBytes: 4 << 20,
			FilesBytes: 42 << 20, CreatedAt: now.Add(-30 * time.Minute)},
		{ID: "ck-4", Parent: "ck-1", Kind: api.CheckpointHibernate, Memory: true, MemoryBytes: 1 << 30, FilesBytes: 1 << 30,
			CreatedAt: now.Add(-time.Minute), NeededBy: []string{"web", "web-2"}},
		{ID: "ck-5", Parent: "ck-2", Kind: api.CheckpointFork, Memory: true, CreatedAt: now.Add(-10 * time.Second)},
		{ID: "ck-9", Parent: "ck-gone", Kind: api.CheckpointManual, FilesBytes: 1 << 20, CreatedAt: now.Add(-3 * time.Second)},
	}
	var buf bytes.Buffer
	if err := renderCheckpoints(&buf, cks, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID           NAME         KIND        CONTENT      SIZE    WHERE       AGE                  NEEDED BY\n" +
		"ck-1         base         manual      memory       43MiB   uploaded    2 hours ago          kid\n" +
		"├─ ck-2      -            manual      files-only   41MiB   uploading   About an hour ago    -\n" +
		"│  ├─ ck-3   tests-pass   manual      memory       46MiB   local       30 minutes ago       -\n" +
		"│  └─ ck-5   -            fork        memory       0B      local       10 seconds ago       -\n" +
		"└─ ck-4      -            hibernate   memory       2GiB    local       About a minute ago   web,web-2\n" +
		"ck-9         -            manual      files-only   1MiB    local       3 seconds ago        -\n"
	if got := buf.String(); got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

// TestRenderCheckpointsLoop: parent links that loop must not hang the
// renderer or drop checkpoints.
func TestRenderCheckpointsLoop(t *testing.T) {
	cks := []api.Checkpoint{
		{ID: "a", Parent: "b", Kind: api.CheckpointManual, CreatedAt: now},
		{ID: "b", Parent: "a", Kind: api.CheckpointManual, CreatedAt: now},
		{ID: "c", Parent: "c", Kind: api.CheckpointManual, CreatedAt: now},
	}
	var buf bytes.Buffer
	if err := renderCheckpoints(&buf, cks, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Errorf("want a header and 3 rows, got:\n%s", buf.String())
	}
	for _, id := range []string{"a", "b", "c"} {
		if !strings.Contains(buf.String(), id+" ") {
			t.Errorf("checkpoint %s missing:\n%s", id, buf.String())
		}
	}
}
