package docblock

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := "intro\n```sh\nden ls\n```\n```sh {no-test: needs systemd}\nsystemctl restart dend\n```\n" +
		"````\n```sh {not a block}\n````\n```go\nx := 1\n```\n```\noutput\n```\n```sh\n```\n" +
		"```sh {vm: install}\nmake install\n```\n" +
		"```sh {tty: \"echo $((6*7)); exit\", shows: \"42\"}\nden shell web\n```\n" +
		"```sh {tty: \"s3cret\", shows: \"not shown\", hides: \"s3cret\"}\nden secret set X\n```\n" +
		"```sh {until: \"web\", meanwhile: \"den exec web -- true\"}\nden events -f\n```\n"
	blocks, err := Parse("x.md", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "x.md", Line: 2, Text: "den ls\n"},
		{File: "x.md", Line: 5, Skip: "needs systemd", Text: "systemctl restart dend\n"},
		{File: "x.md", Line: 17, Text: "\n"},
		{File: "x.md", Line: 19, VM: "install", Text: "make install\n"},
		{File: "x.md", Line: 22, TTY: true, Input: "echo $((6*7)); exit", Shows: "42", Text: "den shell web\n"},
		{File: "x.md", Line: 25, TTY: true, Input: "s3cret", Shows: "not shown", Hides: "s3cret", Text: "den secret set X\n"},
		{File: "x.md", Line: 28, Until: "web", Meanwhile: "den exec web -- true", Text: "den events -f\n"},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks:\n%v\nwant\n%v", blocks, want)
	}
	for _, bad := range []string{
		"```sh {no-test}\nx\n```\n", "```sh {no-test: }\nx\n```\n", "```sh skip\nx\n```\n", "```sh\nx\n",
		"```sh {vm: a, tty: \"x\", shows: \"y\"}\nx\n```\n", // vm takes nothing else
		"```sh {tty: \"x\"}\nx\n```\n",                      // what would a user see?
		"```sh {shows: \"x\"}\nx\n```\n",                    // shows without a terminal
		"```sh {until: \"x}\nx\n```\n",                      // an unclosed string
		"```sh {until: \"x\" meanwhile: \"y\"}\nx\n```\n",   // no comma
		"```sh {until: \"x\", until: \"y\"}\nx\n```\n",
		"```sh {color: red}\nx\n```\n",
		"```sh {}\nx\n```\n",
	} {
		if _, err := Parse("bad.md", bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestMustFail(t *testing.T) {
	script := "a\n! b # fails\n! c \\\n  d\n"
	if got, want := MustFail(script), "a\nif b # fails\nthen echo 'this command should have failed, and did not' >&2; exit 1; fi\n"+
		"if c \\\n  d\nthen echo 'this command should have failed, and did not' >&2; exit 1; fi\n"; got != want {
		t.Errorf("MustFail(%q) =\n%s\nwant\n%s", script, got, want)
	}
}

func TestCommands(t *testing.T) {
	got := Commands("den events -f   # follow\n\n# a comment\nden events \\\n  --json\n")
	want := []string{"den events -f   # follow", "den events \\\n  --json"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("Commands = %q, want %q", got, want)
	}
}

// Every ```sh {vm: NAME} block of the docs is extracted by a VM script,
// so none is marked as run in the VM and then never run; and every
// extraction the scripts do names a block that is there.
func TestVMBlocksAreRun(t *testing.T) {
	root := filepath.Join("..", "..")
	scripts, err := filepath.Glob(filepath.Join(root, "scripts", "hostvm-*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts/hostvm-*.sh: %v", err)
	}
	var all strings.Builder
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	// run_docblock [-r OLD=NEW]... FILE NAME, as the scripts run a block.
	calls := regexp.MustCompile(`run_docblock (?:-r (?:'[^']*'|"[^"]*"|\S+) )*(\S+\.md) ([a-z0-9-]+)`).FindAllStringSubmatch(all.String(), -1)
	extracted := map[string]bool{}
	for _, c := range calls {
		extracted[c[1]+" "+c[2]] = true
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	vm := 0
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		blocks, err := Parse(name, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.VM == "" {
				continue
			}
			vm++
			if !extracted[name+" "+b.VM] {
				t.Errorf("%s:%d {vm: %s} is run by no scripts/hostvm-*.sh (want `run_docblock %s %s` in one)", name, b.Line, b.VM, name, b.VM)
			}
			delete(extracted, name+" "+b.VM)
		}
	}
	for c := range extracted {
		t.Errorf("a VM script extracts %s, which no docs block is", c)
	}
	t.Logf("%d blocks run in the VM", vm)
}
