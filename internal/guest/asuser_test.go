package guest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd"
)

// asUserTree is what TestFilesAsUser works in: a directory all may
// enter, with root's files and directories and a home of tester's.
type asUserTree struct {
	dir                            string
	secret, shared, public         string // root's 0600, root:shared 0640, root's 0644 in home
	rootDir, closedDir, home, mine string
}

func makeAsUserTree(t *testing.T) asUserTree {
	t.Helper()
	dir, err := os.MkdirTemp("", "den-asuser-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	tr := asUserTree{
		dir:       dir,
		secret:    filepath.Join(dir, "secret"),
		shared:    filepath.Join(dir, "shared"),
		rootDir:   filepath.Join(dir, "rootdir"),
		closedDir: filepath.Join(dir, "closed"),
		home:      filepath.Join(dir, "home"),
	}
	tr.public = filepath.Join(tr.home, "public")
	tr.mine = filepath.Join(tr.home, "mine")
	must(t, os.WriteFile(tr.secret, []byte("root only"), 0o600))
	must(t, os.WriteFile(tr.shared, []byte("for the group"), 0o640))
	must(t, os.Chown(tr.shared, 0, 1400))
	must(t, os.Mkdir(tr.rootDir, 0o755))
	must(t, os.WriteFile(filepath.Join(tr.rootDir, "f"), []byte("root's"), 0o644))
	must(t, os.Mkdir(tr.closedDir, 0o700))
	must(t, os.Mkdir(tr.home, 0o755))
	must(t, os.Chown(tr.home, 1234, 1300))
	must(t, os.WriteFile(tr.public, []byte("root's, in tester's home"), 0o644))
	return tr
}

