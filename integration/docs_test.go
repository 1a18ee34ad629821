package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docBlock is one fenced ```sh block of a markdown file.
type docBlock struct {
	file string
	line int    // of the opening fence, from 1
	skip string // the reason given with no-test, or "" for a block that runs
	text string
}

// noTest is the one info string that keeps a ```sh block out of the run:
// ```sh {no-test: REASON}, with a reason (docs/README.md says which).
var noTest = regexp.MustCompile(`^\{no-test: *(\S.*?) *\}$`)

// docBlocks returns the ```sh blocks of a markdown text in order. A sh
// block whose info string is neither empty nor a no-test with a reason
// is an error: every block either runs or says why not.
func docBlocks(file, text string) ([]docBlock, error) {
	var blocks []docBlock
	var open *docBlock // the sh block being read
	fence := ""        // the backticks of the fence we are inside, "" outside
	var body []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		ticks := len(line) - len(strings.TrimLeft(line, "`"))
		switch {
		case fence == "" && ticks >= 3:
			fence = line[:ticks]
			info := strings.TrimSpace(line[ticks:])
			lang, rest, _ := strings.Cut(info, " ")
			if lang != "sh" {
				continue
			}
			b := docBlock{file: file, line: n}
			if rest = strings.TrimSpace(rest); rest != "" {
				m := noTest.FindStringSubmatch(rest)
				if m == nil {
					return nil, fmt.Errorf("%s:%d: a ```sh block's info string is %q; want nothing (it runs) or {no-test: REASON}", file, n, rest)
				}
				b.skip = m[1]
			}
			open, body = &b, nil
		case fence != "" && ticks >= len(fence) && strings.TrimSpace(line[ticks:]) == "":
			if open != nil {
				open.text = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *open)
			}
			fence, open = "", nil
		case open != nil:
			body = append(body, line)
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("%s: a fence is never closed", file)
	}
	return blocks, sc.Err()
}

func TestDocBlocks(t *testing.T) {
	text := "intro\n```sh\nden ls\n```\n```sh {no-test: needs systemd}\nsystemctl restart dend\n```\n" +
		"````\n```sh {not a block}\n````\n```go\nx := 1\n```\n```\noutput\n```\n```sh\n```\n"
	blocks, err := docBlocks("x.md", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{file: "x.md", line: 2, text: "den ls\n"},
		{file: "x.md", line: 5, skip: "needs systemd", text: "systemctl restart dend\n"},
		{file: "x.md", line: 17, text: "\n"},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks:\n%v\nwant\n%v", blocks, want)
	}
	script := "a\n! b # fails\n! c \\\n  d\n"
	if got, want := mustFail(script), "a\nif b # fails\nthen echo 'this command should have failed, and did not' >&2; exit 1; fi\n"+
		"if c \\\n  d\nthen echo 'this command should have failed, and did not' >&2; exit 1; fi\n"; got != want {
		t.Errorf("mustFail(%q) =\n%s\nwant\n%s", script, got, want)
	}
	for _, bad := range []string{"```sh {no-test}\nx\n```\n", "```sh {no-test: }\nx\n```\n", "```sh skip\nx\n```\n", "```sh\nx\n"} {
		if _, err := docBlocks("bad.md", bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

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
		blocks []docBlock
	}
	var files []file
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docBlocks(strings.TrimPrefix(f, "../"), string(b))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{strings.TrimPrefix(f, "../"), blocks})
	}

	addr := freeLoopbackAddr(t)
	sshAddr := freeLoopbackAddr(t)
	d := startDend(t, "--listen", addr, "--ssh-listen", sshAddr, "--pool-size", "64G")
	ran, skipped := 0, 0
	for _, f := range files {
		var run []docBlock
		for _, b := range f.blocks {
			if b.skip != "" {
				skipped++
				t.Logf("%s:%d: not run: %s", b.file, b.line, b.skip)
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
	t.Logf("docs: %d blocks run, %d not run (each with its reason above)", ran, skipped)
	if os.Getenv("DEN_DOCS") == "" && skipped >= ran {
		t.Errorf("%d blocks are not run against %d run: the untested ones must stay a minority", skipped, ran)
	}
}

// runDocBlocks runs one file's blocks in order in one bash, with den on
// PATH, in a directory of their own; the docs' default data directory
// and address are this dend's, and so is their socket unless the file's
// rig gives another.
func (d *dend) runDocBlocks(t *testing.T, blocks []docBlock, addr string, rig docRig) {
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
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for _, b := range blocks {
		fmt.Fprintf(&script, "echo %q > %q\n", fmt.Sprintf("%s:%d", b.file, b.line), marker)
		script.WriteString(mustFail(replace.Replace(b.text)))
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

// mustFail makes each command of text written `! command` (shown to
// fail) fail the script when it succeeds: set -e ignores a command whose
// status ! inverts. A command may go on over lines ending in \ and end
// in a comment.
func mustFail(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "! ") {
			continue
		}
		lines[i] = "if " + strings.TrimPrefix(lines[i], "! ")
		for i+1 < len(lines) && strings.HasSuffix(strings.TrimRight(lines[i], "\n"), "\\") {
			i++
		}
		lines[i] = strings.TrimSuffix(lines[i], "\n") + "\nthen echo 'this command should have failed, and did not' >&2; exit 1; fi\n"
	}
	return strings.Join(lines, "")
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
