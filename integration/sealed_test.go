package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The memory of a sandbox ever granted a secret reaches a disk only
// sealed. Here the value is where den cannot see it: a copy in /dev/shm (a
// tmpfs, so in memory) and the environment of a process started before
// the grant, which read it from that copy (nothing marks it: it was never
// given a secret). Hibernation, a checkpoint with
// memory and a fork all save it, and no file under the data directory or
// the scratch directory holds the value; wake, restore and the fork bring
// it and the process back. A sandbox never granted one saves as before.
// Another images key is refused, saying which.
func TestSecretImagesSealed(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	token := []byte("sealed-" + rand.Text())
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", token); err != nil {
		t.Fatal(err)
	}
	d.create("svc")
	d.mustSh("svc", `(setsid sh -c 'while [ ! -s /dev/shm/held ]; do usleep 20000; done; API_TOKEN=$(cat /dev/shm/held) exec sleep 600' </dev/null >/dev/null 2>&1 &)`)
	if _, err := d.c.SetSecrets(ctx, "svc", []api.SecretGrant{{Name: "API_TOKEN"}}); err != nil {
		t.Fatal(err)
	}
	d.create("plain")
	scratch := filepath.Join("/dev/shm", "den-images-") // one per data dir
	noValue := func(when string) {
		t.Helper()
		if hits := findValues(t, filepath.Dir(d.dataDir), token); len(hits) > 0 {
			t.Fatalf("%s: the secret's value is in %v", when, hits)
		}
		shm, _ := filepath.Glob(scratch + "*")
		for _, dir := range shm {
			if hits := findValues(t, dir, token); len(hits) > 0 {
				t.Fatalf("%s: the secret's value is left in memory scratch %v", when, hits)
			}
		}
	}
	want := sha(token)
	d.mustSh("svc", `printf %s "$API_TOKEN" > /dev/shm/held`)
	var pid string
	waitFor(t, 10*time.Second, "the process started before the grant to take the value", func() bool {
		procs, err := d.c.Processes(ctx, "svc")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if p.Secrets {
				t.Fatalf("%+v is marked: this test needs a holder den cannot see", p)
			}
			if p.Command == "sleep 600" {
				pid = fmt.Sprint(p.PID)
			}
		}
		return pid != ""
	})
	// What the sandbox holds, as digests (output with the value is masked).
	held := func(name string) string {
		t.Helper()
		return d.mustSh(name, `sha256sum </dev/shm/held | cut -c1-64
			tr '\0' '\n' </proc/`+pid+`/environ | sed -n 's/^API_TOKEN=//p' | tr -d '\n' | sha256sum | cut -c1-64`)
	}
	if got := held("svc"); got != want+"\n"+want+"\n" {
		t.Fatalf("before: %q, want the value's digest twice", got)
	}

	if _, err := d.c.Hibernate(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	noValue("hibernated")
	sealed, plain := 0, 0
	imgs, _ := filepath.Glob(filepath.Join(d.dataDir, "checkpoints", "*", "checkpoint.img"))
	for _, f := range imgs {
		b, _ := os.ReadFile(f)
		if bytes.HasPrefix(b, []byte("DENIMG1\n")) {
			sealed++
		} else {
			plain++
		}
	}
	if sealed != 1 || plain != 1 {
		t.Errorf("%d sealed and %d plain images, want one of each", sealed, plain)
	}
	if fi, err := os.Stat(filepath.Join(d.dataDir, "images.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("images key: %v, %v", fi, err)
	}
	if got := held("svc"); got != want+"\n"+want+"\n" { // wakes it
		t.Fatalf("after waking: %q", got)
	}
	if got := held("plain"); !strings.HasPrefix(got, "sha256sum") && got == want+"\n"+want+"\n" {
		t.Fatalf("plain holds the value")
	}

	if _, err := d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "mem"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Fork(ctx, "svc", client.ForkOptions{Name: "kid"}); err != nil {
		t.Fatal(err)
	}
	noValue("after a checkpoint and a fork")
	if got := held("kid"); got != want+"\n"+want+"\n" {
		t.Errorf("the fork: %q", got)
	}
	d.mustSh("svc", "rm /dev/shm/held")
	if _, err := d.c.Restore(ctx, "svc", "mem"); err != nil {
		t.Fatal(err)
	}
	if got := held("svc"); got != want+"\n"+want+"\n" {
		t.Errorf("after restoring: %q", got)
	}
	// The fork's own images are sealed too: it may hold its parent's value.
	if _, err := d.c.Hibernate(ctx, "kid"); err != nil {
		t.Fatal(err)
	}
	noValue("the fork hibernated")

	// Another key file: the image is refused, naming both keys.
	if _, err := d.c.Hibernate(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	d.stop()
	keyFile := filepath.Join(d.dataDir, "images.key")
	key, _ := os.ReadFile(keyFile)
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte("ab"), 32), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	_, err := d.c.Resume(ctx, "svc")
	if e := apiErr(t, err); !strings.Contains(e.Message, "images key") || strings.Contains(e.Message, d.dataDir) {
		t.Errorf("waking with another key: %+v", e)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "fresh", Image: "busybox", Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Checkpoint(ctx, "fresh", client.CheckpointOptions{Name: "k2"}); err == nil || !strings.Contains(err.Error(), "images key") {
		t.Errorf("sealing with another key while images name the first: %v", err)
	}
	d.stop()
	os.WriteFile(keyFile, key, 0o600)
	d.start()
	if sb, err := d.c.GetSandbox(ctx, "svc"); err != nil || sb.State != api.StateHibernated {
		t.Errorf("after the refused wake: %+v, %v; want it still hibernated", sb, err)
	}
	if got := held("svc"); got != want+"\n"+want+"\n" {
		t.Errorf("with its key back: %q", got)
	}
}
