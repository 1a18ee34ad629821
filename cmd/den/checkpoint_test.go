package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// sleepDend is a fake dend for the sleep, checkpoint and fork verbs that
// records every request.
type sleepDend struct {
	mu   sync.Mutex
	seen []string // "METHOD PATH BODY"
}

func (d *sleepDend) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

func (d *sleepDend) last(t *testing.T) string {
	t.Helper()
	r := d.requests()
	if len(r) == 0 {
		t.Fatal("dend saw no request")
	}
	return r[len(r)-1]
}

func (d *sleepDend) start(t *testing.T) string {
	mux := http.NewServeMux()
	sandbox := func(name, state string) api.Sandbox {
		return api.Sandbox{Name: name, State: state, Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Generation: 4, CreatedAt: now,
			Policy: api.Policy{PauseAfter: new("5m"), HibernateAfter: new("1h"), TTL: new("0"),
				BackgroundActive: new(false), KeepLast: new(0), MaxAge: new("0")}}
	}
	notFound := func(w http.ResponseWriter, what string) {
		w.WriteHeader(404)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: what + " not found", Hint: "list them"}})
	}
	for verb, state := range map[string]string{"pause": api.StatePaused, "resume": api.StateRunning,
		"hibernate": api.StateHibernated, "restore": api.StateRunning, "recover": api.StateRunning} {
		mux.HandleFunc("POST /v1/sandboxes/{name}/"+verb, func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("name") == "ghost" {
				notFound(w, `sandbox "ghost"`)
				return
			}
			_ = json.NewEncoder(w).Encode(sandbox(r.PathValue("name"), state))
		})
	}
	mux.HandleFunc("GET /v1/sandboxes/{name}", func(w http.ResponseWriter, r *http.Request) {
		sb := sandbox(r.PathValue("name"), api.StateRunning)
		sb.Next = &api.NextAction{Action: api.ActionPause, At: time.Now().Add(2*time.Hour + time.Minute)}
		_ = json.NewEncoder(w).Encode(sb)
	})
	mux.HandleFunc("PATCH /v1/sandboxes/{name}/policy", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(sandbox(r.PathValue("name"), api.StateRunning))
	})
	mux.HandleFunc("PUT /v1/sandboxes/{name}/network", func(w http.ResponseWriter, r *http.Request) {
		var p api.NetworkPolicy
		_ = json.NewDecoder(r.Body).Decode(&p)
		sb := sandbox(r.PathValue("name"), api.StateRunning)
		sb.Network = p
		_ = json.NewEncoder(w).Encode(sb)
	})
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(sandbox("new", api.StateRunning))
	})
	mux.HandleFunc("GET /v1/images/{image}", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Image{Name: r.PathValue("image")})
	})
	mux.HandleFunc("POST /v1/sandboxes/{name}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		var req api.CheckpointRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(api.Checkpoint{ID: "ck-7", Name: req.Name, Kind: api.CheckpointManual, Memory: !req.FSOnly,
			FilesBytes: 2 << 20, CreatedAt: time.Now()})
	})
	mux.HandleFunc("GET /v1/sandboxes/{name}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.CheckpointList{Checkpoints: []api.Checkpoint{
			{ID: "ck-1", Name: "base", Kind: api.CheckpointManual, Memory: true, CreatedAt: time.Now()},
			{ID: "ck-2", Parent: "ck-1", Kind: api.CheckpointManual, CreatedAt: time.Now()},
		}})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{name}/checkpoints/{ckpt}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ckpt") == "ck-1" {
			w.WriteHeader(409)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeConflict,
				Message: `checkpoint "ck-1" is needed by kid`, Hint: "remove kid first"}})
			return
		}
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /v1/sandboxes/{name}/fork", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(api.SandboxList{Sandboxes: []api.Sandbox{sandbox("try-1", api.StateRunning), sandbox("try-2", api.StateRunning)}})
	})
	return serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.seen = append(d.seen, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(b)))
		d.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		mux.ServeHTTP(w, r)
	}))
}

