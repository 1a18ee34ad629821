package integration

import (
	"bytes"
	"context"
	"encoding/json"
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
	denns "github.com/den-dev/den/internal/netns"
)

// raw sends a request straight to dend's socket, as a hand-written client
// would, and returns the status and decoded error.
func raw(t *testing.T, d *dend, method, path, body string) (int, api.Error) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	req, _ := http.NewRequest(method, "http://den"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
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
	d := startDend(t)
	d.create("ok")
	ctx := ctxT(t, 2*time.Minute)

	cases := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   string
	}{
		{"unknown sandbox", "GET", "/v1/sandboxes/nope", "", 404, api.CodeNotFound},
		{"unknown image", "POST", "/v1/sandboxes", `{"name":"x1","image":"nope"}`, 404, api.CodeNotFound},
		{"duplicate name", "POST", "/v1/sandboxes", `{"name":"ok","image":"busybox"}`, 409, api.CodeConflict},
		{"invalid name", "POST", "/v1/sandboxes", `{"name":"Bad_Name!","image":"busybox"}`, 400, api.CodeInvalid},
		{"bad memory", "POST", "/v1/sandboxes", `{"name":"x2","image":"busybox","memory":"lots"}`, 400, api.CodeInvalid},
		{"tiny memory", "POST", "/v1/sandboxes", `{"name":"x3","image":"busybox","memory":"1M"}`, 400, api.CodeInvalid},
		{"negative cpus", "POST", "/v1/sandboxes", `{"name":"x4","image":"busybox","cpus":-1}`, 400, api.CodeInvalid},
		{"malformed json", "POST", "/v1/sandboxes", `{"name":`, 400, api.CodeInvalid},
		{"unknown field", "POST", "/v1/sandboxes", `{"name":"x5","colour":"red"}`, 400, api.CodeInvalid},
		{"oversized body", "POST", "/v1/sandboxes", `{"name":"x6","labels":{"a":"` + strings.Repeat("a", 2<<20) + `"}}`, 413, api.CodeTooLarge},
		{"dotdot path", "GET", "/v1/sandboxes/ok/files/content?path=/etc/../../etc/passwd", "", 400, api.CodeInvalid},
		{"relative path", "GET", "/v1/sandboxes/ok/files/content?path=etc/passwd", "", 400, api.CodeInvalid},
		{"empty exec", "POST", "/v1/sandboxes/ok/exec", `{"argv":[]}`, 400, api.CodeInvalid},
		{"unknown run", "GET", "/v1/sandboxes/ok/runs/nope", "", 404, api.CodeNotFound},
		{"bad log stream", "GET", "/v1/sandboxes/ok/runs/nope/logs?stream=both", "", 400, api.CodeInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, e := raw(t, d, tc.method, tc.path, tc.body)
			if status != tc.status || e.Code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", status, e.Code, e.Message, tc.status, tc.code)
			}
			if e.Message == "" {
				t.Fatalf("no message in the error")
			}
			if strings.Contains(e.Message, d.dataDir) {
				t.Fatalf("message leaks a host path: %s", e.Message)
			}
		})
	}

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
	// This dend's namespaces are named for its range: others' (another
	// test's dend still tearing down, a dend outside the tests) are not
	// its business.
	own := strings.TrimSuffix(filepath.Base(denns.Path(netip.MustParsePrefix(d.subnet), "x")), "x")
	entries, _ := os.ReadDir("/run/netns")
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), own) {
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, ",")
}
