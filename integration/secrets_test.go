package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// findValues lists the files under dir holding any of values.
func findValues(t *testing.T, dir string, values ...[]byte) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		for range fileHolds(p, values) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// fileHolds returns the values the file at p holds, read a piece at a
// time (the pool's loop file is gigabytes), each piece overlapping the
// last by the longest value less a byte so none is missed at the seam.
func fileHolds(p string, values [][]byte) [][]byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	longest := 0
	for _, v := range values {
		longest = max(longest, len(v))
	}
	buf := make([]byte, 4<<20+longest)
	found := make([]bool, len(values))
	kept := 0
	for {
		n, err := io.ReadFull(f, buf[kept:])
		window := buf[:kept+n]
		for i, v := range values {
			found[i] = found[i] || bytes.Contains(window, v)
		}
		if err != nil {
			break
		}
		kept = min(longest-1, len(window))
		copy(buf, window[len(window)-kept:])
	}
	var held [][]byte
	for i, v := range values {
		if found[i] {
			held = append(held, v)
		}
	}
	return held
}

func sha(v []byte) string { s := sha256.Sum256(v); return hex.EncodeToString(s[:]) }

// Secrets reach a sandbox's commands as variables and files, and nowhere
// else: after a command used them, hibernation, a checkpoint with memory
// and a fork, neither value is in any file of the storage pool or the
// checkpoint directory; the fork has none; output that prints one is
// masked; revoking one removes it at once.
func TestSecretsNeverSaved(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	token, key := []byte("tok-"+rand.Text()), []byte("key-"+rand.Text())
	for name, v := range map[string][]byte{"API_TOKEN": token, "TLS_KEY": key} {
		if _, err := d.c.SetSecret(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "vault", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}, {Name: "TLS_KEY", File: "key.pem"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "nope", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "NOT_SET"}}}); !client.IsNotFound(err) {
		t.Fatalf("granting a secret that is not set: %v, want not found", err)
	}
	// Used without being printed: only hashes come out.
	use := `printf %s "$API_TOKEN" | sha256sum | cut -c1-64; sha256sum < /run/secrets/key.pem | cut -c1-64; stat -c %a /run/secrets/key.pem`
	want := sha(token) + "\n" + sha(key) + "\n400\n"
	if got := d.mustSh("vault", use); got != want {
		t.Fatalf("secrets inside: %q, want %q", got, want)
	}
	pool, cks := filepath.Join(d.dataDir, "pool"), filepath.Join(d.dataDir, "checkpoints")
	noValues := func(when string) {
		t.Helper()
		for _, dir := range []string{pool, cks} {
			if hits := findValues(t, dir, token, key); len(hits) > 0 {
				t.Fatalf("%s: a secret's value is in %v", when, hits)
			}
		}
	}

	if _, err := d.c.Hibernate(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	noValues("after hibernate")
	if got := d.mustSh("vault", use); got != want {
		t.Fatalf("secrets after waking: %q, want %q", got, want)
	}
	if _, err := d.c.Checkpoint(ctx, "vault", client.CheckpointOptions{Name: "mem"}); err != nil {
		t.Fatal(err)
	}
	noValues("after a checkpoint with memory")
	kids, err := d.c.Fork(ctx, "vault", client.ForkOptions{Name: "kid"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids[0].Secrets) != 0 {
		t.Fatalf("the fork was granted %+v", kids[0].Secrets)
	}
	if got := d.mustSh("kid", `echo "${API_TOKEN:-none}"; ls /run/secrets | wc -l`); got != "none\n0\n" {
		t.Fatalf("the fork sees secrets: %q", got)
	}
	noValues("after a fork")

	// Printed output is masked on the host, same length.
	run, err := d.c.ExecDetached(ctx, "vault", api.ExecRequest{Argv: []string{"sh", "-c", `echo "token=$API_TOKEN"`}})
	if err != nil {
		t.Fatal(err)
	}
	if out := readLogs(t, d, "vault", run.ID, "stdout", 0, true); out != "token="+strings.Repeat("*", len(token))+"\n" {
		t.Fatalf("printed secret: %q", out)
	}
	if hits := findValues(t, filepath.Join(d.dataDir, "runs"), token, key); len(hits) > 0 {
		t.Fatalf("a secret's value is in run output %v", hits)
	}

	// Revoked: gone from later commands and from /run/secrets at once.
	sb, err := d.c.SetSecrets(ctx, "vault", []api.SecretGrant{{Name: "API_TOKEN"}})
	if err != nil || len(sb.Secrets) != 1 {
		t.Fatalf("revoking TLS_KEY: %v %+v", err, sb)
	}
	if got := d.mustSh("vault", `ls /run/secrets | wc -l; printf %s "$API_TOKEN" | sha256sum | cut -c1-64`); got != "0\n"+sha(token)+"\n" {
		t.Fatalf("after revoking the file secret: %q", got)
	}
	if _, err := d.c.SetSecrets(ctx, "vault", nil); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("vault", `echo "${API_TOKEN:-none}"`); got != "none\n" {
		t.Fatalf("after revoking everything: %q", got)
	}
	noValues("at the end")
}

// A process started with secrets holds them in its memory for as long as
// it runs, so den saves no memory of the sandbox meanwhile: hibernate, a
// checkpoint with memory and a fork with processes are refused saying
// which process, the idle policy keeps the sandbox paused in RAM instead
// (saying why in its history), and files-only checkpoints and forks from
// them work. Once the process ends, hibernation goes ahead, and no file of
// the pool or checkpoint directory ever holds the value.
func TestSecretHoldersNotSaved(t *testing.T) {
	// Its own hibernate_after of 1s is under the default floor.
	d := startDend(t, "--min-ttl", "1s")
	ctx := ctxT(t, 5*time.Minute)
	token := []byte("held-" + rand.Text())
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", token); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "svc", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	d.create("plain") // no secrets: its memory is saved as ever
	pool, cks := filepath.Join(d.dataDir, "pool"), filepath.Join(d.dataDir, "checkpoints")
	noValue := func(when string) {
		t.Helper()
		for _, dir := range []string{pool, cks} {
			if hits := findValues(t, dir, token); len(hits) > 0 {
				t.Fatalf("%s: the secret's value is in %v", when, hits)
			}
		}
	}

	// A server left behind by a command, in the command's process group.
	pid := strings.TrimSpace(d.mustSh("svc", `sleep 600 >/dev/null 2>&1 & echo $!`))
	procs, err := d.c.Processes(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	marked := false
	for _, p := range procs {
		if fmt.Sprint(p.PID) == pid {
			marked = p.Secrets
		} else if p.Secrets {
			t.Errorf("process %+v is marked as holding secrets", p)
		}
	}
	if !marked {
		t.Fatalf("the orphaned sleep %s is not marked as holding secrets: %+v", pid, procs)
	}
	if out := d.mustDen("", "top", "svc"); !strings.Contains(out, "SECRETS") || !strings.Contains(out, "yes") {
		t.Errorf("den top:\n%s", out)
	}

	refused := func(what string, err error) {
		t.Helper()
		e := apiErr(t, err)
		if e.Code != api.CodeConflict || !strings.Contains(e.Message, "would save secrets to disk") ||
			!strings.Contains(e.Message, "pid "+pid+" `sleep 600`") || !strings.Contains(e.Hint, "kill PID") {
			t.Errorf("%s: %+v", what, e)
		}
	}
	_, err = d.c.Hibernate(ctx, "svc")
	refused("hibernate", err)
	_, err = d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "mem"})
	refused("checkpoint with memory", err)
	_, err = d.c.Fork(ctx, "svc", client.ForkOptions{Name: "kid"})
	refused("fork", err)
	if _, err := d.c.GetSandbox(ctx, "kid"); !client.IsNotFound(err) {
		t.Errorf("the refused fork left a sandbox: %v", err)
	}
	if sb, err := d.c.GetSandbox(ctx, "svc"); err != nil || sb.State != api.StateRunning {
		t.Fatalf("after the refusals: %+v, %v", sb, err)
	}
	if cks, err := d.c.Checkpoints(ctx, "svc"); err != nil || len(cks) != 0 {
		t.Errorf("the refusals left checkpoints: %+v, %v", cks, err)
	}
	noValue("after the refusals")

	// Files alone are fine, and a fork from them has no process of svc's.
	if _, err := d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "files", FSOnly: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Fork(ctx, "svc", client.ForkOptions{Name: "kid", From: "files"}); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("kid", `pidof sleep || echo none`); got != "none\n" {
		t.Errorf("the fork from files runs %q", got)
	}
	// The neighbour without secrets hibernates as ever.
	if _, err := d.c.Hibernate(ctx, "plain"); err != nil {
		t.Fatal(err)
	}

	// Paused, it is asked (thawed for the question, frozen again) and
	// refused; the idle policy keeps it paused and says why.
	if _, err := d.c.Pause(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Hibernate(ctx, "svc")
	refused("hibernate while paused", err)
	if sb, _ := d.c.GetSandbox(ctx, "svc"); sb.State != api.StatePaused {
		t.Fatalf("after a refused hibernate of a paused sandbox: %s", sb.State)
	}
	soon := "1s"
	if _, err := d.c.SetPolicy(ctx, "svc", api.Policy{HibernateAfter: &soon}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the idle policy to put off hibernating", func() bool {
		evs, err := d.c.Events(ctx, "svc")
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == "deferred" && strings.Contains(ev.Message, "not hibernated") && strings.Contains(ev.Message, "pid "+pid) {
				return true
			}
		}
		return false
	})
	if sb, _ := d.c.GetSandbox(ctx, "svc"); sb.State != api.StatePaused {
		t.Fatalf("the idle policy left it %s, want paused", sb.State)
	}
	noValue("after the idle policy's tries")

	// Once the holder ends, it hibernates (the policy is still due).
	later := "1h"
	if _, err := d.c.SetPolicy(ctx, "svc", api.Policy{HibernateAfter: &later}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("svc", "kill "+pid)
	waitFor(t, 10*time.Second, "the holder to end", func() bool {
		out, _, _ := d.sh("svc", `pidof sleep || echo none`)
		return out == "none\n"
	})
	if _, err := d.c.Hibernate(ctx, "svc"); err != nil {
		t.Fatalf("hibernate once no process holds secrets: %v", err)
	}
	noValue("after hibernate")
	if got := d.mustSh("svc", `printf %s "$API_TOKEN" | sha256sum | cut -c1-64`); got != sha(token)+"\n" {
		t.Fatalf("the secret after waking: %q", got)
	}
}
