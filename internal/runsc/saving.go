package runsc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Saving reports whether the engine of instance id is writing a memory
// image. The engine's sandbox process holds the image's files open for
// writing from when it is handed them (by Checkpoint, or by a `runsc
// checkpoint`) until the save ends, done or failed, and closes them then;
// a restored instance holds its image open only to read it. A dend killed
// in the middle of a checkpoint leaves the engine to finish the save, its
// kernel stopped meanwhile: a den-init that does not answer then is not
// dead. An instance that is gone saves nothing.
func (r *Runtime) Saving(ctx context.Context, id string) (bool, error) {
	st, err := r.state(ctx, id)
	if err != nil {
		if isMissing(err) {
			return false, nil
		}
		return false, fmt.Errorf("asking whether the engine of %s saves its memory: %w", id, err)
	}
	if st.Pid <= 0 {
		return false, nil
	}
	saving, err := writesImage(filepath.Join("/proc", strconv.Itoa(st.Pid)))
	if err != nil {
		return false, fmt.Errorf("asking whether the engine of %s saves its memory: %w", id, err)
	}
	return saving, nil
}

// writesImage reports whether the process at proc (its /proc directory)
// holds one of a memory image's files (imageFiles) open for writing. A
// process that is gone writes nothing.
func writesImage(proc string) (bool, error) {
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("listing the engine's open files: %w", err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if err != nil {
			continue // closed since listed
		}
		// The image's directory may be removed under the save: its
		// files are written all the same.
		name := filepath.Base(strings.TrimSuffix(target, " (deleted)"))
		if slices.Contains(imageFiles, name) && openForWriting(filepath.Join(proc, "fdinfo", fd.Name())) {
			return true, nil
		}
	}
	return false, nil
}

// openForWriting reports whether the descriptor fdinfo describes (a
// /proc/PID/fdinfo/N file) was opened to write.
func openForWriting(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "flags:")
		if !ok {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
		return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
	}
	return false
}
