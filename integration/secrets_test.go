package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, v := range values {
			if bytes.Contains(b, v) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	return hits
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
