package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateMan writes den's man pages: den(1) with the global flags,
// and a page for every visible command, none for the hidden generator.
func TestGenerateMan(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runDen(t, "", "generate-man", dir)
	if code != 0 {
		t.Fatalf("den generate-man: exit %d: %s", code, stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "den.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".TH \"DEN\" \"1\"", `\fB--socket\fP`, `\fB--host\fP`, `\fBden-create(1)\fP`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("den.1 lacks %q", want)
		}
	}
	a := &app{&cli.App{}}
	for _, c := range a.rootCommand().Commands() {
		name := filepath.Join(dir, "den-"+c.Name()+".1")
		_, err := os.Stat(name)
		switch {
		case c.Hidden || c.Name() == "help":
			if err == nil {
				t.Errorf("a page for the hidden command %s", c.Name())
			}
		case err != nil:
			t.Errorf("no page for den %s: %v", c.Name(), err)
		}
	}
	if code, _, _ := runDen(t, "", "generate-man"); code != 2 {
		t.Errorf("den generate-man with no directory: exit %d, want 2", code)
	}
}
