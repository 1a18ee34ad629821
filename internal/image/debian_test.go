package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMirrorFromSources(t *testing.T) {
	cases := []struct {
		dir, suite, want string
	}{
		{"deb822", "bookworm", "http://mirror.example.net/debian"},
		{"deb822", "trixie", "http://mirror.example.net/debian"}, // the same archive serves every suite
		{"oneline", "bookworm", "http://ftp.example.org/debian"},
		{"none", "bookworm", DefaultMirror},
		{"missing", "bookworm", DefaultMirror},
	}
	for _, c := range cases {
		t.Run(c.dir+"/"+c.suite, func(t *testing.T) {
			if got := mirrorFromSources(filepath.Join("testdata", "apt", c.dir), c.suite); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Mirror = "http://mirror.example.net/debian" })
	args := f.m.mmdebstrapArgs("/pool/images/debian", debianPackages, &aptCache{build: "/var/cache/den/apt/.build-1"})
	for _, want := range []string{"--variant=minbase", "--include=python3,git,curl,ca-certificates,procps", "--skip=essential/unlink",
		// The build's own directory, never the shared cache itself.
		"--setup-hook=sync-in /var/cache/den/apt/.build-1/in /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives /var/cache/den/apt/.build-1/out"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if tail := args[len(args)-3:]; !slices.Equal(tail, []string{"bookworm", "/pool/images/debian", "http://mirror.example.net/debian"}) {
		t.Errorf("args end with %q", tail)
	}
}

// TestBuildDebian bootstraps the real image from the Debian mirror: about
// a minute.
func TestBuildDebian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian root filesystem (about a minute)")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cache := t.TempDir()
	f := newFixture(t, func(c *Config) { c.CacheDir = cache })
	var lines int
	im, err := f.m.Build(context.Background(), "debian", false, func(p Progress) {
		if p.Phase == "bootstrap" {
			lines++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Error("no bootstrap progress")
	}
	if !slices.Contains(im.Env, "LANG=C.UTF-8") || !slices.Contains(im.Env, defaultPath) {
		t.Errorf("env %q", im.Env)
	}
	root := f.pool.Path(im.VolumeKey())
	for _, p := range []string{"usr/bin/python3", "usr/bin/git", "usr/bin/curl", "usr/bin/ps", "etc/ssl/certs/ca-certificates.crt", "tmp/.keep"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("/%s: %v", p, err)
		}
	}
	got := tree(t, root)
	if got["tmp"] != "dir 1777" || got["etc/hostname"] != "file 0644 localhost\n" || got["etc/resolv.conf"] != "file 0644 " {
		t.Errorf("tmp %q, hostname %q, resolv.conf %q", got["tmp"], got["etc/hostname"], got["etc/resolv.conf"])
	}
	if devs, _ := os.ReadDir(filepath.Join(root, "dev")); len(devs) != 0 {
		t.Errorf("/dev holds %d entries, want none", len(devs))
	}
	if hosts := got["etc/hosts"]; !strings.Contains(hosts, "localhost") {
		t.Errorf("etc/hosts %q", hosts)
	}
	if debs, _ := filepath.Glob(filepath.Join(cache, "*.deb")); len(debs) == 0 {
		t.Error("the package cache was not filled")
	}
	if builds, _ := filepath.Glob(filepath.Join(cache, ".*")); len(builds) != 0 {
		t.Errorf("the build left %q in the package cache", builds)
	}
	if debs, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb")); len(debs) != 0 {
		t.Errorf("the image keeps %d packages in its apt cache", len(debs))
	}
}