func TestSleepVerbsAgainstFake(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)

	code, stdout, stderr := runDen(t, sock, "pause", "web", "db")
	if code != 0 || stdout != "web\ndb\n" {
		t.Errorf("pause: %d %q %q", code, stdout, stderr)
	}
	if got := d.requests(); len(got) != 2 || got[0] != "POST /v1/sandboxes/web/pause" || got[1] != "POST /v1/sandboxes/db/pause" {
		t.Errorf("pause sent %q", got)
	}
	code, stdout, _ = runDen(t, sock, "hibernate", "web", "--json")
	var sbs []api.Sandbox
	if code != 0 || json.Unmarshal([]byte(stdout), &sbs) != nil || len(sbs) != 1 || sbs[0].State != api.StateHibernated {
		t.Errorf("hibernate --json: %d %q", code, stdout)
	}
	code, _, stderr = runDen(t, sock, "resume", "web", "ghost")
	if code != 1 || !strings.Contains(stderr, `den: ghost: sandbox "ghost" not found`) || !strings.Contains(stderr, "1 of 2 failed") {
		t.Errorf("resume with one missing: %d %q", code, stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"recover", "web"}, `POST /v1/sandboxes/web/recover {"mode":"retry"}`},
		{[]string{"recover", "web", "--cold"}, `POST /v1/sandboxes/web/recover {"mode":"cold"}`},
		{[]string{"recover", "web", "--rollback"}, `POST /v1/sandboxes/web/recover {"mode":"rollback"}`},
		{[]string{"recover", "web", "--rollback", "--checkpoint", "base"}, `POST /v1/sandboxes/web/recover {"mode":"rollback","checkpoint":"base"}`},
		{[]string{"restore", "web", "base"}, `POST /v1/sandboxes/web/restore {"checkpoint":"base"}`},
	} {
		code, stdout, stderr := runDen(t, sock, tt.args...)
		if code != 0 || !strings.HasPrefix(stdout, "NAME   STATE     IMAGE") {
			t.Errorf("%v: %d %q %q", tt.args, code, stdout, stderr)
		}
		if got := d.last(t); got != tt.want {
			t.Errorf("%v sent %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestPolicyFlags: only the flags given are sent, zero ones included.
func TestPolicyFlags(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "web", "--hibernate-after", "15m"}, `PATCH /v1/sandboxes/web/policy {"hibernate_after":"15m"}`},
		{[]string{"policy", "web", "--stop-after", "30m"}, `PATCH /v1/sandboxes/web/policy {"stop_after":"30m"}`},
		{[]string{"policy", "web", "--wake-on-boot"}, `PATCH /v1/sandboxes/web/policy {"wake_on_boot":true}`},
		{[]string{"policy", "web", "--pause-after", "0", "--background-active=false", "--keep", "0"},
			`PATCH /v1/sandboxes/web/policy {"pause_after":"0","background_active":false,"keep_last":0}`},
		{[]string{"policy", "web", "--ttl", "90m", "--max-age", "168h", "--background-active"},
			`PATCH /v1/sandboxes/web/policy {"ttl":"1h30m","background_active":true,"max_age":"168h"}`},
		{[]string{"policy", "web"}, `GET /v1/sandboxes/web`},
	} {
		code, stdout, stderr := runDen(t, sock, tt.args...)
		if code != 0 || !strings.HasPrefix(stdout, "pause after         5m\nhibernate after     1h\n") {
			t.Errorf("%v: %d %q %q", tt.args, code, stdout, stderr)
		}
		if got := d.last(t); got != tt.want {
			t.Errorf("%v sent %s, want %s", tt.args, got, tt.want)
		}
	}
	code, stdout, _ := runDen(t, sock, "policy", "web")
	if code != 0 || !strings.HasSuffix(stdout, "next                pause in 2 hours\n") {
		t.Errorf("policy shows no next step: %q", stdout)
	}

	n := len(d.requests())
	code, _, stderr := runDen(t, sock, "policy", "web", "--hibernate-after", "7d")
	if code != 2 || !strings.Contains(stderr, `invalid argument "7d" for "--hibernate-after"`) || !strings.Contains(stderr, "hint: write durations like 90s") {
		t.Errorf("a bad duration: %d %q", code, stderr)
	}
	if len(d.requests()) != n {
		t.Error("a bad duration reached dend")
	}
}

func TestCreateFromAndPolicy(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)
	code, _, stderr := runDen(t, sock, "create", "copy", "--from", "web:base")
	if code != 0 {
		t.Fatalf("create --from: %d %q", code, stderr)
	}
	// The image comes from the checkpoint: no image lookup or build first.
	if got := d.requests(); len(got) != 1 || got[0] != `POST /v1/sandboxes {"name":"copy","from":"web:base"}` {
		t.Errorf("create --from sent %q", got)
	}

	code, _, stderr = runDen(t, sock, "create", "scratch", "--ephemeral", "--ttl", "30m", "--pause-after", "1m", "--hibernate-after", "5m", "--background-active")
	if code != 0 {
		t.Fatalf("create --ephemeral: %d %q", code, stderr)
	}
	want := `POST /v1/sandboxes {"name":"scratch","ephemeral":true,"policy":{"pause_after":"1m","hibernate_after":"5m","ttl":"30m","background_active":true}}`
	if got := d.last(t); got != want {
		t.Errorf("create --ephemeral sent %s, want %s", got, want)
	}
	runDen(t, sock, "create", "plain")
	if got := d.last(t); got != `POST /v1/sandboxes {"name":"plain"}` {
		t.Errorf("create without policy flags sent %s", got)
	}
}

