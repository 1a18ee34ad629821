// Command extract prints the ```sh {vm: NAME} block of a docs file as a
// script runs it, for the VM scripts (scripts/hostvm-*.sh) to run on a
// host with systemd:
//
//	go run ./integration/docblock/extract [-r OLD=NEW]... FILE NAME
//
// Each -r replaces OLD with NEW in the block (a release's file name for
// the docs' example one); a command written `! command` fails the script
// when it succeeds, as in TestDocsCommands.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/den-dev/den/integration/docblock"
)

// replacements is the repeatable -r OLD=NEW flag.
type replacements []string

func (r *replacements) String() string { return strings.Join(*r, " ") }

func (r *replacements) Set(v string) error {
	old, new, ok := strings.Cut(v, "=")
	if !ok || old == "" {
		return fmt.Errorf("want OLD=NEW, got %q", v)
	}
	*r = append(*r, old, new)
	return nil
}

func main() {
	var r replacements
	flag.Var(&r, "r", "replace `OLD=NEW` in the block (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: extract [-r OLD=NEW]... FILE NAME\n\nprints the ```sh {vm: NAME} block of the markdown FILE as a script")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	script, err := extract(flag.Arg(0), flag.Arg(1), r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	fmt.Print(script)
}

func extract(file, name string, r replacements) (string, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the docs: %w", err)
	}
	blocks, err := docblock.Parse(file, string(text))
	if err != nil {
		return "", err
	}
	b, err := docblock.Find(blocks, name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return fmt.Sprintf("# %s:%d {vm: %s}\n%s", file, b.Line, name, b.Script(strings.NewReplacer(r...))), nil
}
