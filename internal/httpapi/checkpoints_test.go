package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

func TestSleepVerbs(t *testing.T) {
	for _, tt := range []struct{ path, method, state string }{
		{"/v1/sandboxes/alpha/pause", "Pause", api.StatePaused},
		{"/v1/sandboxes/alpha/resume", "Resume", api.StateRunning},
		{"/v1/sandboxes/alpha/hibernate", "Hibernate", api.StateHibernated},
	} {
		t.Run(tt.method, func(t *testing.T) {
			e := newEnv(t)
			resp, body := e.do("POST", tt.path, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var sb api.Sandbox
			if err := json.Unmarshal(body, &sb); err != nil || sb.State != tt.state {
				t.Errorf("answer %s, want state %s", body, tt.state)
			}
			if got := e.calls.find(tt.method); len(got) != 1 || got[0].Args[0] != "alpha" {
				t.Errorf("%s calls = %v", tt.method, got)
			}

			e.sbx.err = errdefs.WithHint(errdefs.Conflict("cannot %s: it is stopped", tt.method), "start it first")
			resp, body = e.do("POST", tt.path, nil)
			if got := assertError(t, resp, body, http.StatusConflict, api.CodeConflict); got.Hint != "start it first" {
				t.Errorf("hint %q", got.Hint)
			}
		})
	}
}

// TestSandboxNewFields shows the effective policy, the next step, the
// running time and the checkpoint links on the wire.
func TestSandboxNewFields(t *testing.T) {
	e := newEnv(t)
	at := testTime.Add(time.Hour)
	sb := e.sbx.sandboxes[0]
	sb.Spec.Ephemeral = true
	sb.Policy = idle.Policy{PauseAfter: new(90 * time.Second), KeepLast: new(3)}
	sb.Usage = idle.Usage{RunningFor: 2 * time.Hour}
	sb.Checkpoint, sb.Origin, sb.Head, sb.Pending = "ck-h", "ck-o", "ck2", sandbox.PendingHibernate
	e.sbx.due = idle.Due{Action: idle.ActionHibernate, At: at}

	_, body := e.do("GET", "/v1/sandboxes/alpha", nil)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	wantPolicy := map[string]any{
		"pause_after": "1m30s", "hibernate_after": "1h", "stop_after": "0", "ttl": "0",
		"background_active": false, "wake_on_boot": false, "keep_last": 3.0, "max_age": "0",
	}
	if p, _ := got["policy"].(map[string]any); !equalJSON(p, wantPolicy) {
		t.Errorf("policy = %v, want %v", got["policy"], wantPolicy)
	}
	for k, want := range map[string]any{
		"ephemeral": true, "running_for": "2h", "checkpoint": "ck-h", "origin": "ck-o", "head": "ck2", "pending": "hibernate",
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	var sbw api.Sandbox
	if err := json.Unmarshal(body, &sbw); err != nil || sbw.Next == nil || sbw.Next.Action != api.ActionHibernate || !sbw.Next.At.Equal(at) {
		t.Errorf("next = %+v (%v)", sbw.Next, err)
	}

	// Nothing due: no next. A running stretch counts toward running_for.
	e.sbx.due = idle.Due{}
	sb.Usage = idle.Usage{RunningFor: time.Hour, RunningSince: time.Now().Add(-time.Minute)}
	_, body = e.do("GET", "/v1/sandboxes/alpha", nil)
	if strings.Contains(string(body), `"next"`) {
		t.Errorf("next present with nothing due: %s", body)
	}
	if err := json.Unmarshal(body, &sbw); err != nil {
		t.Fatal(err)
	}
	if d, err := time.ParseDuration(sbw.RunningFor); err != nil || d < time.Hour+time.Minute {
		t.Errorf("running_for = %q, want at least 1h1m", sbw.RunningFor)
	}
}

// equalJSON reports whether a and b encode to the same JSON.
func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestCreateFromCheckpointWithPolicy(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes", strings.NewReader(
		`{"name":"beta","from":"alpha:base","ephemeral":true,"policy":{"ttl":"2h","pause_after":"0","background_active":true}}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	p := e.calls.find("Create")[0].Args[0].(sandbox.CreateParams)
	if p.From != "alpha:base" || !p.Ephemeral {
		t.Errorf("params = %+v", p)
	}
	pol := p.Policy
	if pol.TTL == nil || *pol.TTL != 2*time.Hour || pol.PauseAfter == nil || *pol.PauseAfter != 0 ||
		pol.BackgroundActive == nil || !*pol.BackgroundActive {
		t.Errorf("policy = %+v", pol)
	}
	if pol.HibernateAfter != nil || pol.KeepLast != nil || pol.MaxAge != nil {
		t.Errorf("absent fields were set: %+v", pol)
	}

	// Without a policy, every field is left to the service's defaults.
	e = newEnv(t)
	e.do("POST", "/v1/sandboxes", strings.NewReader(`{"name":"gamma"}`))
	if p := e.calls.find("Create")[0].Args[0].(sandbox.CreateParams); p.Policy != (idle.Policy{}) {
		t.Errorf("policy = %+v, want all unset", p.Policy)
	}
}

// TestBadBodies: bodies the handlers cannot parse reach no service method.
func TestBadBodies(t *testing.T) {
	for _, tt := range []struct {
		name, method, path, body, want string
	}{
		{"create bad duration", "POST", "/v1/sandboxes", `{"name":"b","policy":{"ttl":"soon"}}`, `invalid policy.ttl "soon"`},
		{"create empty duration", "POST", "/v1/sandboxes", `{"name":"b","policy":{"max_age":""}}`, `invalid policy.max_age ""`},
		{"create number duration", "POST", "/v1/sandboxes", `{"name":"b","policy":{"ttl":90}}`, "invalid JSON body"},
		{"create unknown policy field", "POST", "/v1/sandboxes", `{"name":"b","policy":{"idle":"5m"}}`, `invalid JSON body: unknown field "idle"`},
		{"policy bad duration", "PATCH", "/v1/sandboxes/alpha/policy", `{"pause_after":"5 minutes"}`, `invalid pause_after "5 minutes"`},
		{"policy days", "PATCH", "/v1/sandboxes/alpha/policy", `{"hibernate_after":"7d"}`, `invalid hibernate_after "7d"`},
		{"policy unknown field", "PATCH", "/v1/sandboxes/alpha/policy", `{"keep":3}`, `invalid JSON body: unknown field "keep"`},
		{"policy wrong type", "PATCH", "/v1/sandboxes/alpha/policy", `{"background_active":"yes"}`, "invalid JSON body"},
		{"policy empty body", "PATCH", "/v1/sandboxes/alpha/policy", ``, "invalid JSON body: the body is empty"},
		{"checkpoint unknown field", "POST", "/v1/sandboxes/alpha/checkpoints", `{"label":"x"}`, `invalid JSON body: unknown field "label"`},
		{"checkpoint truncated", "POST", "/v1/sandboxes/alpha/checkpoints", `{"name":`, "invalid JSON body: unexpected EOF"},
		{"checkpoint trailing", "POST", "/v1/sandboxes/alpha/checkpoints", `{} {}`, "invalid JSON body: unexpected data"},
		{"restore unknown field", "POST", "/v1/sandboxes/alpha/restore", `{"ckpt":"ck1"}`, `invalid JSON body: unknown field "ckpt"`},
		{"restore empty body", "POST", "/v1/sandboxes/alpha/restore", ``, "invalid JSON body: the body is empty"},
		{"fork count not a number", "POST", "/v1/sandboxes/alpha/fork", `{"name":"kid","count":"two"}`, "invalid JSON body"},
		{"fork unknown field", "POST", "/v1/sandboxes/alpha/fork", `{"name":"kid","n":2}`, `invalid JSON body: unknown field "n"`},
		{"recover unknown field", "POST", "/v1/sandboxes/alpha/recover", `{"mode":"retry","force":true}`, `invalid JSON body: unknown field "force"`},
		{"recover empty body", "POST", "/v1/sandboxes/alpha/recover", ``, "invalid JSON body: the body is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp, body := e.do(tt.method, tt.path, strings.NewReader(tt.body))
			got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
			if !strings.HasPrefix(got.Message, tt.want) || got.Hint == "" {
				t.Errorf("error %+v, want a message starting with %q and a hint", got, tt.want)
			}
			e.noCalls()
		})
	}
}

func TestSetPolicy(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("PATCH", "/v1/sandboxes/alpha/policy", strings.NewReader(`{"hibernate_after":"15m","keep_last":3}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	got := e.calls.find("SetPolicy")
	if len(got) != 1 || got[0].Args[0] != "alpha" {
		t.Fatalf("SetPolicy calls = %v", got)
	}
	p := got[0].Args[1].(idle.Policy)
	if p.HibernateAfter == nil || *p.HibernateAfter != 15*time.Minute || p.KeepLast == nil || *p.KeepLast != 3 {
		t.Errorf("policy = %+v", p)
	}
	if p.PauseAfter != nil || p.TTL != nil || p.BackgroundActive != nil || p.MaxAge != nil {
		t.Errorf("absent fields were sent as set: %+v", p)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	if *sb.Policy.HibernateAfter != "15m" || *sb.Policy.PauseAfter != "5m" || *sb.Policy.KeepLast != 3 || *sb.Policy.TTL != "0" {
		t.Errorf("effective policy %s", body)
	}

	// Values are the service's to judge: negative ones pass through.
	e = newEnv(t)
	e.do("PATCH", "/v1/sandboxes/alpha/policy", strings.NewReader(`{"ttl":"-5m","keep_last":-1}`))
	p = e.calls.find("SetPolicy")[0].Args[1].(idle.Policy)
	if *p.TTL != -5*time.Minute || *p.KeepLast != -1 {
		t.Errorf("policy = %+v", p)
	}

	resp, body = e.do("GET", "/v1/sandboxes/alpha/policy", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "PATCH" {
		t.Errorf("GET policy: %d %s (Allow %q)", resp.StatusCode, body, resp.Header.Get("Allow"))
	}
}

func TestCheckpointRoutes(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/checkpoints", strings.NewReader(`{"name":"v1","fs_only":true}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := e.calls.find("Checkpoint"); len(got) != 1 || got[0].Args[1] != (sandbox.CheckpointParams{Name: "v1", FSOnly: true}) {
		t.Errorf("Checkpoint calls = %v", got)
	}
	var c api.Checkpoint
	if err := json.Unmarshal(body, &c); err != nil || c.ID != "ck3" || c.Name != "v1" || c.Memory || c.Parent != "ck2" || c.Sandbox != "sb1" {
		t.Errorf("checkpoint %s", body)
	}

	// Every field is optional, so no body at all is a full, unnamed checkpoint.
	e = newEnv(t)
	if resp, body := e.do("POST", "/v1/sandboxes/alpha/checkpoints", nil); resp.StatusCode != http.StatusCreated {
		t.Fatalf("no body: status %d: %s", resp.StatusCode, body)
	}
	if got := e.calls.find("Checkpoint"); len(got) != 1 || got[0].Args[1] != (sandbox.CheckpointParams{}) {
		t.Errorf("Checkpoint calls = %v", got)
	}

	var list api.CheckpointList
	_, body = e.do("GET", "/v1/sandboxes/alpha/checkpoints", nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Checkpoints) != 2 {
		t.Fatalf("list %s", body)
	}
	want := api.Checkpoint{ID: "ck1", Sandbox: "sb1", Name: "base", Kind: api.CheckpointManual, Memory: true, Generation: 2,
		EngineVersion: "release-20260905.0", MemoryBytes: 3 << 20, FilesBytes: 40 << 20, CreatedAt: testTime, NeededBy: []string{"kid"}, Location: api.LocationLocal}
	if got := list.Checkpoints[0]; !equalJSON(got, want) {
		t.Errorf("first checkpoint = %+v, want %+v", got, want)
	}
	if list.Checkpoints[1].Parent != "ck1" {
		t.Errorf("second checkpoint = %+v", list.Checkpoints[1])
	}
	e.sbx.checkpoints = nil
	if _, body := e.do("GET", "/v1/sandboxes/alpha/checkpoints", nil); strings.TrimSpace(string(body)) != `{"checkpoints":[]}` {
		t.Errorf("empty list is %s, want []", body)
	}

	e = newEnv(t)
	_, body = e.do("GET", "/v1/sandboxes/alpha/checkpoints/base", nil)
	if err := json.Unmarshal(body, &c); err != nil || c.ID != "ck1" {
		t.Errorf("get %s", body)
	}
	if got := e.calls.find("GetCheckpoint"); len(got) != 1 || got[0].Args[0] != "alpha" || got[0].Args[1] != "base" {
		t.Errorf("GetCheckpoint calls = %v", got)
	}
	resp, body = e.do("GET", "/v1/sandboxes/alpha/checkpoints/nope", nil)
	assertError(t, resp, body, http.StatusNotFound, api.CodeNotFound)

	if resp, _ := e.do("DELETE", "/v1/sandboxes/alpha/checkpoints/ck2", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d", resp.StatusCode)
	}
	if got := e.calls.find("RemoveCheckpoint"); len(got) != 1 || got[0].Args[0] != "alpha" || got[0].Args[1] != "ck2" {
		t.Errorf("RemoveCheckpoint calls = %v", got)
	}
	e.sbx.err = errdefs.WithHint(errdefs.Conflict("checkpoint is needed by kid"), "remove kid first")
	resp, body = e.do("DELETE", "/v1/sandboxes/alpha/checkpoints/ck1", nil)
	assertError(t, resp, body, http.StatusConflict, api.CodeConflict)
}

func TestRestore(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/restore", strings.NewReader(`{"checkpoint":"base"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := e.calls.find("Restore"); len(got) != 1 || got[0].Args[0] != "alpha" || got[0].Args[1] != "base" {
		t.Errorf("Restore calls = %v", got)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(body, &sb); err != nil || sb.Head != "base" || sb.Generation != 3 {
		t.Errorf("sandbox %s", body)
	}
	// A missing checkpoint is the service's to refuse.
	e = newEnv(t)
	e.do("POST", "/v1/sandboxes/alpha/restore", strings.NewReader(`{}`))
	if got := e.calls.find("Restore"); len(got) != 1 || got[0].Args[1] != "" {
		t.Errorf("Restore calls = %v", got)
	}
}

func TestFork(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/fork", strings.NewReader(`{"name":"kid","from":"base","count":3}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := e.calls.find("Fork"); len(got) != 1 || got[0].Args[0] != "alpha" ||
		got[0].Args[1] != (sandbox.ForkParams{Name: "kid", From: "base", Count: 3}) {
		t.Errorf("Fork calls = %v", got)
	}
	var list api.SandboxList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Sandboxes) != 3 || list.Sandboxes[2].Name != "kid-3" || list.Sandboxes[0].Origin != "ck-fork" {
		t.Errorf("children %s", body)
	}

	// The count is the service's to check, whatever it is.
	for _, count := range []int{0, -1, 1000} {
		e := newEnv(t)
		e.sbx.err = errdefs.WithHint(errdefs.Invalid("invalid count %d", count), "use 1 to 64")
		resp, body := e.do("POST", "/v1/sandboxes/alpha/fork", strings.NewReader(`{"name":"kid","count":`+jsonInt(count)+`}`))
		assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
		if got := e.calls.find("Fork"); len(got) != 1 || got[0].Args[1].(sandbox.ForkParams).Count != count {
			t.Errorf("count %d: Fork calls = %v", count, got)
		}
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRecover(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/sandboxes/alpha/recover", strings.NewReader(`{"mode":"rollback","checkpoint":"ck1"}`))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"running"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := e.calls.find("RecoverSandbox"); len(got) != 1 || got[0].Args[0] != "alpha" ||
		got[0].Args[1] != (sandbox.RecoverParams{Mode: sandbox.RecoverRollback, Checkpoint: "ck1"}) {
		t.Errorf("RecoverSandbox calls = %v", got)
	}
	// The mode is the service's to check.
	e = newEnv(t)
	e.do("POST", "/v1/sandboxes/alpha/recover", strings.NewReader(`{"mode":"sideways"}`))
	if got := e.calls.find("RecoverSandbox"); len(got) != 1 || got[0].Args[1].(sandbox.RecoverParams).Mode != "sideways" {
		t.Errorf("RecoverSandbox calls = %v", got)
	}
}
