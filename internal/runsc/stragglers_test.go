package runsc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// processesNaming lists host processes whose command line ends with id.
func processesNaming(id string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasSuffix(strings.TrimRight(string(b), "\x00"), "\x00"+id) {
			found = append(found, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// A restore that fails after runsc started the instance's processes (its
// image lost its state file) leaves nothing running once destroyed.
func TestFailedRestoreLeavesNoProcess(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	id := fmt.Sprintf("rt%d-s", os.Getpid())
	if err := g.rt.Start(ctx, g.instance(t, id, g.rootfs, g.netns)); err != nil {
		t.Fatal(err)
	}
	g.wantState(t, id, sandbox.InstanceRunning)
	img := filepath.Join(t.TempDir(), "img")
	if err := g.rt.Checkpoint(ctx, id, img, false); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(img, "checkpoint.img")); err != nil {
		t.Fatal(err)
	}
	restored := id + "-r"
	if err := g.rt.Restore(ctx, g.instance(t, restored, g.rootfs, g.netns), img); err == nil {
		t.Fatal("restoring an image without its state file succeeded")
	}
	if err := g.rt.Destroy(ctx, restored); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed restore's processes to go", func() bool { return len(processesNaming(restored)) == 0 })
}
