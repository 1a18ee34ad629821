package runsc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// Each den-init is kept as its own version, never replaced; instances
// mount the one they name.
func TestInstallInit(t *testing.T) {
	base := t.TempDir()
	initDir := filepath.Join(base, "init")
	bin := filepath.Join(base, "den-init")
	write := func(content string) {
		if err := os.WriteFile(bin, elfWith(t, content, false), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("first den-init")
	v1, err := InstallInit(initDir, bin)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := InstallInit(initDir, bin); err != nil || again != v1 {
		t.Fatalf("installing the same binary again: %q, %v; want %q", again, err, v1)
	}
	write("second den-init, as after an upgrade")
	v2, err := InstallInit(initDir, bin)
	if err != nil || v2 == v1 {
		t.Fatalf("a new binary: version %q, %v (first %q)", v2, err, v1)
	}
	for v, want := range map[string]string{v1: "first den-init", v2: "second den-init, as after an upgrade"} {
		b, err := os.ReadFile(filepath.Join(initDir, v, "den-init"))
		if err != nil || string(b) != string(elfWith(t, want, false)) {
			t.Errorf("version %s holds %q, %v; want %q", v, b, err, want)
		}
	}

	if !strings.HasPrefix(v1, rootPrefix) {
		t.Errorf("version %q: a version installed now goes in the root filesystem (%s…)", v1, rootPrefix)
	}
	r := &Runtime{cfg: Config{InitDir: initDir}}
	// Images of an r- version carry their den-init in their files; a v-
	// version's need this host's copy.
	for v, want := range map[string]bool{v1: true, v2: true, "r-0000000000000000": true, "v-0000000000000000": false, "": false, "../init": false, "..": false, "r-x/../..": false} {
		if got := r.HasInit(v); got != want {
			t.Errorf("HasInit(%q) = %v, want %v", v, got, want)
		}
	}
	if r.installed("r-0000000000000000") {
		t.Error("installed reports a version this host never had")
	}
	// The one den-init from before versions lives in InitDir itself.
	if err := os.WriteFile(filepath.Join(initDir, "den-init"), []byte("legacy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !r.HasInit("") {
		t.Error("HasInit(\"\") with the legacy den-init in place = false")
	}
	// Instances of the versions from before mount theirs.
	legacy := "v-0123456789abcdef"
	if err := os.MkdirAll(filepath.Join(initDir, legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{legacy: filepath.Join(initDir, legacy), "": initDir} {
		spec := r.spec(sandbox.Instance{ID: "sb-g1", Init: v})
		if i := slices.IndexFunc(spec.Mounts, func(m ociMount) bool { return m.Destination == "/.den" }); i < 0 || spec.Mounts[i].Source != want {
			t.Errorf("instance of version %q: mounts %v, want %s at /.den", v, spec.Mounts, want)
		}
	}
	// Pruning takes both kinds of version, and only those.
	removed, err := PruneInits(initDir, map[string]bool{v2: true})
	slices.Sort(removed)
	if want := []string{v1, legacy}; err != nil || !slices.Equal(removed, sorted(want)) {
		t.Errorf("PruneInits = %v, %v; want %v", removed, err, sorted(want))
	}
	if !r.installed(v2) || !r.HasInit("") {
		t.Error("PruneInits removed what it was to keep")
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// A den-init that could not start in every image is refused with why,
// and nothing is installed.
func TestInstallInitRefusesWhatCannotStart(t *testing.T) {
	base := t.TempDir()
	initDir := filepath.Join(base, "init")
	bin := filepath.Join(base, "den-init")
	for _, tc := range []struct {
		name    string
		content []byte
		says    string
	}{
		{"a script", []byte("#!/bin/sh\necho hi\n"), "not an executable"},
		{"dynamically linked", elfWith(t, "x", true), "CGO_ENABLED=0"},
	} {
		if err := os.WriteFile(bin, tc.content, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := InstallInit(initDir, bin)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.says)
		}
	}
	if _, err := os.Stat(initDir); !os.IsNotExist(err) {
		t.Errorf("something was installed: %v", err)
	}
}

// elfWith is an ELF executable header of this host's machine followed
// by content, with a dynamic loader named when dynamic.
func elfWith(t *testing.T, content string, dynamic bool) []byte {
	t.Helper()
	hdr := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(hostMachine()), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Phentsize: 56}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	if dynamic {
		hdr.Phoff, hdr.Phnum = 64, 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Off: 64 + 56, Filesz: 0})
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString(content)
	return buf.Bytes()
}

// Versions nothing keeps go; kept ones and the file from before stay.
func TestPruneInits(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v-1", "v-2", "v-3"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "den-init"), []byte(v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "den-init"), []byte("legacy"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := PruneInits(dir, map[string]bool{"v-2": true, "": true})
	if err != nil || len(removed) != 2 || removed[0] != "v-1" || removed[1] != "v-3" {
		t.Fatalf("PruneInits removed %v, %v; want v-1 and v-3", removed, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 2 {
		t.Fatalf("left %v, want v-2 and the file from before", left)
	}
}
