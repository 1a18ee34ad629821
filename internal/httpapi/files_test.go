package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// TestFilePathsCheckedFirst: a bad path is refused before the sandbox's
// file system is even asked for.
func TestFilePathsCheckedFirst(t *testing.T) {
	bad := []string{"../etc/passwd", "/a/../../b", "rel/path", "/a\x00b", "/..", ""}
	routes := []struct{ method, path string }{
		{"GET", "/v1/sandboxes/alpha/files/stat"},
		{"GET", "/v1/sandboxes/alpha/files/list"},
		{"GET", "/v1/sandboxes/alpha/files/content"},
		{"PUT", "/v1/sandboxes/alpha/files/content"},
		{"DELETE", "/v1/sandboxes/alpha/files"},
		{"GET", "/v1/sandboxes/alpha/files/archive"},
		{"PUT", "/v1/sandboxes/alpha/files/archive"},
	}
	for _, rt := range routes {
		for _, p := range bad {
			t.Run(rt.method+" "+rt.path+" "+p, func(t *testing.T) {
				e := newEnv(t)
				resp, body := e.do(rt.method, rt.path+"?path="+url.QueryEscape(p), strings.NewReader("data"))
				got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
				if got.Hint == "" && !strings.Contains(got.Message, "NUL") {
					t.Errorf("no hint: %+v", got)
				}
				e.noCalls()
			})
		}
	}
	for _, p := range bad {
		for _, tt := range []struct{ path, body string }{
			{"/v1/sandboxes/alpha/files/mkdir", `{"path":` + jsonString(p) + `}`},
			{"/v1/sandboxes/alpha/files/move", `{"from":` + jsonString(p) + `,"to":"/ok"}`},
			{"/v1/sandboxes/alpha/files/move", `{"from":"/ok","to":` + jsonString(p) + `}`},
		} {
			t.Run("POST "+tt.body, func(t *testing.T) {
				e := newEnv(t)
				resp, body := e.do("POST", tt.path, strings.NewReader(tt.body))
				assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
				e.noCalls()
			})
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestRemoveRootRefused(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("DELETE", "/v1/sandboxes/alpha/files?path=//&recursive=true", nil)
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}

func TestFileRoutes(t *testing.T) {
	e := newEnv(t)
	e.sbx.files.content = "hello"

	var fi api.FileInfo
	_, body := e.do("GET", "/v1/sandboxes/alpha/files/stat?path=/root//a.txt", nil)
	if err := json.Unmarshal(body, &fi); err != nil || fi.Path != "/root/a.txt" || fi.Size != 5 || fi.Mode != 0o644 || fi.Type != "file" {
		t.Errorf("stat: %s", body)
	}

	var list api.FileList
	_, body = e.do("GET", "/v1/sandboxes/alpha/files/list?path=/root", nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Files) != 1 || list.Files[0].Name != "a.txt" {
		t.Errorf("list: %s", body)
	}

	resp, body := e.do("GET", "/v1/sandboxes/alpha/files/content?path=/root/a.txt", nil)
	if string(body) != "hello" || resp.ContentLength != 5 {
		t.Errorf("read: %q, length %d", body, resp.ContentLength)
	}

	resp, _ = e.do("PUT", "/v1/sandboxes/alpha/files/content?path=/root/b.txt&mode=600", strings.NewReader("new bytes"))
	if resp.StatusCode != http.StatusNoContent || e.sbx.files.written != "new bytes" {
		t.Errorf("write: %d, wrote %q", resp.StatusCode, e.sbx.files.written)
	}
	resp, _ = e.do("PUT", "/v1/sandboxes/alpha/files/content?path=/root/c.txt", strings.NewReader(""))
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("write empty: %d", resp.StatusCode)
	}

	resp, _ = e.do("POST", "/v1/sandboxes/alpha/files/mkdir", strings.NewReader(`{"path":"/root/d/e","parents":true}`))
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("mkdir: %d", resp.StatusCode)
	}
	resp, _ = e.do("POST", "/v1/sandboxes/alpha/files/move", strings.NewReader(`{"from":"/root/a.txt","to":"/tmp/"}`))
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("move: %d", resp.StatusCode)
	}
	resp, _ = e.do("DELETE", "/v1/sandboxes/alpha/files?path=/root/d&recursive=true", nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("remove: %d", resp.StatusCode)
	}

	resp, body = e.do("GET", "/v1/sandboxes/alpha/files/archive?path=/root", nil)
	if string(body) != "tar:hello" || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Errorf("read archive: %q %q", body, resp.Header.Get("Content-Type"))
	}
	resp, _ = e.do("PUT", "/v1/sandboxes/alpha/files/archive?path=/srv/app", strings.NewReader("TAR"))
	if resp.StatusCode != http.StatusNoContent || e.sbx.files.written != "TAR" {
		t.Errorf("write archive: %d, wrote %q", resp.StatusCode, e.sbx.files.written)
	}

	want := []string{
		"Files.Stat[/root/a.txt]",
		"Files.ReadDir[/root]",
		"Files.ReadFile[/root/a.txt]",
		"Files.WriteFile[/root/b.txt 384]",
		"Files.WriteFile[/root/c.txt 420]",
		"Files.Mkdir[/root/d/e true 493]",
		"Files.Move[/root/a.txt /tmp]",
		"Files.Remove[/root/d true]",
		"Files.ReadTar[/root]",
		"Files.WriteTar[/srv/app]",
	}
	var got []string
	for _, c := range e.calls.all() {
		if strings.HasPrefix(c.Method, "Files.") {
			got = append(got, c.String())
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("file calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFilesOfAStoppedSandbox(t *testing.T) {
	e := newEnv(t)
	e.sbx.err = errConflictStopped
	resp, body := e.do("GET", "/v1/sandboxes/alpha/files/list?path=/", nil)
	if got := assertError(t, resp, body, http.StatusConflict, api.CodeConflict); got.Hint == "" {
		t.Error("no hint")
	}
}

var errConflictStopped = errdefs.WithHint(errdefs.Conflict("sandbox %q is stopped", "alpha"), "start it first with `den start NAME`")

func TestMkdirBadMode(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/files/mkdir", strings.NewReader(`{"path":"/a","mode":70000}`))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
	e.noCalls()
}

// A write or mkdir may name the user who owns what it makes, and a write
// may make its directory.
func TestFilesForUser(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("PUT", "/v1/sandboxes/alpha/files/content?path=/home/u/a/f&user=u&parents=true", strings.NewReader("x"))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("POST", "/v1/sandboxes/alpha/files/mkdir", strings.NewReader(`{"path":"/home/u/d","parents":true,"user":"u:g"}`))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("mkdir: %d %s", resp.StatusCode, body)
	}
	var got []string
	for _, c := range e.calls.all() {
		got = append(got, c.String())
	}
	for _, want := range []string{"Files.WriteFile[/home/u/a/f 420 u true]", "Files.Mkdir[/home/u/d true 493 u:g]"} {
		if !slices.Contains(got, want) {
			t.Errorf("calls %v lack %s", got, want)
		}
	}
	resp, body = e.do("PUT", "/v1/sandboxes/alpha/files/content?path=/f&parents=sure", strings.NewReader("x"))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
}

// ?as= makes every file call as that user; a bad one is refused before
// the sandbox's file system is asked for.
func TestFilesAsUser(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes/alpha/files/stat?path=/a&as=user", ""},
		{"GET", "/v1/sandboxes/alpha/files/list?path=/a&as=user", ""},
		{"GET", "/v1/sandboxes/alpha/files/content?path=/a&as=user", ""},
		{"PUT", "/v1/sandboxes/alpha/files/content?path=/a&as=user", "x"},
		{"POST", "/v1/sandboxes/alpha/files/mkdir?as=user", `{"path":"/d"}`},
		{"POST", "/v1/sandboxes/alpha/files/move?as=user", `{"from":"/a","to":"/b"}`},
		{"DELETE", "/v1/sandboxes/alpha/files?path=/a&as=user", ""},
		{"GET", "/v1/sandboxes/alpha/files/archive?path=/a&as=user", ""},
		{"PUT", "/v1/sandboxes/alpha/files/archive?path=/a&as=user", ""},
		{"GET", "/v1/sandboxes/alpha/files/watch?path=/a&as=user", ""},
		{"GET", "/v1/sandboxes/alpha/files/stat?path=/a", ""},
	} {
		if resp, body := e.do(c.method, c.path, strings.NewReader(c.body)); resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	want := slices.Repeat([]string{"user"}, 10)
	if got := e.sbx.files.acting; !slices.Equal(got, append(want, "")) {
		t.Errorf("the calls were made as %q, want user for each but the last, root", got)
	}

	for _, as := range []string{"a/b", "a\x00b", strings.Repeat("u", 300)} {
		e := newEnv(t)
		resp, body := e.do("GET", "/v1/sandboxes/alpha/files/stat?path=/a&as="+url.QueryEscape(as), nil)
		if got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid); got.Hint == "" {
			t.Errorf("as=%.20q: no hint: %+v", as, got)
		}
		e.noCalls()
	}
}

