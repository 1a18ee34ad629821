package runsc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Pause freezes every process of an instance; its memory stays in RAM.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := r.setPaused(ctx, id, true); err != nil {
		return r.verbFailed(ctx, id, "pausing", err)
	}
	return nil
}

// Resume thaws a paused instance.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := r.setPaused(ctx, id, false); err != nil {
		return r.verbFailed(ctx, id, "resuming", err)
	}
	return nil
}

// Checkpoint saves an instance's processes and memory into dir,
// uncompressed: the fastest to write and to read, and what a lazy
// (--background) restore needs. dir must not hold anything yet; runsc
// creates it when missing. With leaveRunning the instance is left as it
// was (a paused one stays paused); without, its processes are gone once
// saved and the instance stops, to be destroyed. On failure dir may hold
// part of an image: discard it.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error {
	if err := emptyDir(dir); err != nil {
		return fmt.Errorf("checkpointing instance %s: %w", id, err)
	}
	args := []string{"checkpoint", "--image-path=" + dir}
	if leaveRunning {
		args = append(args, "--leave-running")
		if _, err := r.run(ctx, id, append(args, id)...); err != nil {
			return r.verbFailed(ctx, id, "checkpointing", err)
		}
		return nil
	}
	st, err := r.State(ctx, id)
	if err != nil {
		return fmt.Errorf("checkpointing instance %s: %w", id, err)
	}
	if st == sandbox.InstanceMissing {
		return errdefs.NotFound("instance %s does not exist", id)
	}
	if _, err := r.run(ctx, id, append(args, id)...); err != nil {
		return r.verbFailed(ctx, id, "checkpointing", err)
	}
	if st == sandbox.InstancePaused {
		// The save killed every process, but a paused sandbox only exits
		// once thawed: until then runsc calls it paused, and a later
		// resume would "succeed" on a dead instance. No user code runs:
		// the processes are already exiting.
		if err := r.setPaused(ctx, id, false); err != nil {
			return fmt.Errorf("letting checkpointed instance %s exit: %w", id, err)
		}
	}
	return nil
}

// emptyDir refuses a directory that already holds files: runsc creates
// image files exclusively, and a second image must never mix with a first.
func emptyDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening image directory: %w", err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		if err != nil {
			return fmt.Errorf("reading image directory: %w", err)
		}
		return errdefs.Conflict("the image directory already holds files; each checkpoint needs a new one")
	}
	return nil
}

// Restore boots inst from the memory image in dir. inst may differ from
// the checkpointed instance in its id, hostname, root path, network
// namespace and environment; what SpecHash covers must be the same.
// inst.Rootfs must be a fresh writable snapshot of the filesystem saved
// with the image: runsc does not check it, and restoring onto a changed
// filesystem corrupts silently. Memory pages load in the background after
// the instance is up, so a large image is usable long before all of it is
// read; the image's files must stay until then (unlinking them is fine:
// the engine holds them open).
func (r *Runtime) Restore(ctx context.Context, inst sandbox.Instance, dir string) error {
	return r.boot(ctx, inst, "restoring", "restore", "--detach", "--background", "--image-path="+dir)
}

// verbFailed classifies a failed runsc verb on id: NotFound when runsc
// does not know the instance, else the error wrapped with what was done.
func (r *Runtime) verbFailed(ctx context.Context, id, doing string, err error) error {
	if st, serr := r.State(context.WithoutCancel(ctx), id); serr == nil && st == sandbox.InstanceMissing {
		return errdefs.NotFound("instance %s does not exist", id)
	}
	return fmt.Errorf("%s instance %s: %w", doing, id, err)
}

// Engine is what memory images made by this runtime are only valid for:
// the exact runsc version, the global flags that shape the sandbox, and
// the CPU features its processes may have used.
func (r *Runtime) Engine() sandbox.EngineInfo {
	return sandbox.EngineInfo{
		Version:     r.version,
		Flags:       r.engineFlags(),
		CPUFeatures: slices.Clone(r.cpu),
	}
}
