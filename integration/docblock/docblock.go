// Package docblock reads the ```sh blocks of den's markdown docs: the
// commands TestDocsCommands runs against a real dend, and the ones the
// VM scripts (scripts/hostvm-*.sh) run on a host with systemd, printed
// by ./extract.
//
// A block's info string says how it runs:
//
//	```sh                          runs as written, in the file's one bash
//	```sh {no-test: REASON}        is not run, for REASON
//	```sh {vm: NAME}               runs in the VM, by the script that
//	                               extracts NAME (a host with systemd)
//	```sh {tty: "INPUT", shows: "TEXT", hides: "TEXT"}
//	                               runs on a terminal; once it has printed
//	                               and gone quiet, INPUT is typed and Enter
//	                               pressed; what it printed must hold
//	                               shows and not hides
//	```sh {until: "TEXT", meanwhile: "CMD"}
//	                               each command line runs until stopped:
//	                               the test starts them, runs CMD, waits
//	                               until each printed TEXT, then stops
//	                               them as Ctrl-C does
package docblock

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Block is one fenced ```sh block of a markdown file.
type Block struct {
	File string
	Line int    // of the opening fence, from 1
	Skip string // the reason given with no-test, or "" for a block that runs
	VM   string // the name the VM scripts extract it by, or ""
	// On a terminal: Input is typed once the block has printed and gone
	// quiet; its output must hold Shows and not Hides.
	TTY                 bool
	Input, Shows, Hides string
	// Never ending: Until is what each command line must print while
	// Meanwhile runs; then they are stopped.
	Until, Meanwhile string
	Text             string
}

// Live reports whether the block runs apart from the file's bash: on a
// terminal, or until stopped.
func (b Block) Live() bool { return b.TTY || b.Until != "" || b.Meanwhile != "" }

// noTest is the info string that keeps a ```sh block out of the run:
// ```sh {no-test: REASON}, with a reason (docs/README.md says which).
var noTest = regexp.MustCompile(`^\{no-test: *(\S.*?) *\}$`)

// Parse returns the ```sh blocks of a markdown text in order. A sh block
// whose info string is not one of those the package comment lists is an
// error: every block either runs or says why not.
func Parse(file, text string) ([]Block, error) {
	var blocks []Block
	var open *Block // the sh block being read
	fence := ""     // the backticks of the fence we are inside, "" outside
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
			b := Block{File: file, Line: n}
			if err := b.setInfo(strings.TrimSpace(rest)); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, n, err)
			}
			open, body = &b, nil
		case fence != "" && ticks >= len(fence) && strings.TrimSpace(line[ticks:]) == "":
			if open != nil {
				open.Text = strings.Join(body, "\n") + "\n"
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

const infoHelp = `want nothing (it runs), {no-test: REASON}, {vm: NAME}, {tty: "INPUT", shows: "TEXT"} or {until: "TEXT", meanwhile: "CMD"}`

// setInfo sets what the info string after "sh" says.
func (b *Block) setInfo(info string) error {
	if info == "" {
		return nil
	}
	if m := noTest.FindStringSubmatch(info); m != nil {
		b.Skip = m[1]
		return nil
	}
	attrs, err := attributes(info)
	if err != nil {
		return fmt.Errorf("a ```sh block's info string is %q: %w; %s", info, err, infoHelp)
	}
	for k, v := range attrs {
		switch k {
		case "vm":
			b.VM = v
		case "tty":
			b.TTY, b.Input = true, v
		case "shows":
			b.Shows = v
		case "hides":
			b.Hides = v
		case "until":
			b.Until = v
		case "meanwhile":
			b.Meanwhile = v
		default:
			return fmt.Errorf("a ```sh block's info string names %q; %s", k, infoHelp)
		}
	}
	switch {
	case b.VM != "" && len(attrs) != 1:
		return fmt.Errorf("a {vm: NAME} block takes nothing else: %q", info)
	case b.TTY && (b.Shows == "" || b.Until != "" || b.Meanwhile != ""):
		return fmt.Errorf("a {tty: INPUT} block needs shows (what a user sees), and no until: %q", info)
	case !b.TTY && (b.Shows != "" || b.Hides != ""):
		return fmt.Errorf("shows and hides go with tty: %q", info)
	case !b.TTY && b.VM == "" && b.Until == "" && b.Meanwhile == "":
		return fmt.Errorf("%q says nothing; %s", info, infoHelp)
	}
	return nil
}

// attributes reads {key: "value", key: "value"}: each value a Go string
// literal, or a bare word without spaces for vm.
func attributes(info string) (map[string]string, error) {
	if !strings.HasPrefix(info, "{") || !strings.HasSuffix(info, "}") {
		return nil, fmt.Errorf("not in braces")
	}
	rest := strings.TrimSpace(info[1 : len(info)-1])
	attrs := map[string]string{}
	for rest != "" {
		key, after, ok := strings.Cut(rest, ":")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " ,\"") {
			return nil, fmt.Errorf("want key: value at %q", rest)
		}
		after = strings.TrimSpace(after)
		var value string
		if strings.HasPrefix(after, `"`) {
			lit, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, fmt.Errorf("the value of %s is not a closed \"string\": %q", key, after)
			}
			value, _ = strconv.Unquote(lit)
			after = after[len(lit):]
		} else {
			end := strings.IndexAny(after, ", ")
			if end < 0 {
				end = len(after)
			}
			value, after = after[:end], after[end:]
		}
		if value == "" {
			return nil, fmt.Errorf("%s has no value", key)
		}
		if _, dup := attrs[key]; dup {
			return nil, fmt.Errorf("%s given twice", key)
		}
		attrs[key] = value
		after = strings.TrimSpace(after)
		if after != "" && !strings.HasPrefix(after, ",") {
			return nil, fmt.Errorf("want a comma before %q", after)
		}
		rest = strings.TrimSpace(strings.TrimPrefix(after, ","))
	}
	return attrs, nil
}

// Script is the block's text as a script runs it: with replace's
// substitutions (the test's servers for the docs' host names and
// paths), and each command written `! command` (shown to fail) made to
// fail the script when it succeeds.
func (b Block) Script(replace *strings.Replacer) string {
	text := b.Text
	if replace != nil {
		text = replace.Replace(text)
	}
	return MustFail(text)
}

// MustFail makes each command of text written `! command` (shown to
// fail) fail the script when it succeeds: set -e ignores a command whose
// status ! inverts. A command may go on over lines ending in \ and end
// in a comment.
func MustFail(text string) string {
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

// Commands splits a block's text into its command lines: a line ending
// in \ goes on to the next; blank lines and comment lines are dropped.
func Commands(text string) []string {
	var cmds []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		cur += line
		if strings.HasSuffix(line, "\\") {
			cur += "\n"
			continue
		}
		if t := strings.TrimSpace(cur); t != "" && !strings.HasPrefix(t, "#") {
			cmds = append(cmds, cur)
		}
		cur = ""
	}
	return cmds
}

// Find returns the block of blocks the VM scripts extract by name.
func Find(blocks []Block, name string) (Block, error) {
	var found []Block
	for _, b := range blocks {
		if b.VM == name {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Block{}, fmt.Errorf("no ```sh {vm: %s} block", name)
	default:
		return Block{}, fmt.Errorf("%d ```sh {vm: %s} blocks, at lines %d and %d: names must be unique in a file", len(found), name, found[0].Line, found[1].Line)
	}
}
