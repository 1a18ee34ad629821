package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/inproc"
	denns "github.com/den-dev/den/internal/netns"
)

// raw sends a request straight to dend's socket, as a hand-written client
// would, with headers (pairs), and returns the status and decoded error.
func raw(t *testing.T, d *dend, method, path, body string, header ...string) (int, api.Error) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	req, _ := http.NewRequest(method, "http://den"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &eb)
	if eb.Error == nil {
		eb.Error = &api.Error{}
	}
	return resp.StatusCode, *eb.Error
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	d.create("ok")
	ctx := ctxT(t, 2*time.Minute)
	labels := func(n int) string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf(`"k%d":"v"`, i))
		}
		return "{" + strings.Join(kv, ",") + "}"
	}

	cases := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   string
		says   string // in the message or hint, when set
	}{
		{"unknown sandbox", "GET", "/v1/sandboxes/nope", "", 404, api.CodeNotFound, ""},
		{"unknown image", "POST", "/v1/sandboxes", `{"name":"x1","image":"nope"}`, 404, api.CodeNotFound, ""},
		{"duplicate name", "POST", "/v1/sandboxes", `{"name":"ok","image":"busybox"}`, 409, api.CodeConflict, ""},
		{"invalid name", "POST", "/v1/sandboxes", `{"name":"Bad_Name!","image":"busybox"}`, 400, api.CodeInvalid, ""},
		{"bad memory", "POST", "/v1/sandboxes", `{"name":"x2","image":"busybox","memory":"lots"}`, 400, api.CodeInvalid, ""},
		{"tiny memory", "POST", "/v1/sandboxes", `{"name":"x3","image":"busybox","memory":"1M"}`, 400, api.CodeInvalid, ""},
		{"negative cpus", "POST", "/v1/sandboxes", `{"name":"x4","image":"busybox","cpus":-1}`, 400, api.CodeInvalid, ""},
		{"malformed json", "POST", "/v1/sandboxes", `{"name":`, 400, api.CodeInvalid, ""},
		{"unknown field", "POST", "/v1/sandboxes", `{"name":"x5","colour":"red"}`, 400, api.CodeInvalid, ""},
		{"oversized body", "POST", "/v1/sandboxes", `{"name":"x6","labels":{"a":"` + strings.Repeat("a", 2<<20) + `"}}`, 413, api.CodeTooLarge, ""},
		{"dotdot path", "GET", "/v1/sandboxes/ok/files/content?path=/etc/../../etc/passwd", "", 400, api.CodeInvalid, ""},
		{"relative path", "GET", "/v1/sandboxes/ok/files/content?path=etc/passwd", "", 400, api.CodeInvalid, ""},
		{"empty exec", "POST", "/v1/sandboxes/ok/exec", `{"argv":[]}`, 400, api.CodeInvalid, ""},
		{"unknown run", "GET", "/v1/sandboxes/ok/runs/nope", "", 404, api.CodeNotFound, ""},
		{"bad log stream", "GET", "/v1/sandboxes/ok/runs/nope/logs?stream=both", "", 400, api.CodeInvalid, ""},
		{"a thousandth of a cpu", "POST", "/v1/sandboxes", `{"name":"x7","image":"busybox","cpus":0.001}`, 400, api.CodeInvalid, "from 0.01"},
		{"limits to a thousandth of a cpu", "PATCH", "/v1/sandboxes/ok/limits", `{"cpus":0.001}`, 400, api.CodeInvalid, "from 0.01"},
		{"pause after 1ns", "POST", "/v1/sandboxes", `{"name":"x8","image":"busybox","policy":{"pause_after":"1ns"}}`, 400, api.CodeInvalid, "--min-ttl"},
		{"policy hibernate after 1ns", "PATCH", "/v1/sandboxes/ok/policy", `{"hibernate_after":"1ns"}`, 400, api.CodeInvalid, "--min-ttl"},
		{"3000 labels", "POST", "/v1/sandboxes", `{"name":"x9","image":"busybox","labels":` + labels(3000) + `}`, 400, api.CodeInvalid, "more than the 64"},
		{"a label with an escape", "POST", "/v1/sandboxes", `{"name":"x10","image":"busybox","labels":{"k":"\u001b[2J"}}`, 400, api.CodeInvalid, "printable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, e := raw(t, d, tc.method, tc.path, tc.body)
			if status != tc.status || e.Code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", status, e.Code, e.Message, tc.status, tc.code)
			}
			if !strings.Contains(e.Message+" "+e.Hint, tc.says) {
				t.Fatalf("%q (hint %q) does not say %q", e.Message, e.Hint, tc.says)
			}
			if e.Message == "" {
				t.Fatalf("no message in the error")
			}
			if strings.Contains(e.Message, d.dataDir) {
				t.Fatalf("message leaks a host path: %s", e.Message)
			}
		})
	}

	// E2B's metadata are den's labels, bounded the same, refused in
	// E2B's error shape.
	t.Run("e2b metadata", func(t *testing.T) {
		key := strings.TrimSpace(d.mustDen("", "token", "create", "e2b", "--scope", "owner"))
		var e struct {
			Code    int
			Message string
		}
		status := e2bCall(t, "http://"+addr, "POST", "/v2/sandboxes", key, `{"templateID":"busybox","metadata":`+labels(65)+`}`, &e)
		if status != http.StatusBadRequest || e.Code != http.StatusBadRequest || !strings.Contains(e.Message, "more than the 64") {
			t.Fatalf("65 metadata keys: %d %+v, want 400 saying the bound", status, e)
		}
	})

	// The floor a door sends in process (E2B's timeouts) is dropped from
	// a caller's request: only dend's own doors lower --min-ttl.
	t.Run("timeout floor from a caller", func(t *testing.T) {
		status, e := raw(t, d, "PATCH", "/v1/sandboxes/ok/policy", `{"ttl":"2s"}`, inproc.TimeoutFloorHeader, "1s")
		if status != http.StatusBadRequest || !strings.Contains(e.Hint, "--min-ttl") {
			t.Fatalf("a ttl of 2s with the door's header: %d %+v, want 400 naming --min-ttl", status, e)
		}
	})

	t.Run("illegal state", func(t *testing.T) {
		d.create("idle")
		if _, err := d.c.StopSandbox(ctx, "idle"); err != nil {
			t.Fatal(err)
		}
		_, err := d.c.Exec(ctx, "idle", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
		if !client.IsConflict(err) || client.Hint(err) == "" {
			t.Fatalf("exec on stopped: %v, want a conflict with a hint", err)
		}
	})

	// Nothing was created by any of the refused requests.
	list, err := d.c.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sb := range list {
		names = append(names, sb.Name)
	}
	if got := strings.Join(names, ","); got != "ok,idle" {
		t.Fatalf("sandboxes after bad input: %s", got)
	}
}

