package image

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The base template's user is added to a bootstrapped root: account
// files, sudo group and rule, and a home of its own from /etc/skel.
func TestAddE2BUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the home away")
	}
	root := t.TempDir()
	for file, content := range map[string]string{
		"etc/passwd":       "root:x:0:0:root:/root:/bin/bash\n",
		"etc/shadow":       "root:*:19000:0:99999:7:::\n",
		"etc/group":        "root:x:0:\nsudo:x:27:\n",
		"etc/gshadow":      "root:*::\nsudo:*::",
		"etc/skel/.bashrc": "# bashrc\n",
	} {
		must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(file)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, file), []byte(content), 0o640))
	}
	if err := addE2BUser(root); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n",
		"etc/group":         "root:x:0:\nsudo:x:27:user\nuser:x:1000:\n",
		"etc/gshadow":       "root:*::\nsudo:*::\nuser:!::\n",
		"home/user/.bashrc": "# bashrc\n",
	} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil || string(b) != want {
			t.Errorf("/%s = %q (%v), want %q", file, b, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/shadow")); !strings.Contains(string(b), "\nuser:*:") {
		t.Errorf("/etc/shadow = %q", b)
	}
	if target, err := os.Readlink(filepath.Join(root, "usr/local/bin/sudo")); err != nil || target != "/.den/den-init" {
		t.Errorf("sudo links to %q (%v), want den-init", target, err)
	}
	for p, mode := range map[string]os.FileMode{"etc/shadow": 0o640, "home/user": 0o750} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("/%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, mode)
		}
	}
	for _, p := range []string{"home/user", "home/user/.bashrc"} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("/%s owned by %d:%d, want 1000:1000", p, st.Uid, st.Gid)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