func TestCheckpointCommands(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)

	code, stdout, stderr := runDen(t, sock, "checkpoint", "web", "--name", "v1", "--fs-only")
	if code != 0 || !strings.HasPrefix(stdout, "ID     NAME   KIND     CONTENT      SIZE") || !strings.Contains(stdout, "\nck-7   v1     manual   files-only   2MiB ") {
		t.Errorf("checkpoint: %d %q %q", code, stdout, stderr)
	}
	if got := d.last(t); got != `POST /v1/sandboxes/web/checkpoints {"name":"v1","fs_only":true}` {
		t.Errorf("checkpoint sent %s", got)
	}
	code, stdout, _ = runDen(t, sock, "checkpoint", "web", "--json")
	var ck api.Checkpoint
	if code != 0 || json.Unmarshal([]byte(stdout), &ck) != nil || ck.ID != "ck-7" || !ck.Memory {
		t.Errorf("checkpoint --json: %d %q", code, stdout)
	}

	code, stdout, _ = runDen(t, sock, "checkpoints", "web")
	if code != 0 || !strings.Contains(stdout, "\nck-1      base") || !strings.Contains(stdout, "\n└─ ck-2   -  ") {
		t.Errorf("checkpoints: %d\n%s", code, stdout)
	}
	code, stdout, _ = runDen(t, sock, "checkpoints", "web", "--json")
	var list []api.Checkpoint
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 2 || list[1].Parent != "ck-1" {
		t.Errorf("checkpoints --json: %d %q", code, stdout)
	}

	code, stdout, _ = runDen(t, sock, "checkpoint", "rm", "web", "ck-2", "ck-3")
	if code != 0 || stdout != "ck-2\nck-3\n" {
		t.Errorf("checkpoint rm: %d %q", code, stdout)
	}
	if got := d.last(t); got != "DELETE /v1/sandboxes/web/checkpoints/ck-3" {
		t.Errorf("checkpoint rm sent %s", got)
	}
	code, _, stderr = runDen(t, sock, "checkpoint", "rm", "web", "ck-1")
	if code != 1 || stderr != "den: checkpoint \"ck-1\" is needed by kid\nhint: remove kid first\n" {
		t.Errorf("checkpoint rm of a needed one: %d %q", code, stderr)
	}

	code, stdout, stderr = runDen(t, sock, "fork", "web", "try", "--from", "base", "--count", "2")
	if code != 0 || !strings.Contains(stdout, "\ntry-1 ") || !strings.Contains(stdout, "\ntry-2 ") {
		t.Errorf("fork: %d %q %q", code, stdout, stderr)
	}
	if got := d.last(t); got != `POST /v1/sandboxes/web/fork {"name":"try","from":"base","count":2}` {
		t.Errorf("fork sent %s", got)
	}
	runDen(t, sock, "fork", "web", "try")
	if got := d.last(t); got != `POST /v1/sandboxes/web/fork {"name":"try","count":1}` {
		t.Errorf("a plain fork sent %s", got)
	}
}

func TestSleepUsageErrors(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)
	for _, tt := range []struct {
		args    []string
		message string
	}{
		{[]string{"pause"}, "den: missing NAME\n"},
		{[]string{"checkpoint"}, "den: missing NAME\n"},
		{[]string{"checkpoint", "rm", "web"}, "den: missing CKPT\n"},
		{[]string{"checkpoints"}, "den: missing NAME\n"},
		{[]string{"restore", "web"}, "den: missing CKPT\n"},
		{[]string{"fork", "web"}, "den: missing NEW\n"},
		{[]string{"fork", "web", "try", "--count", "0"}, "den: invalid --count 0\n"},
		{[]string{"recover", "web", "--cold", "--rollback"}, "den: more than one way to recover given\n"},
		{[]string{"recover", "web", "--checkpoint", "base"}, "den: --checkpoint without --rollback\n"},
		{[]string{"policy", "web", "--keep", "many"}, `den: invalid argument "many" for "--keep" flag`},
		{[]string{"create", "x", "--ttl", "soon"}, `den: invalid argument "soon" for "--ttl" flag`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runDen(t, sock, tt.args...)
			if code != 2 || !strings.HasPrefix(stderr, tt.message) || !strings.Contains(stderr, "\nhint: ") || stdout != "" {
				t.Errorf("status %d, stdout %q, stderr %q; want 2 and %q with a hint", code, stdout, stderr, tt.message)
			}
		})
	}
	if got := d.requests(); len(got) != 0 {
		t.Errorf("usage errors reached dend: %q", got)
	}
}
