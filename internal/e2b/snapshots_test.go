package e2b

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// fakeCheckpoints answers the fake API's routes of checkpoints, of the
// list of sandboxes and of images: sb1 has a manual checkpoint, ck1
// named v1, and ck0, the one its hibernation took.
func fakeCheckpoints(w http.ResponseWriter, r *http.Request, body []byte) bool {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cks := []api.Checkpoint{
		{ID: "ck0", Sandbox: "sb1", Kind: "hibernate", Memory: true, CreatedAt: at},
		{ID: "ck1", Sandbox: "sb1", Name: "v1", Kind: "manual", Memory: true, CreatedAt: at.Add(time.Minute)},
	}
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/sandboxes/sb1/checkpoints":
		var req api.CheckpointRequest
		json.Unmarshal(body, &req)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.Checkpoint{ID: "ck2", Sandbox: "sb1", Name: req.Name, Kind: "manual", Memory: !req.FSOnly})
	case "GET /v1/sandboxes/sb1/checkpoints":
		json.NewEncoder(w).Encode(api.CheckpointList{Checkpoints: cks})
	case "GET /v1/sandboxes":
		json.NewEncoder(w).Encode(api.SandboxList{Sandboxes: []api.Sandbox{{ID: "sb1", Name: "e2b-x", State: api.StateRunning}}})
	case "GET /v1/images":
		json.NewEncoder(w).Encode(api.ImageList{Images: []api.Image{{Name: "e2b-base", Version: 3, SizeBytes: 300 << 20, CreatedAt: at}, {Name: "python", Version: 1}}})
	default:
		return false
	}
	return true
}

func TestSnapshots(t *testing.T) {
	den := newFakeAPI()
	d := doorOver(t, den, Config{})
	call := func(method, path, body string) (int, any) { return controlCall[any](d, method, path, body) }
	want := func(what string, status int, out any, wantStatus int, wantJSON string) {
		t.Helper()
		var w any
		json.Unmarshal([]byte(wantJSON), &w)
		if status != wantStatus || (wantJSON != "" && !jsonEqual(out, w)) {
			t.Errorf("%s: %d %v, want %d %s", what, status, out, wantStatus, wantJSON)
		}
	}

	status, out := call("POST", "/sandboxes/sb1/snapshots", `{"name":"nightly"}`)
	want("create a snapshot", status, out, 201, `{"snapshotID":"sb1:ck2","names":["nightly"]}`)
	if got := den.last("POST /v1/sandboxes/sb1/checkpoints").body; !strings.Contains(got, `"name":"nightly"`) || strings.Contains(got, "fs_only") {
		t.Errorf("checkpoint asked for %s, want one named nightly with its memory", got)
	}
	status, out = call("POST", "/sandboxes/sb1/snapshots", ``)
	want("create an unnamed snapshot", status, out, 201, `{"snapshotID":"sb1:ck2","names":[]}`)
	status, out = call("POST", "/sandboxes/nope/snapshots", `{}`)
	want("snapshot of an unknown sandbox", status, nil, 404, "")

	// Only checkpoints taken on purpose are snapshots, not those of sleep.
	status, out = call("GET", "/snapshots", "")
	want("list", status, out, 200, `[{"snapshotID":"sb1:ck1","names":["v1"]}]`)
	for _, name := range []string{"v1", "ck1", "sb1:ck1"} {
		status, out = call("GET", "/snapshots?name="+name, "")
		want("list by name "+name, status, out, 200, `[{"snapshotID":"sb1:ck1","names":["v1"]}]`)
	}
	status, out = call("GET", "/snapshots?name=v1-does-not-exist", "")
	want("list by an unknown name", status, out, 200, `[]`)
	status, out = call("GET", "/snapshots?sandboxID=sb1", "")
	want("list of a sandbox", status, out, 200, `[{"snapshotID":"sb1:ck1","names":["v1"]}]`)
	status, out = call("GET", "/snapshots?sandboxID=nope", "")
	want("list of an unknown sandbox", status, out, 200, `[]`)
	if status, _ := call("GET", "/snapshots?limit=0", ""); status != 400 {
		t.Errorf("limit 0: %d", status)
	}

	// A sandbox from a snapshot is den's create from the checkpoint.
	status, _ = call("POST", "/v2/sandboxes", `{"templateID":"sb1:ck1","metadata":{"k":"v"}}`)
	var req api.CreateSandboxRequest
	json.Unmarshal([]byte(den.last("POST /v1/sandboxes").body), &req)
	if status != 201 || req.From != "sb1:ck1" || req.Image != "" || req.Labels["k"] != "v" {
		t.Errorf("create from a snapshot: %d, asked den for %+v", status, req)
	}
	n := len(den.calls())
	status, out = call("POST", "/v2/sandboxes", `{"templateID":"sb1:ck1","envVars":{"A":"1"}}`)
	if status != 400 || !strings.Contains(out.(map[string]any)["message"].(string), "env vars") || len(den.calls()) != n {
		t.Errorf("create from a snapshot with env vars: %d %v", status, out)
	}

	status, _ = call("DELETE", "/templates/sb1:ck1", "")
	if status != 204 || den.last("DELETE /v1/sandboxes/sb1/checkpoints/ck1").path == "" {
		t.Errorf("delete a snapshot: %d", status)
	}
	status, out = call("DELETE", "/templates/nope:ck1", "")
	want("delete another's or an unknown snapshot", status, nil, 404, "")
	n = len(den.calls())
	status, out = call("DELETE", "/templates/base", "")
	if status != 400 || !strings.Contains(out.(map[string]any)["message"].(string), "den image rm") || len(den.calls()) != n {
		t.Errorf("delete a template: %d %v", status, out)
	}

	status, out = call("GET", "/templates", "")
	list, _ := out.([]any)
	if status != 200 || len(list) != 2 {
		t.Fatalf("templates: %d %v", status, out)
	}
	base := list[0].(map[string]any)
	if base["templateID"] != "base" || base["buildStatus"] != "ready" || base["diskSizeMB"] != float64(300) ||
		!jsonEqual(base["aliases"], []string{"base", "e2b-base"}) || list[1].(map[string]any)["templateID"] != "python" {
		t.Errorf("templates: %v", list)
	}
	status, out = call("GET", "/templates/aliases/base", "")
	if status != 200 || den.last("GET /v1/images/e2b-base").path == "" {
		t.Errorf("template alias: %d %v", status, out)
	}
}
