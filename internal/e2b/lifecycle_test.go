package e2b

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// autoResume is kept on the sandbox as a den label, and checked against
// the action at the timeout before den is asked anything.
func TestAutoResumeCreate(t *testing.T) {
	den := newFakeAPI()
	d := doorOver(t, den, Config{})
	call := func(body string) (int, map[string]any) {
		return controlCall[map[string]any](d, "POST", "/v2/sandboxes", body)
	}
	for _, c := range []struct {
		body string
		want map[string]string
	}{
		{`{"templateID":"base","autoPause":true,"autoResume":{"enabled":true},"metadata":{"k":"v"}}`, map[string]string{"k": "v", labelAutoResume: "true"}},
		{`{"templateID":"base","autoPause":true,"autoResume":{"enabled":false}}`, nil},
		{`{"templateID":"base","autoPause":true}`, nil},
	} {
		status, _ := call(c.body)
		var req api.CreateSandboxRequest
		json.Unmarshal([]byte(den.last("POST /v1/sandboxes").body), &req)
		if status != 201 || !jsonEqual(req.Labels, c.want) {
			t.Errorf("create %s: %d, labels %v, want %v", c.body, status, req.Labels, c.want)
		}
	}
	n := len(den.calls())
	for _, c := range []struct{ body, says string }{
		{`{"autoResume":{"enabled":true}}`, "only be true when onTimeout is 'pause'"},
		{`{"autoPause":false,"autoResume":{"enabled":true}}`, "only be true when onTimeout is 'pause'"},
		{`{"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}}`, "keepMemory: false"},
		{`{"metadata":{"e2b.autoResume":"true"}}`, "den's own"},
	} {
		if status, out := call(c.body); status != 400 || !strings.Contains(out["message"].(string), c.says) {
			t.Errorf("create %s: %d %v, want 400 saying %q", c.body, status, out, c.says)
		}
	}
	if len(den.calls()) != n {
		t.Errorf("refused creates reached den: %v", den.calls()[n:])
	}
}

// A sandbox made with autoResume shows it, and not the label behind it.
func TestAutoResumeInfo(t *testing.T) {
	sb := &api.Sandbox{ID: "sb1", State: api.StateHibernated, Labels: map[string]string{"k": "v", labelAutoResume: "true"}}
	info := detail(sb, sb.CreatedAt)
	if !info.Lifecycle.AutoResume || !jsonEqual(info.Metadata, map[string]string{"k": "v"}) {
		t.Errorf("detail: lifecycle %+v, metadata %v", info.Lifecycle, info.Metadata)
	}
	sb.Labels = nil
	if info := detail(sb, sb.CreatedAt); info.Lifecycle.AutoResume || info.Metadata == nil {
		t.Errorf("detail without autoResume: lifecycle %+v, metadata %v", info.Lifecycle, info.Metadata)
	}
}

// Traffic to a paused sandbox made with autoResume wakes it: an envd
// call and a request to one of its ports. Without autoResume both are
// 502, as E2B's proxy answers, and nothing is woken.
func TestAutoResumeWakes(t *testing.T) {
	for _, auto := range []bool{true, false} {
		d, den := newKeyedDoor(t)
		den.wakes = true
		if auto {
			den.labels = map[string]string{labelAutoResume: "true"}
		}
		for _, c := range []struct {
			what, host string
			hdr        map[string]string
		}{
			{"envd /health", "127.0.0.1:7070", map[string]string{headerSandboxID: "sb1", headerSandboxPort: envdPort,
				headerAccessToken: d.sandboxToken(envdTokenPrefix, "sb1")}},
			{"port by host", "3000-sb1.e2b.localhost", map[string]string{headerTrafficToken: d.sandboxToken(trafficTokenPrefix, "sb1")}},
			{"port with a den token", "127.0.0.1:7070", map[string]string{headerSandboxID: "sb1", headerSandboxPort: "3000",
				"Authorization": "Bearer " + token}},
		} {
			den.mu.Lock()
			den.state = api.StateHibernated
			den.mu.Unlock()
			n := len(den.calls())
			r := httptest.NewRequest("GET", "/health", nil)
			r.Host = c.host
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			d.ServeHTTP(w, r)
			woke := false
			for _, call := range den.calls()[n:] {
				woke = woke || call.route == "POST /v1/sandboxes/sb1/resume"
			}
			switch {
			case auto && (w.Code/100 != 2 || !woke):
				t.Errorf("%s to a sandbox with autoResume: %d %s, woken %v", c.what, w.Code, w.Body, woke)
			case !auto && (w.Code != 502 || woke):
				t.Errorf("%s to a sandbox without autoResume: %d %s, woken %v", c.what, w.Code, w.Body, woke)
			}
		}
	}
}
