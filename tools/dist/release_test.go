package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeBuild lays out what `make build` and generate leave: small files
// in place of the binaries, runsc as a link to a versioned one as
// make setup makes it, and the checkout's real deploy/ templates.
func fakeBuild(t *testing.T) (options, generated) {
	t.Helper()
	dir := t.TempDir()
	o := options{
		bin: filepath.Join(dir, "bin"), repo: "../..", out: filepath.Join(dir, "dist"),
		version: "v1.2.3", date: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), maintainer: "t <t@example.com>",
	}
	write := func(p, body string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, name := range []string{"dend", "den", "den-init", "runsc-1"} {
		write(filepath.Join(o.bin, name), name)
	}
	if err := os.Symlink(filepath.Join(o.bin, "runsc-1"), filepath.Join(o.bin, "runsc")); err != nil {
		t.Fatal(err)
	}
	gen := generated{
		bash: write(filepath.Join(dir, "gen/den.bash"), "bash"),
		zsh:  write(filepath.Join(dir, "gen/_den"), "zsh"),
		fish: write(filepath.Join(dir, "gen/den.fish"), "fish"),
		man:  []string{write(filepath.Join(dir, "gen/den.1.gz"), "1"), write(filepath.Join(dir, "gen/dend.8.gz"), "8")},
	}
	return o, gen
}

