package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// sleepRoutes adds the routes of pause, hibernate, checkpoints, restore,
// fork, recover and policy to a fake dend. Sandbox answers carry the
// verb in Reason, so a test sees which route answered.
func sleepRoutes(f *fakeDend) {
	answer := func(state string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, api.Sandbox{Name: r.PathValue("name"), State: state, Reason: r.URL.Path})
		}
	}
	f.routes["POST /v1/sandboxes/{name}/pause"] = answer(api.StatePaused)
	f.routes["POST /v1/sandboxes/{name}/resume"] = answer(api.StateRunning)
	f.routes["POST /v1/sandboxes/{name}/hibernate"] = answer(api.StateHibernated)
	f.routes["POST /v1/sandboxes/{name}/restore"] = answer(api.StateRunning)
	f.routes["POST /v1/sandboxes/{name}/recover"] = answer(api.StateRunning)
	f.routes["PATCH /v1/sandboxes/{name}/policy"] = func(w http.ResponseWriter, r *http.Request) {
		var p api.Policy
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			writeErr(w, 400, api.CodeInvalid, "invalid JSON body", "")
			return
		}
		writeJSON(w, 200, api.Sandbox{Name: r.PathValue("name"), Policy: p})
	}
	f.routes["POST /v1/sandboxes/{name}/checkpoints"] = func(w http.ResponseWriter, r *http.Request) {
		var req api.CheckpointRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, 201, api.Checkpoint{ID: "ck-9", Name: req.Name, Memory: !req.FSOnly, Kind: api.CheckpointManual, CreatedAt: created})
	}
	f.routes["GET /v1/sandboxes/{name}/checkpoints"] = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.CheckpointList{Checkpoints: []api.Checkpoint{{ID: "ck-1"}, {ID: "ck-2", Parent: "ck-1"}}})
	}
	f.routes["GET /v1/sandboxes/{name}/checkpoints/{ckpt}"] = func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ckpt") != "base line" {
			writeErr(w, 404, api.CodeNotFound, "no checkpoint "+r.PathValue("ckpt"), "list them with `den checkpoints NAME`")
			return
		}
		writeJSON(w, 200, api.Checkpoint{ID: "ck-1", Name: r.PathValue("ckpt")})
	}
	f.routes["DELETE /v1/sandboxes/{name}/checkpoints/{ckpt}"] = func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ckpt") == "ck-1" {
			writeErr(w, 409, api.CodeConflict, `checkpoint "ck-1" is needed by kid`, "remove kid first")
			return
		}
		w.WriteHeader(204)
	}
	f.routes["POST /v1/sandboxes/{name}/fork"] = func(w http.ResponseWriter, r *http.Request) {
		var req api.ForkRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, 201, api.SandboxList{Sandboxes: []api.Sandbox{{Name: req.Name + "-1"}, {Name: req.Name + "-2"}}})
	}
}

// body decodes a request's JSON body into a generic map.
func body(t *testing.T, req seenRequest) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(req.Body, &m); err != nil {
		t.Fatalf("%s %s body %q: %v", req.Method, req.Path, req.Body, err)
	}
	return m
}

func TestSleepVerbs(t *testing.T) {
	transports(t, sleepRoutes, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()
		for _, tt := range []struct {
			call  func(context.Context, string) (*api.Sandbox, error)
			path  string
			state string
		}{
			{c.Pause, "/v1/sandboxes/web/pause", api.StatePaused},
			{c.Resume, "/v1/sandboxes/web/resume", api.StateRunning},
			{c.Hibernate, "/v1/sandboxes/web/hibernate", api.StateHibernated},
		} {
			sb, err := tt.call(ctx, "web")
			if err != nil || sb.State != tt.state || sb.Reason != tt.path {
				t.Errorf("%s: %+v, %v", tt.path, sb, err)
			}
			if req := f.last(); req.Method != "POST" || req.Path != tt.path || req.Body != nil {
				t.Errorf("sent %s %s %q", req.Method, req.Path, req.Body)
			}
		}
	})
}

