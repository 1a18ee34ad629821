package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// e2bBasePackages are what E2B's base template offers agent code beyond
// the debian image: `python` as python3, and a login shell. Not sudo:
// gVisor ignores the set-user-ID bit, so den-init stands in for it.
const e2bBasePackages = debianPackages + ",python-is-python3,bash"

// sudoPath is where sudo is found first, whatever PATH a shell sets: a
// link to den-init, which runs as sudo (see internal/initd/sudo).
const sudoPath = "usr/local/bin/sudo"

// The account E2B's base template runs everything as.
const (
	e2bUser = "user"
	e2bUID  = 1000
	e2bHome = "/home/user"
)

// fillE2BBase makes the image behind E2B's `base` template: the debian
// image with python, and the user `user` (uid and gid 1000, home
// /home/user, login shell bash, in the group sudo), which commands run as
// and start in unless told otherwise.
func (m *Manager) fillE2BBase(ctx context.Context, root string, progress func(Progress)) (*sandbox.Image, error) {
	im, err := m.bootstrapDebian(ctx, root, e2bBasePackages, progress)
	if err != nil {
		return nil, err
	}
	progress(Progress{Phase: "user", Message: "adding the user " + e2bUser})
	if err := addE2BUser(root); err != nil {
		return nil, err
	}
	im.Ref = "e2b-base:" + m.cfg.Suite
	im.User = e2bUser
	im.Cwd = e2bHome
	return im, nil
}

// addE2BUser adds the user to the account files under root, gives it a
// home from /etc/skel and sudo. It writes the files itself, so that
// nothing runs inside the image.
func addE2BUser(root string) error {
	id := fmt.Sprint(e2bUID)
	appends := []struct{ file, line string }{
		{"etc/passwd", e2bUser + ":x:" + id + ":" + id + "::" + e2bHome + ":/bin/bash"},
		{"etc/shadow", e2bUser + ":*:19000:0:99999:7:::"},
		{"etc/group", e2bUser + ":x:" + id + ":"},
		{"etc/gshadow", e2bUser + ":!::"},
	}
	for _, a := range appends {
		if err := appendLine(filepath.Join(root, a.file), a.line); err != nil {
			return fmt.Errorf("adding %s to /%s: %w", e2bUser, a.file, hostErr(err))
		}
	}
	if err := addToGroup(filepath.Join(root, "etc/group"), "sudo", e2bUser); err != nil {
		return fmt.Errorf("adding %s to the sudo group: %w", e2bUser, hostErr(err))
	}
	home := filepath.Join(root, e2bHome)
	if err := os.MkdirAll(home, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", e2bHome, hostErr(err))
	}
	skel, err := os.ReadDir(filepath.Join(root, "etc/skel"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading /etc/skel: %w", hostErr(err))
	}
	for _, e := range skel {
		if !e.Type().IsRegular() {
			continue
		}
		dst := filepath.Join(home, e.Name())
		if err := copyFile(filepath.Join(root, "etc/skel", e.Name()), dst, 0o644); err != nil {
			return fmt.Errorf("copying /etc/skel/%s: %w", e.Name(), hostErr(err))
		}
		if err := os.Lchown(dst, e2bUID, e2bUID); err != nil {
			return fmt.Errorf("giving %s its %s: %w", e2bUser, e.Name(), hostErr(err))
		}
	}
	if err := os.Lchown(home, e2bUID, e2bUID); err != nil {
		return fmt.Errorf("giving %s its home: %w", e2bUser, hostErr(err))
	}
	if err := os.Chmod(home, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", e2bHome, hostErr(err))
	}
	sudo := filepath.Join(root, sudoPath)
	if err := os.MkdirAll(filepath.Dir(sudo), 0o755); err != nil {
		return fmt.Errorf("linking sudo: %w", hostErr(err))
	}
	if err := os.Remove(sudo); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("linking sudo: %w", hostErr(err))
	}
	if err := os.Symlink(guest.InitPath, sudo); err != nil {
		return fmt.Errorf("linking sudo: %w", hostErr(err))
	}
	return nil
}

// appendLine adds line to file, after a newline if the file lacks one.
func appendLine(file, line string) error {
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, line+"\n"...)
	return writeKeepingMode(file, b, 0o644)
}

// addToGroup adds member to group's line in the group file.
func addToGroup(file, group, member string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	found := false
	for i, l := range lines {
		f := strings.Split(l, ":")
		if len(f) != 4 || f[0] != group {
			continue
		}
		found = true
		if f[3] == "" {
			f[3] = member
		} else {
			f[3] += "," + member
		}
		lines[i] = strings.Join(f, ":")
	}
	if !found {
		return fmt.Errorf("no group %q", group)
	}
	return writeKeepingMode(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// writeKeepingMode replaces file with b, keeping its mode (def for a new
// file).
func writeKeepingMode(file string, b []byte, def os.FileMode) error {
	mode := def
	if fi, err := os.Stat(file); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.WriteFile(file, b, mode); err != nil {
		return err
	}
	return os.Chmod(file, mode)
}