// TestDeb builds the package and reads it back as dpkg would: an ar
// archive of debian-binary, control.tar.gz and data.tar.gz.
func TestDeb(t *testing.T) {
	o, gen := fakeBuild(t)
	list, err := debLayout.files(o, gen, filepath.Join(o.out, "deb"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(o.out, "den.deb")
	if err := writeDeb(p, o, list, filepath.Join(o.out, "scripts")); err != nil {
		t.Fatal(err)
	}
	members := readAr(t, p)
	if string(members["debian-binary"]) != "2.0\n" {
		t.Errorf("debian-binary = %q", members["debian-binary"])
	}
	control := readTarGz(t, members["control.tar.gz"])
	fields := string(control["control"].body)
	for _, want := range []string{"Package: den\n", "Version: 1.2.3\n", "Architecture: amd64\n", "Maintainer: t <t@example.com>\n",
		"Depends: btrfs-progs, nftables, iproute2, util-linux, mmdebstrap, busybox-static, ca-certificates\n"} {
		if !strings.Contains(fields, want) {
			t.Errorf("control lacks %q:\n%s", want, fields)
		}
	}
	if got := string(control["conffiles"].body); got != "/etc/den/dend.env\n" {
		t.Errorf("conffiles = %q, want /etc/den/dend.env alone", got)
	}
	post := string(control["postinst"].body)
	for _, want := range []string{"deb-systemd-helper enable 'dend.service'", "if [ -d /run/systemd/system ]; then", "deb-systemd-invoke \"$action\" 'dend.service'"} {
		if !strings.Contains(post, want) {
			t.Errorf("postinst lacks %q:\n%s", want, post)
		}
	}
	if pre := string(control["prerm"].body); !strings.Contains(pre, "deb-systemd-invoke stop 'dend.service'") {
		t.Errorf("prerm does not stop dend:\n%s", pre)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if control[s].mode&0o111 == 0 || strings.Contains(string(control[s].body), "/var/lib/den") {
			t.Errorf("%s: mode %o, or it touches the data directory", s, control[s].mode)
		}
	}

	data := readTarGz(t, members["data.tar.gz"])
	want := map[string]int64{
		"usr/bin/dend": 0o755, "usr/bin/den": 0o755, "usr/lib/den/den-init": 0o755, "usr/lib/den/runsc": 0o755,
		"lib/systemd/system/dend.service": 0o644, "etc/den/dend.env": 0o600,
		"usr/share/bash-completion/completions/den": 0o644, "usr/share/zsh/vendor-completions/_den": 0o644,
		"usr/share/fish/vendor_completions.d/den.fish": 0o644,
		"usr/share/man/man1/den.1.gz":                  0o644, "usr/share/man/man8/dend.8.gz": 0o644,
	}
	checkFiles(t, data, "", want)
	if got := string(data["usr/lib/den/runsc"].body); got != "runsc-1" {
		t.Errorf("runsc is %q, want the file its link names", got)
	}
	if unit := string(data["lib/systemd/system/dend.service"].body); !strings.Contains(unit, "\nExecStart=/usr/bin/dend $DEND_FLAGS\n") ||
		!strings.Contains(unit, "\nEnvironmentFile=-/etc/den/dend.env\n") {
		t.Errorf("the unit does not name the package's paths:\n%s", unit)
	}
	if env := string(data["etc/den/dend.env"].body); !strings.Contains(env, "\nDEN_RUNSC=/usr/lib/den/runsc\n") ||
		!strings.Contains(env, "\nDEN_INIT=/usr/lib/den/den-init\n") {
		t.Errorf("dend.env does not name the package's paths:\n%s", env)
	}
}

// TestTarball packs `make install`'s layout below one directory, and
// its sum is the one SHA256SUMS gives.
func TestTarball(t *testing.T) {
	o, gen := fakeBuild(t)
	list, err := tarLayout.files(o, gen, filepath.Join(o.out, "tar"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(o.out, "den_1.2.3_linux_amd64.tar.gz")
	if err := writeTarball(p, o.date, list); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	files := readTarGz(t, b)
	top := "den_1.2.3_linux_amd64/"
	checkFiles(t, files, top, map[string]int64{
		"usr/local/bin/dend": 0o755, "usr/local/bin/den": 0o755, "usr/local/lib/den/den-init": 0o755,
		"usr/local/lib/den/runsc": 0o755, "etc/systemd/system/dend.service": 0o644, "etc/den/dend.env": 0o600,
		"usr/local/share/bash-completion/completions/den": 0o644, "usr/local/share/zsh/site-functions/_den": 0o644,
		"usr/local/share/fish/vendor_completions.d/den.fish": 0o644,
		"usr/local/share/man/man1/den.1.gz":                  0o644, "usr/local/share/man/man8/dend.8.gz": 0o644,
	})
	if unit := string(files[top+"etc/systemd/system/dend.service"].body); !strings.Contains(unit, "\nExecStart=/usr/local/bin/dend $DEND_FLAGS\n") {
		t.Errorf("the unit does not name make install's paths:\n%s", unit)
	}

	sums := filepath.Join(o.out, "SHA256SUMS")
	if err := writeSums(sums, p); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(sums)
	sum, _ := sha256File(p)
	if string(got) != sum+"  den_1.2.3_linux_amd64.tar.gz\n" || len(sum) != 64 {
		t.Errorf("SHA256SUMS = %q, want %s and the name", got, sum)
	}
}

// checkFiles compares the regular files of an archive, below top, with
// want's paths and modes.
func checkFiles(t *testing.T, files map[string]entry, top string, want map[string]int64) {
	t.Helper()
	var extra []string
	for name, e := range files {
		if e.dir {
			continue
		}
		mode, ok := want[strings.TrimPrefix(name, top)]
		switch {
		case !ok || !strings.HasPrefix(name, top):
			extra = append(extra, name)
		case e.mode != mode:
			t.Errorf("%s: mode %o, want %o", name, e.mode, mode)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("files not expected: %q", extra)
	}
	for name := range want {
		if _, ok := files[top+name]; !ok {
			t.Errorf("missing %s", top+name)
		}
	}
}

type entry struct {
	body []byte
	mode int64
	dir  bool
}

// readAr reads an ar archive's members, as dpkg-deb does a .deb.
func readAr(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != "!<arch>\n" {
		t.Fatalf("not an ar archive: %q %v", magic, err)
	}
	members := map[string][]byte{}
	var order []string
	for {
		hdr := make([]byte, 60)
		if _, err := io.ReadFull(r, hdr); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimSpace(string(hdr[:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil {
			t.Fatalf("ar header %q: %v", hdr, err)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		if size%2 == 1 {
			r.ReadByte()
		}
		members[name] = body
		order = append(order, name)
	}
	if fmt.Sprint(order) != "[debian-binary control.tar.gz data.tar.gz]" {
		t.Errorf("members %v, want debian-binary, control.tar.gz, data.tar.gz in that order", order)
	}
	return members
}

// readTarGz reads a gzipped tar's entries by name, without "./".
func readTarGz(t *testing.T, b []byte) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		files[name] = entry{body: body, mode: hdr.Mode & 0o7777, dir: hdr.Typeflag == tar.TypeDir}
	}
}
