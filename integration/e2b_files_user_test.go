package integration

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// TestE2BFilesAsUser: E2B's file calls, made with the official SDK as the
// sandbox's user, have that user's permissions, and root's have root's
// (integration/js/e2b_files_user.mjs).
func TestE2BFilesAsUser(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	host := "http://" + addr
	d.mustDen("", "image", "build", "e2b-base")
	alice := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	out := node(t, 5*time.Minute, []string{"E2B_API_URL=" + host, "E2B_SANDBOX_URL=" + host, "E2B_API_KEY=" + alice},
		"e2b_files_user.mjs")
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("scenario output: %q", out)
	}
}

// TestFilesAs: den's own file API, given ?as= (client.FilesAs), does the
// call with that user's permissions; without it, as root.
func TestFilesAs(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 3*time.Minute)
	d.mustDen("", "create", "perm", "--image", "busybox")
	d.mustDen("", "exec", "perm", "--", "sh", "-c",
		"echo 'tester:x:1234:1234::/home/tester:/bin/sh' >> /etc/passwd && echo 'tester:x:1234:' >> /etc/group && "+
			"mkdir -p /home/tester && chown 1234:1234 /home/tester && printf secret > /root/s && chmod 600 /root/s")
	as := d.c.FilesAs("tester")

	if _, err := as.ReadFile(ctx, "perm", "/root/s"); err == nil {
		t.Error("reading root's 0600 file as tester worked")
	} else if !client.IsInvalid(err) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("reading root's 0600 file as tester: %v, want invalid, permission denied", err)
	}
	err := as.WriteFileWith(ctx, "perm", "/etc/passwd", strings.NewReader("x"), client.WriteOptions{})
	if !client.IsInvalid(err) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("writing /etc/passwd as tester: %v, want invalid, permission denied", err)
	}
	fi, err := d.c.Stat(ctx, "perm", "/etc/passwd")
	if err != nil || fi.UID != 0 || fi.Size < 20 {
		t.Errorf("/etc/passwd after the refused write: %+v %v", fi, err)
	}
	if err := as.WriteFileWith(ctx, "perm", "/home/tester/a/f.txt", strings.NewReader("mine"), client.WriteOptions{Parents: true}); err != nil {
		t.Fatalf("writing in tester's home: %v", err)
	}
	for _, p := range []string{"/home/tester/a", "/home/tester/a/f.txt"} {
		if fi, err := d.c.Stat(ctx, "perm", p); err != nil || fi.UID != 1234 || fi.Owner != "tester" {
			t.Errorf("%s: %+v %v, want tester's", p, fi, err)
		}
	}
	rc, err := d.c.ReadFile(ctx, "perm", "/root/s")
	if err != nil {
		t.Fatalf("reading root's file without ?as=: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "secret" {
		t.Errorf("root's file read as root: %q", b)
	}
	_, err = d.c.FilesAs("no-such-user").Stat(ctx, "perm", "/")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.API == nil || ce.API.Code != api.CodeInvalid || !strings.Contains(ce.API.Message, `no user "no-such-user"`) {
		t.Errorf("stat as an unknown user: %v, want invalid, no user", err)
	}
}
