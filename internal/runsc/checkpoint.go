package runsc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
// (--background) restore needs. dir must not hold anything yet; it is
// created when missing. With leaveRunning the instance is left as it
// was (a paused one stays paused); without, its processes are gone once
// saved and the instance stops, to be destroyed. On failure dir may hold
// part of an image: discard it.
//
// The save is asked of the engine straight through its control socket,
// with the image files runsc would create, as pause and resume are (see
// control.go): a `runsc checkpoint` process costs 6 to 10 ms more. runsc
// keeps no record of a checkpoint, so its record stays right. When the
// record cannot be read, the runsc binary does it.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error {
	if err := emptyDir(dir); err != nil {
		return fmt.Errorf("checkpointing instance %s: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpointing instance %s: %w", id, err)
	}
	status, err := r.save(ctx, id, dir, leaveRunning)
	if errors.Is(err, errBadRecord) {
		status, err = r.saveByRunsc(ctx, id, dir, leaveRunning)
	}
	if errors.Is(err, errNoRecord) || errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.NotFound("instance %s does not exist", id)
	}
	if err != nil {
		return r.verbFailed(ctx, id, "checkpointing", err)
	}
	if !leaveRunning && status == "paused" {
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

// saveOpts is the engine's argument to a save (gVisor's control.SaveOpts),
// as much of it as den sets; the image files go with the call.
type saveOpts struct {
	Metadata      map[string]string `json:"metadata"`
	HavePagesFile bool              `json:"have_pages_file"`
	Resume        bool
	ExecOpts      struct{ ContainerID string }
}

// Image files, in the order the engine takes them: its kernel state, and
// the index and contents of its memory pages.
var imageFiles = []string{"checkpoint.img", "pages_meta.img", "pages.img"}

// save checkpoints instance id into dir through its control socket and
// returns its status from runsc's record. Like runsc's, the save holds no
// lock on the record: it does not change it.
func (r *Runtime) save(ctx context.Context, id, dir string, leaveRunning bool) (string, error) {
	rec, err := r.stateFile(id).read(ctx)
	if err != nil {
		return "", err
	}
	if rec.Status != "created" && rec.Status != "running" && rec.Status != "paused" {
		return rec.Status, fmt.Errorf("instance %s is %s", id, rec.Status)
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, name := range imageFiles {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			return rec.Status, fmt.Errorf("creating image file: %w", err)
		}
		files = append(files, f)
	}
	opts := saveOpts{Metadata: map[string]string{"compression": "none"}, HavePagesFile: true, Resume: leaveRunning}
	opts.ExecOpts.ContainerID = id
	return rec.Status, callEngine(ctx, rec, "containerManager.Checkpoint", &opts, files)
}

// saveByRunsc checkpoints instance id into dir with `runsc checkpoint`,
// and returns the status it had.
func (r *Runtime) saveByRunsc(ctx context.Context, id, dir string, leaveRunning bool) (string, error) {
	st, err := r.State(ctx, id)
	if err != nil {
		return "", err
	}
	if st == sandbox.InstanceMissing {
		return "", errdefs.NotFound("instance %s does not exist", id)
	}
	args := []string{"checkpoint", "--image-path=" + dir}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	if _, err := r.run(ctx, id, append(args, id)...); err != nil {
		return "", err
	}
	return string(st), nil
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
	if inRoot(inst.Init) && initMissing(inst.Rootfs) {
		if err := r.placeInit(inst.Rootfs, inst.Init); err != nil {
			return fmt.Errorf("restoring instance %s: its den-init is gone from /.den and cannot be put back: %w", inst.ID, err)
		}
	}
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
