package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/integration/docblock"
)

// docFiles are the markdown files whose commands are run: the README,
// then docs/ in name order; DEN_DOCS (README.md,docs/cli.md,...) runs
// only those, while a page is being written.
func docFiles(t *testing.T) []string {
	t.Helper()
	if only := os.Getenv("DEN_DOCS"); only != "" {
		var files []string
		for _, f := range strings.Split(only, ",") {
			files = append(files, "../"+f)
		}
		return files
	}
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, files...)
}

// Every command the docs show runs against a real dend, as written, so
// the docs cannot drift: each file's ```sh blocks in order, in one bash.
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the debian and e2b-base images and runs every documented command")
	}
	type file struct {
		name   string
		blocks []docblock.Block
	}
	var files []file
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docblock.Parse(strings.TrimPrefix(f, "../"), string(b))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{strings.TrimPrefix(f, "../"), blocks})
	}

	addr := freeLoopbackAddr(t)
	sshAddr := freeLoopbackAddr(t)
	d := startDend(t, "--listen", addr, "--ssh-listen", sshAddr, "--pool-size", "64G")
	ran, inVM, skipped := 0, 0, 0
	for _, f := range files {
		var run []docblock.Block
		for _, b := range f.blocks {
			switch {
			case b.Skip != "":
				skipped++
				t.Logf("%s:%d: not run: %s", b.File, b.Line, b.Skip)
				continue
			case b.VM != "":
				inVM++
				t.Logf("%s:%d: run in the VM, as {vm: %s}", b.File, b.Line, b.VM)
				continue
			}
			run = append(run, b)
		}
		ran += len(run)
		t.Logf("%s: %d blocks run, %d not", f.name, len(run), len(f.blocks)-len(run))
		if len(run) == 0 {
			continue
		}
		if !t.Run(f.name, func(t *testing.T) {
			var rig docRig
			if setUp := docRigs[f.name]; setUp != nil {
				rig = setUp(t, docServer{d: d, addr: addr, sshAddr: sshAddr})
			}
			d.runDocBlocks(t, run, addr, rig)
		}) {
			t.Logf("%s failed: dend's log ends\n%s", f.name, tail(d.logs(), 3000))
		}
		d.clearDocState(t)
	}
	t.Logf("docs: %d blocks run here, %d in the VM (scripts/hostvm-*.sh), %d not run (each with its reason above)", ran, inVM, skipped)
	if os.Getenv("DEN_DOCS") == "" && skipped >= ran {
		t.Errorf("%d blocks are not run against %d run: the untested ones must stay a minority", skipped, ran)
	}
}

// runDocBlocks runs one file's blocks in order in one bash (a live
// block, on a terminal or until stopped, by the test binary it starts:
// see TestDocsLiveBlock), with den on
// PATH, in a directory of their own; the docs' default data directory
// and address are this dend's, and so is their socket unless the file's
// rig gives another.
func (d *dend) runDocBlocks(t *testing.T, blocks []docblock.Block, addr string, rig docRig) {
	dir := t.TempDir()
	bin := binDir
	if rig.bin != "" {
		bin = rig.bin
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	for name, target := range rig.links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range rig.files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	socket := d.socket
	if rig.socket != "" {
		socket = rig.socket
	}
	// The rig's replacements come first: of two that match at one place,
	// strings.Replacer takes the one listed first.
	replace := strings.NewReplacer(append(rig.replace[:len(rig.replace):len(rig.replace)], "/run/den/den.sock", socket, "/var/lib/den", d.dataDir, "127.0.0.1:7070", addr)...)
	marker := filepath.Join(t.TempDir(), "block")
	transcript := filepath.Join(t.TempDir(), "live")
	defer func() {
		if live, err := os.ReadFile(transcript); err == nil {
			t.Logf("the live blocks' runs:\n%s", live)
		}
	}()
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for _, b := range blocks {
		fmt.Fprintf(&script, "echo %q > %q\n", fmt.Sprintf("%s:%d", b.File, b.Line), marker)
		if b.Live() {
			script.WriteString(liveBlockCommand(t, b, replace, transcript))
			continue
		}
		script.WriteString(b.Script(replace))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(docsEnv(socket), rig.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		at, _ := os.ReadFile(marker)
		t.Fatalf("the block at %s failed (%v); it printed:\n%s", strings.TrimSpace(string(at)), err, tail(out.String(), 4000))
	}
}

// docsEnv is the test's environment with den on PATH and dend's socket,
// and none of this machine's own den settings.
func docsEnv(socket string) []string {
	env := []string{"PATH=" + binDir + ":" + os.Getenv("PATH"), "DEN_SOCKET=" + socket}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEN_") && !strings.HasPrefix(kv, "E2B_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// clearDocState removes what one file's commands made that another's
// could trip on: sandboxes, secrets, tokens and owners' quotas.
func (d *dend) clearDocState(t *testing.T) {
	ctx := ctxT(t, 5*time.Minute)
	sbs, err := d.c.ListSandboxes(ctx)
	if err != nil {
		t.Fatalf("listing sandboxes: %v", err)
	}
	for _, sb := range sbs {
		if err := d.c.RemoveSandbox(ctx, sb.ID, true); err != nil {
			t.Errorf("removing sandbox %s: %v", sb.Name, err)
		}
	}
	secrets, err := d.c.ListSecrets(ctx)
	if err != nil {
		t.Fatalf("listing secrets: %v", err)
	}
	for _, s := range secrets {
		if err := d.c.RemoveSecret(ctx, s.Name); err != nil {
			t.Errorf("removing secret %s: %v", s.Name, err)
		}
	}
	owners, err := d.c.ListOwners(ctx)
	if err != nil {
		t.Fatalf("listing owners: %v", err)
	}
	for _, o := range owners {
		if !o.Default {
			if err := d.c.ResetOwner(ctx, o.ID); err != nil {
				t.Errorf("resetting owner %s: %v", o.ID, err)
			}
		}
	}
	tokens, err := d.c.ListTokens(ctx)
	if err != nil {
		t.Fatalf("listing tokens: %v", err)
	}
	for _, tk := range tokens {
		if tk.RevokedAt == nil {
			if err := d.c.RevokeToken(ctx, tk.ID); err != nil {
				t.Errorf("revoking token %s: %v", tk.Name, err)
			}
		}
	}
}

// freeLoopbackAddr is a TCP address on loopback nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
