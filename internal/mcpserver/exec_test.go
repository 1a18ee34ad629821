package mcpserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func TestTailKeepsTheEnd(t *testing.T) {
	tl := newTail(10)
	for _, s := range []string{"line 1\n", "line 2\n", "line 3"} {
		tl.Write([]byte(s))
	}
	if got := tl.String(); got != "e 2\nline 3" {
		t.Errorf("kept %q", got)
	}
	if tl.total() != 20 || !tl.truncated() {
		t.Errorf("total %d, truncated %v", tl.total(), tl.truncated())
	}
	if got := tl.lastLine(); got != "line 3" {
		t.Errorf("last line %q", got)
	}
	small := newTail(100)
	small.Write([]byte("ok\n\xff"))
	if small.truncated() || small.String() != "ok\n\uFFFD" {
		t.Errorf("short output: %q truncated %v", small.String(), small.truncated())
	}
}

func TestToolErrorCarriesTheHint(t *testing.T) {
	err := &client.Error{StatusCode: 404, API: &api.Error{Code: api.CodeNotFound, Message: `no sandbox "x"`, Hint: "list them with sandbox_list"}}
	got := toolError(err).Error()
	if got != "no sandbox \"x\"\nhint: list them with sandbox_list" {
		t.Errorf("tool error %q", got)
	}
	if got := toolError(errors.New("plain")).Error(); strings.Contains(got, "hint") {
		t.Errorf("tool error %q", got)
	}
}