func TestCheckpointCalls(t *testing.T) {
	transports(t, sleepRoutes, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()
		ck, err := c.Checkpoint(ctx, "web", client.CheckpointOptions{Name: "v1", FSOnly: true})
		if err != nil || ck.ID != "ck-9" || ck.Name != "v1" || ck.Memory || !ck.CreatedAt.Equal(created) {
			t.Fatalf("Checkpoint = %+v, %v", ck, err)
		}
		req := f.last()
		if req.Method != "POST" || req.Path != "/v1/sandboxes/web/checkpoints" {
			t.Errorf("sent %s %s", req.Method, req.Path)
		}
		if got, want := body(t, req), map[string]any{"name": "v1", "fs_only": true}; !reflect.DeepEqual(got, want) {
			t.Errorf("body = %v, want %v", got, want)
		}
		if _, err := c.Checkpoint(ctx, "web", client.CheckpointOptions{}); err != nil || string(f.last().Body) != "{}" {
			t.Errorf("a default checkpoint sent %q, %v", f.last().Body, err)
		}

		list, err := c.Checkpoints(ctx, "web")
		if err != nil || len(list) != 2 || list[1].Parent != "ck-1" {
			t.Errorf("Checkpoints = %+v, %v", list, err)
		}

		// A checkpoint reference is one escaped path element.
		got, err := c.GetCheckpoint(ctx, "web", "base line")
		if err != nil || got.ID != "ck-1" {
			t.Errorf("GetCheckpoint = %+v, %v", got, err)
		}
		if p := f.last().Path; p != "/v1/sandboxes/web/checkpoints/base%20line" {
			t.Errorf("GetCheckpoint sent %s", p)
		}
		if _, err := c.GetCheckpoint(ctx, "web", "nope"); !client.IsNotFound(err) || client.Hint(err) == "" {
			t.Errorf("GetCheckpoint of a missing one: %v (hint %q)", err, client.Hint(err))
		}

		if err := c.RemoveCheckpoint(ctx, "web", "ck-2"); err != nil {
			t.Errorf("RemoveCheckpoint: %v", err)
		}
		if req := f.last(); req.Method != "DELETE" || req.Path != "/v1/sandboxes/web/checkpoints/ck-2" {
			t.Errorf("RemoveCheckpoint sent %s %s", req.Method, req.Path)
		}
		err = c.RemoveCheckpoint(ctx, "web", "ck-1")
		if !client.IsConflict(err) || client.Hint(err) != "remove kid first" || err.Error() != `checkpoint "ck-1" is needed by kid` {
			t.Errorf("RemoveCheckpoint of a needed one: %v (hint %q)", err, client.Hint(err))
		}
	})
}

func TestRestoreForkRecover(t *testing.T) {
	transports(t, sleepRoutes, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()
		if _, err := c.Restore(ctx, "web", "base"); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if req := f.last(); req.Path != "/v1/sandboxes/web/restore" || string(req.Body) != `{"checkpoint":"base"}` {
			t.Errorf("Restore sent %s %s", req.Path, req.Body)
		}

		kids, err := c.Fork(ctx, "web", client.ForkOptions{Name: "kid", From: "base", Count: 2})
		if err != nil || len(kids) != 2 || kids[1].Name != "kid-2" {
			t.Errorf("Fork = %+v, %v", kids, err)
		}
		if got, want := body(t, f.last()), map[string]any{"name": "kid", "from": "base", "count": 2.0}; !reflect.DeepEqual(got, want) {
			t.Errorf("Fork body = %v, want %v", got, want)
		}
		if _, err := c.Fork(ctx, "web", client.ForkOptions{Name: "kid"}); err != nil || string(f.last().Body) != `{"name":"kid"}` {
			t.Errorf("a live fork of one sent %q, %v", f.last().Body, err)
		}

		for _, tt := range []struct {
			opts client.RecoverOptions
			want string
		}{
			{client.RecoverOptions{}, `{"mode":"retry"}`},
			{client.RecoverOptions{Mode: api.RecoverCold}, `{"mode":"cold"}`},
			{client.RecoverOptions{Mode: api.RecoverRollback, Checkpoint: "ck-1"}, `{"mode":"rollback","checkpoint":"ck-1"}`},
		} {
			sb, err := c.Recover(ctx, "web", tt.opts)
			if err != nil || sb.State != api.StateRunning {
				t.Errorf("Recover(%+v) = %+v, %v", tt.opts, sb, err)
			}
			if req := f.last(); req.Path != "/v1/sandboxes/web/recover" || string(req.Body) != tt.want {
				t.Errorf("Recover(%+v) sent %s %s, want %s", tt.opts, req.Path, req.Body, tt.want)
			}
		}
	})
}

// TestSetPolicySendsOnlyWhatIsSet: absent fields keep their value on the
// server, so they must not travel, and zero ones must.
func TestSetPolicySendsOnlyWhatIsSet(t *testing.T) {
	transports(t, sleepRoutes, func(t *testing.T, f *fakeDend, c *client.Client) {
		sb, err := c.SetPolicy(context.Background(), "web", api.Policy{
			HibernateAfter: new(api.FormatDuration(15 * time.Minute)), TTL: new("0"), BackgroundActive: new(false)})
		if err != nil {
			t.Fatal(err)
		}
		req := f.last()
		if req.Method != "PATCH" || req.Path != "/v1/sandboxes/web/policy" {
			t.Errorf("sent %s %s", req.Method, req.Path)
		}
		want := `{"hibernate_after":"15m","ttl":"0","background_active":false}`
		if string(req.Body) != want {
			t.Errorf("body %s, want %s", req.Body, want)
		}
		if sb.Policy.HibernateAfter == nil || *sb.Policy.HibernateAfter != "15m" {
			t.Errorf("answer %+v", sb.Policy)
		}
	})
}

func TestCreateFromCheckpoint(t *testing.T) {
	transports(t, nil, func(t *testing.T, f *fakeDend, c *client.Client) {
		_, err := c.CreateSandbox(context.Background(), api.CreateSandboxRequest{
			Name: "copy", From: "web:base", Ephemeral: true, Policy: &api.Policy{TTL: new("2h")}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"name": "copy", "from": "web:base", "ephemeral": true, "policy": map[string]any{"ttl": "2h"}}
		if got := body(t, f.last()); !reflect.DeepEqual(got, want) {
			t.Errorf("create body = %v, want %v", got, want)
		}
	})
}