// File calls done as a user have that user's permissions, supplementary
// groups included: what the user may not do is refused and changes
// nothing, what they make is theirs, and root (or no user) is den-init.
func TestFilesAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	tr := makeAsUserTree(t)
	etc := filepath.Join(tr.dir, "etc") // readable by all, as a sandbox's /etc
	must(t, os.Mkdir(etc, 0o755))
	must(t, os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\ntester:x:1234:1300::/home/tester:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\ntesters:x:1300:\nshared:x:1400:tester\n"), 0o644))
	c := serve(t, func(cfg *initd.Config) { cfg.EtcDir = etc })
	bg := context.Background()
	as := guest.AsUser(bg, "tester")

	read := func(ctx context.Context, p string) (string, error) {
		rc, _, err := c.ReadFile(ctx, p)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as tester: %v, want permission denied", what, err)
		}
	}

	_, err := read(as, tr.secret)
	refused("reading root's 0600 file", err)
	err = c.WriteFile(as, tr.secret, strings.NewReader("x"), guest.WriteOptions{User: "tester"})
	refused("writing root's 0600 file", err)
	err = c.WriteFile(as, filepath.Join(tr.rootDir, "new"), strings.NewReader("x"), guest.WriteOptions{User: "tester"})
	refused("writing in root's directory", err)
	err = c.WriteFile(as, tr.public, strings.NewReader("x"), guest.WriteOptions{User: "tester"})
	refused("replacing root's file in tester's own directory", err)
	err = c.Mkdir(as, guest.MkdirRequest{Path: filepath.Join(tr.rootDir, "d"), User: "tester"})
	refused("mkdir in root's directory", err)
	err = c.WriteFile(as, filepath.Join(tr.rootDir, "p", "q"), strings.NewReader("x"), guest.WriteOptions{User: "tester", Parents: true})
	refused("writing with parents under root's directory", err)
	refused("moving root's file", c.Move(as, filepath.Join(tr.rootDir, "f"), filepath.Join(tr.home, "f")))
	refused("removing root's file", c.Remove(as, filepath.Join(tr.rootDir, "f"), false))
	_, err = c.ReadDir(as, tr.closedDir)
	refused("listing root's 0700 directory", err)
	_, err = c.Stat(as, filepath.Join(tr.closedDir, "x"))
	refused("stat in root's 0700 directory", err)
	err = c.Watch(as, tr.closedDir, false, func() {}, func(guest.WatchEvent) error { return nil })
	refused("watching root's 0700 directory", err)
	err = c.WriteFile(as, filepath.Join(tr.home, "given"), strings.NewReader("x"), guest.WriteOptions{User: "root"})
	refused("giving a file to root", err)

	// Nothing changed.
	for p, want := range map[string]string{tr.secret: "root only", tr.public: "root's, in tester's home", filepath.Join(tr.rootDir, "f"): "root's"} {
		b, err := os.ReadFile(p)
		var st syscall.Stat_t
		if err == nil {
			err = syscall.Stat(p, &st)
		}
		if err != nil || string(b) != want || st.Uid != 0 {
			t.Errorf("%s after the refusals: %q (uid %d), %v; want %q, root's", p, b, st.Uid, err, want)
		}
	}
	for _, p := range []string{filepath.Join(tr.rootDir, "new"), filepath.Join(tr.rootDir, "d"), filepath.Join(tr.rootDir, "p"), filepath.Join(tr.home, "f"), filepath.Join(tr.home, "given")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made by a refused call", p)
		}
	}

	// A group the user is a member of counts.
	if got, err := read(as, tr.shared); err != nil || got != "for the group" {
		t.Errorf("reading a file of tester's supplementary group: %q, %v", got, err)
	}
	// What tester may do works, and what is made is tester's.
	deep := filepath.Join(tr.mine, "a", "f.txt")
	if err := c.WriteFile(as, deep, strings.NewReader("mine"), guest.WriteOptions{User: "tester", Parents: true}); err != nil {
		t.Fatalf("writing in tester's home: %v", err)
	}
	if err := c.Mkdir(as, guest.MkdirRequest{Path: filepath.Join(tr.mine, "d"), User: "tester"}); err != nil {
		t.Fatalf("mkdir in tester's home: %v", err)
	}
	if err := c.WriteFile(as, filepath.Join(tr.home, "plain"), strings.NewReader("p"), guest.WriteOptions{}); err != nil {
		t.Fatalf("writing in tester's home, no owner given: %v", err)
	}
	for _, p := range []string{tr.mine, filepath.Dir(deep), deep, filepath.Join(tr.mine, "d"), filepath.Join(tr.home, "plain")} {
		fi, err := c.Stat(as, p)
		if err != nil || fi.UID != 1234 || fi.GID != 1300 {
			t.Errorf("%s: %+v, %v; want tester:testers", p, fi, err)
		}
	}
	if got, err := read(as, deep); err != nil || got != "mine" {
		t.Errorf("reading back: %q, %v", got, err)
	}
	if err := c.Move(as, deep, filepath.Join(tr.mine, "g.txt")); err != nil {
		t.Errorf("moving tester's file: %v", err)
	}
	if err := c.Remove(as, tr.mine, true); err != nil {
		t.Errorf("removing tester's tree: %v", err)
	}

	// Root, named or not, is den-init: and den-init is still root after
	// the calls done as tester.
	for _, ctx := range []context.Context{bg, guest.AsUser(bg, "root")} {
		if got, err := read(ctx, tr.secret); err != nil || got != "root only" {
			t.Errorf("reading root's file as root: %q, %v", got, err)
		}
	}
	if err := c.WriteFile(bg, tr.public, strings.NewReader("rewritten"), guest.WriteOptions{}); err != nil {
		t.Errorf("root replacing its file: %v", err)
	}

	if _, err := c.Stat(guest.AsUser(bg, "nobody"), tr.dir); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `no user "nobody"`) {
		t.Errorf("stat as an unknown user: %v, want invalid, no user", err)
	}
}

