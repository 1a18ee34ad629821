package runsc

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// den-init comes in versions: a memory image holds the den-init process
// it was taken with, and that process needs its very binary back when the
// image is restored (gVisor maps the executable from the file, so another
// den-init breaks it, as a den upgrade would). Each version lives in its
// own directory under Config.InitDir, named for its content, and is never
// replaced. Instances of the versions installed now carry a copy in their
// root filesystem, so their images take it along (initroot.go); older
// ones mount theirs (sandbox.Instance.Init). The version "" is InitDir
// itself, where the one den-init lived before versions were kept: images
// from then restore with what is there.

// InstallInit puts the den-init binary at path under initDir as its own
// version, unless that version is there already, and returns the version.
func InstallInit(initDir, path string) (string, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading den-init: %w", err)
	}
	defer src.Close()
	if err := staticExecutable(src, path); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, src); err != nil {
		return "", fmt.Errorf("reading den-init: %w", err)
	}
	version := rootPrefix + hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(initDir, version)
	dst := filepath.Join(dir, filepath.Base(InitPath))
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() {
		return version, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("installing den-init: %w", err)
	}
	if err := copyInit(src, dst); err != nil {
		return "", fmt.Errorf("installing den-init: %w", err)
	}
	return version, nil
}

// CheckInit says why the den-init binary at path could not start as a
// sandbox's first process, if it could not.
func CheckInit(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading den-init: %w", err)
	}
	defer f.Close()
	return staticExecutable(f, path)
}

// staticExecutable says why f, the den-init at path, cannot run as a
// sandbox's first process, if it cannot: it runs in every image, busybox's
// included, so it must be a Linux executable of this host's architecture
// that needs no dynamic loader or libraries from the image.
func staticExecutable(f *os.File, path string) error {
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("den-init %s is not an executable (ELF): %w", path, err)
	}
	if want := hostMachine(); ef.Machine != want {
		return fmt.Errorf("den-init %s is built for %v, this host runs %v", path, ef.Machine, want)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("den-init %s is linked dynamically, so it cannot start in a sandbox whose image lacks its libraries: build it with CGO_ENABLED=0 (as `make build` does)", path)
		}
	}
	return nil
}

// hostMachine is the ELF machine of the architecture dend runs on.
func hostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "arm64":
		return elf.EM_AARCH64
	default:
		return elf.EM_X86_64
	}
}

// initDir is the host directory holding that version of den-init.
func (r *Runtime) initDir(version string) string {
	if version == "" {
		return r.cfg.InitDir
	}
	return filepath.Join(r.cfg.InitDir, version)
}

// HasInit reports whether memory images taken with that version of
// den-init can be restored here: their den-init needs its very binary.
// Versions placed in the root filesystem travel in the images' files, so
// any host can; others need this host to keep them.
func (r *Runtime) HasInit(version string) bool {
	if !validVersion(version) {
		return false
	}
	return inRoot(version) || r.installed(version)
}

// installed reports whether this host keeps that version of den-init.
func (r *Runtime) installed(version string) bool {
	if !validVersion(version) {
		return false
	}
	fi, err := os.Stat(filepath.Join(r.initDir(version), filepath.Base(InitPath)))
	return err == nil && fi.Mode().IsRegular()
}

// validVersion reports whether version can name a directory under InitDir.
func validVersion(version string) bool {
	return version == "" || (version == filepath.Base(version) && version != "." && version != "..")
}

// PruneInits removes the versions of den-init under initDir that keep
// does not name, and returns them. The file from before versions stays.
func PruneInits(initDir string, keep map[string]bool) ([]string, error) {
	ents, err := os.ReadDir(initDir)
	if err != nil {
		return nil, fmt.Errorf("listing den-init versions: %w", err)
	}
	var removed []string
	for _, e := range ents {
		v := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(v, mountPrefix) || strings.HasPrefix(v, rootPrefix)) || keep[v] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(initDir, v)); err != nil {
			return removed, fmt.Errorf("removing den-init %s: %w", v, err)
		}
		removed = append(removed, v)
	}
	return removed, nil
}