// A create that fails in the engine leaves no volume, namespace, instance
// or record behind.
func TestFailedCreateLeavesNothing(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 2*time.Minute)
	// The engine mounts proc at /proc: a file there makes boot fail.
	broken := dockerSave(t, []string{"PATH=/bin"}, "/", busyboxLayer(t, entry{name: "proc", body: "in the way\n"}))
	if _, err := d.c.ImportImage(ctx, "broken", bytes.NewReader(broken), nil); err != nil {
		t.Fatal(err)
	}
	nsBefore := d.namespaces()
	_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "doomed", Image: "broken"})
	if err == nil {
		t.Fatalf("create on a broken image succeeded")
	}
	if _, err := d.c.GetSandbox(ctx, "doomed"); !client.IsNotFound(err) {
		t.Fatalf("record left after failed create: %v", err)
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("instances left: %v", got)
	}
	if vols := d.sandboxVolumes(); len(vols) != 0 {
		t.Fatalf("volumes left: %v", vols)
	}
	if after := d.namespaces(); after != nsBefore {
		t.Fatalf("namespaces before %q, after %q", nsBefore, after)
	}
	// The name is usable.
	d.create("doomed")
}

func (d *dend) namespaces() string {
	return strings.Join(d.namespacePaths(), ",")
}

// namespacePaths lists this dend's namespaces: in its run directory, and
// any in /run/netns, where older dends kept them. They are named for
// its range: others' (another test's dend still tearing down, a dend
// outside the tests) are not its business.
func (d *dend) namespacePaths() []string {
	p := netip.MustParsePrefix(d.subnet)
	var paths []string
	for _, dir := range []string{denns.Dir(d.runDir), "/run/netns"} {
		own := strings.TrimSuffix(filepath.Base(denns.Path(dir, p, "x")), "x")
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), own) {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
	}
	return paths
}