// A den-init from before acting as a user has no such routes: the client
// says so, and never falls back to doing the call as root.
func TestFilesAsUserOnAnOlderDenInit(t *testing.T) {
	var paths []string
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"code":"not_found","message":"no route `+r.Method+` `+r.URL.Path+`"}`)
	}))
	defer old.Close()
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(old.URL, "http://")), testToken)
	defer c.Close()
	ctx := guest.AsUser(t.Context(), "user")
	err := c.WriteFile(ctx, "/etc/passwd", strings.NewReader("x"), guest.WriteOptions{})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "too old") {
		t.Errorf("write as a user on an older den-init: %v, want unavailable, too old", err)
	}
	if len(paths) != 1 || paths[0] != "/v1/as/user/files/content" {
		t.Errorf("requests %q, want only PUT /v1/as/user/files/content", paths)
	}
	// Without a user, a not-found stays what it is.
	if _, err := c.Stat(t.Context(), "/x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat as root: %v, want not found", err)
	}
}

// With ParentsByRoot, what a user writes or makes may lie beneath
// directories that are missing and that the user could not make: root
// makes them and gives them to the user, as E2B's envd does. The rest is
// still the user's to do: the file is written as the user, existing
// directories must be ones the user may reach, and nothing that exists
// changes.
func TestFilesAsUserParentsByRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	tr := makeAsUserTree(t)
	etc := filepath.Join(tr.dir, "etc")
	must(t, os.Mkdir(etc, 0o755))
	must(t, os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\ntester:x:1234:1300::/home/tester:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\ntesters:x:1300:\n"), 0o644))
	must(t, os.Symlink(tr.closedDir, filepath.Join(tr.home, "to-closed")))
	c := serve(t, func(cfg *initd.Config) { cfg.EtcDir = etc })
	as := guest.AsUser(context.Background(), "tester")
	byRoot := guest.WriteOptions{User: "tester", Parents: true, ParentsByRoot: true}

	deep := filepath.Join(tr.rootDir, "p", "q", "f.txt")
	if err := c.WriteFile(as, deep, strings.NewReader("mine"), byRoot); err != nil {
		t.Fatalf("writing beneath missing directories in root's: %v", err)
	}
	made := filepath.Join(tr.rootDir, "m", "n")
	if err := c.Mkdir(as, guest.MkdirRequest{Path: made, Parents: true, ParentsByRoot: true, User: "tester"}); err != nil {
		t.Fatalf("mkdir beneath missing directories in root's: %v", err)
	}
	for p, want := range map[string]string{
		tr.rootDir: "0:0:755", filepath.Dir(filepath.Dir(deep)): "1234:1300:755", filepath.Dir(deep): "1234:1300:755", deep: "1234:1300:644",
		filepath.Dir(made): "1234:1300:755", made: "1234:1300:755",
	} {
		var st syscall.Stat_t
		must(t, syscall.Lstat(p, &st))
		if got := fmt.Sprintf("%d:%d:%o", st.Uid, st.Gid, st.Mode&0o7777); got != want {
			t.Errorf("%s is %s, want %s", p, got, want)
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as tester: %v, want permission denied", what, err)
		}
	}
	refused("writing a new file in root's directory", c.WriteFile(as, filepath.Join(tr.rootDir, "new"), strings.NewReader("x"), byRoot))
	refused("replacing root's file", c.WriteFile(as, filepath.Join(tr.rootDir, "f"), strings.NewReader("x"), byRoot))
	refused("writing beneath root's 0700 directory", c.WriteFile(as, filepath.Join(tr.closedDir, "x", "y"), strings.NewReader("x"), byRoot))
	refused("writing through a symlink to root's 0700 directory", c.WriteFile(as, filepath.Join(tr.home, "to-closed", "x", "y"), strings.NewReader("x"), byRoot))
	refused("mkdir beneath root's 0700 directory", c.Mkdir(as, guest.MkdirRequest{Path: filepath.Join(tr.closedDir, "x"), Parents: true, ParentsByRoot: true}))
	err := c.WriteFile(as, filepath.Join(tr.rootDir, "f", "x"), strings.NewReader("x"), byRoot)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("writing through a file: %v, want conflict, not a directory", err)
	}
	if b, err := os.ReadFile(filepath.Join(tr.rootDir, "f")); err != nil || string(b) != "root's" {
		t.Errorf("root's file after the refusals: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(tr.rootDir, "new"), filepath.Join(tr.closedDir, "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made by a refused call", p)
		}
	}
}
