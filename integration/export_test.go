package integration

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// An agent leaves one den for another that shares nothing with it: its
// running counter goes on from where it was and its files are there; a
// files-only export comes back stopped and boots; a tampered archive, the
// wrong key and a missing secret are refused and leave nothing behind.
func TestExportImport(t *testing.T) {
	src, dst := startDend(t), startDend(t)
	ctx := ctxT(t, 10*time.Minute)

	src.create("agent")
	src.mustSh("agent", "echo kept-note > /root/note")
	src.startCounter("agent", 5)
	atExport := src.count("agent")
	archive, key := src.export("agent", client.ExportOptions{})
	if len(key) != 64 {
		t.Fatalf("export gave key %q, want 64 hex digits", key)
	}

	// Refused: the wrong key, a changed byte, a cut archive. Nothing is
	// left on the other den.
	before := dst.leftovers()
	other := strings.Repeat("ab", 32)
	tampered := bytes.Clone(archive)
	tampered[len(tampered)/2] ^= 1
	for _, tc := range []struct {
		name, key, want string
		data            []byte
	}{
		{"wrong key", other, "sealed with another key", archive},
		{"tampered", key, "damaged", tampered},
		{"truncated", key, "damaged", archive[:len(archive)-1000]},
	} {
		_, err := dst.c.Import(ctx, bytes.NewReader(tc.data), client.ImportOptions{Key: tc.key})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("import with %s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if sbs, _ := dst.c.ListSandboxes(ctx); len(sbs) != 0 {
			t.Fatalf("import with %s left sandboxes: %+v", tc.name, sbs)
		}
		if after := dst.leftovers(); !slices.Equal(after, before) {
			t.Fatalf("import with %s left files: %v, before %v", tc.name, after, before)
		}
	}

	// With the key, the same agent: hibernated, waking with its counter.
	res, err := dst.c.Import(ctx, bytes.NewReader(archive), client.ImportOptions{Key: key, Name: "moved"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Memory || res.Sandbox.State != "hibernated" || res.From != "agent" {
		t.Fatalf("imported %+v, want hibernated with memory, from agent", res)
	}
	if after := dst.leftovers(); len(after) <= len(before) {
		t.Fatalf("an import made no volume or memory image that leftovers sees: %v", after)
	}
	if got := dst.count("moved"); got < atExport {
		t.Fatalf("count %d after import, %d at export: the counter started over", got, atExport)
	} else {
		dst.countAbove("moved", got)
	}
	if n := dst.countersIn("moved"); n != 1 {
		t.Fatalf("%d counters in the imported sandbox, want 1", n)
	}
	if note := dst.mustSh("moved", "cat /root/note"); note != "kept-note\n" {
		t.Fatalf("note in the imported sandbox: %q", note)
	}
	// The name is taken now: a second import under it is refused.
	if _, err := dst.c.Import(ctx, bytes.NewReader(archive), client.ImportOptions{Key: key, Name: "moved"}); err == nil {
		t.Fatal("a second import under a taken name worked")
	}

	// Files only, through the CLI: stopped, and it boots with the file.
	file := filepath.Join(t.TempDir(), "agent.den")
	if _, errs, code := src.den("export", "agent", "--fs-only", "-o", file); code != 0 || !strings.Contains(errs, "den import") {
		t.Fatalf("den export --fs-only: %d %s", code, errs)
	} else {
		key = strings.Fields(errs[strings.Index(errs, "--key ")+len("--key "):])[0]
	}
	if out, errs, code := dst.den("import", file, "--key", key, "--name", "files"); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("den import: %d %s %s", code, out, errs)
	}
	if _, err := dst.c.StartSandbox(ctx, "files"); err != nil {
		t.Fatal(err)
	}
	if note := dst.mustSh("files", "cat /root/note"); note != "kept-note\n" {
		t.Fatalf("note in the files-only import: %q", note)
	}
	if n := dst.countersIn("files"); n != 0 {
		t.Fatalf("%d counters after a files-only import, want none", n)
	}

	// A secret the agent needs is named, and nothing is made.
	if _, err := src.c.SetSecret(ctx, "API_TOKEN", []byte("not-exported")); err != nil {
		t.Fatal(err)
	}
	src.create("keyed", func(r *api.CreateSandboxRequest) { r.Secrets = []api.SecretGrant{{Name: "API_TOKEN"}} })
	if _, err := src.c.Export(ctx, "keyed", client.ExportOptions{}); err == nil || !strings.Contains(err.Error(), "granted secrets") ||
		!strings.Contains(client.Hint(err), "--fs-only") {
		t.Fatalf("memory export of a sandbox with secrets: %v (hint %q), want it refused suggesting --fs-only", err, client.Hint(err))
	}
	keyed, keyedKey := src.export("keyed", client.ExportOptions{FSOnly: true})
	if bytes.Contains(keyed, []byte("not-exported")) {
		t.Fatal("the secret's value is in the archive")
	}
	before = dst.leftovers()
	_, err = dst.c.Import(ctx, bytes.NewReader(keyed), client.ImportOptions{Key: keyedKey})
	if err == nil || !strings.Contains(err.Error(), "API_TOKEN") || !strings.Contains(client.Hint(err), "den secret set API_TOKEN") {
		t.Fatalf("import without the secret: %v (hint %q), want it refused naming API_TOKEN", err, client.Hint(err))
	}
	if _, err := dst.c.GetSandbox(ctx, "keyed"); err == nil {
		t.Fatal("a refused import left its sandbox")
	}
	if after := dst.leftovers(); !slices.Equal(after, before) {
		t.Fatalf("a refused import left files: %v, before %v", after, before)
	}
	if _, err := dst.c.SetSecret(ctx, "API_TOKEN", []byte("set-here")); err != nil {
		t.Fatal(err)
	}
	if res, err := dst.c.Import(ctx, bytes.NewReader(keyed), client.ImportOptions{Key: keyedKey}); err != nil || res.Sandbox.State != "stopped" {
		t.Fatalf("import once the secret is set: %+v %v", res, err)
	}
}

// export downloads an archive of sandbox name and returns it with its key.
func (d *dend) export(name string, o client.ExportOptions) ([]byte, string) {
	d.t.Helper()
	x, err := d.c.Export(ctxT(d.t, 5*time.Minute), name, o)
	if err != nil {
		d.t.Fatalf("exporting %s: %v", name, err)
	}
	defer x.Close()
	b, err := io.ReadAll(x)
	if err != nil {
		d.t.Fatalf("reading the archive of %s: %v", name, err)
	}
	return b, x.Key
}

// leftovers lists the volumes and memory images this dend keeps.
func (d *dend) leftovers() []string {
	var out []string
	for _, dir := range []string{"pool/sandboxes", "pool/checkpoints", "checkpoints"} {
		ents, _ := os.ReadDir(filepath.Join(d.dataDir, dir))
		for _, e := range ents {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}