// A watch streams its events once in place; one that stops for a reason
// ends with a line saying why.
func TestWatchFiles(t *testing.T) {
	e := newEnv(t)
	e.sbx.files.watch = []guest.WatchEvent{{Name: "a.txt", Op: "create"}, {Name: "a.txt", Op: "write"}}
	resp, body := e.do("GET", "/v1/sandboxes/alpha/files/watch?path=/root&recursive=true", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" ||
		string(body) != `{"name":"a.txt","op":"create"}`+"\n"+`{"name":"a.txt","op":"write"}`+"\n" {
		t.Errorf("watch: %d %q", resp.StatusCode, body)
	}
	if got := e.calls.find("Files.Watch"); len(got) != 1 || got[0].Args[0] != "/root" || got[0].Args[1] != true {
		t.Errorf("calls %v", got)
	}
	e.sbx.files.watchErr = errConflictStopped
	_, body = e.do("GET", "/v1/sandboxes/alpha/files/watch?path=/root", nil)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var last api.WatchEvent
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Error == nil || last.Error.Code != api.CodeConflict {
		t.Errorf("a watch that stopped: %q", body)
	}
	e.sbx.files.err = errdefs.NotFound("no such directory")
	resp, body = e.do("GET", "/v1/sandboxes/alpha/files/watch?path=/nope", nil)
	assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)
}
