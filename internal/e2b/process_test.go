package e2b

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/den-dev/den/api"
	procpb "github.com/den-dev/den/internal/e2b/envdpb/process"
	"github.com/den-dev/den/internal/e2b/envdpb/process/processconnect"
	"github.com/den-dev/den/internal/inproc"
)

// taggedAPI answers den's API for sandbox sb1 running three processes,
// newest first: pid 7 (run r7) and pid 8 (r8), both tagged "web", and
// pid 9 (r9) without a tag. It records signals and exec requests, and
// refuses every exec once recorded.
type taggedAPI struct {
	mu      sync.Mutex
	signals []string
	execs   []api.ExecRequest
}

func (f *taggedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/v1/sandboxes/sb1":
		json.NewEncoder(w).Encode(api.Sandbox{ID: "sb1", Name: "e2b-x", Image: "e2b-base", State: api.StateRunning, Generation: 1})
	case p == "/v1/sandboxes/sb1/runs":
		web := map[string]string{tagLabel: "web"}
		json.NewEncoder(w).Encode(api.RunList{Runs: []api.Run{
			{ID: "r7", Sandbox: "sb1", Generation: 1, PID: 7, Argv: []string{"serve", "2"}, Labels: web, Status: api.RunRunning},
			{ID: "r8", Sandbox: "sb1", Generation: 1, PID: 8, Argv: []string{"serve", "1"}, Labels: web, Status: api.RunRunning},
			{ID: "r9", Sandbox: "sb1", Generation: 1, PID: 9, Argv: []string{"cat"}, Status: api.RunRunning},
		}})
	case strings.HasPrefix(p, "/v1/sandboxes/sb1/runs/") && strings.HasSuffix(p, "/signal"):
		f.mu.Lock()
		f.signals = append(f.signals, strings.Split(p, "/")[5])
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "/v1/sandboxes/sb1/exec":
		var req api.ExecRequest
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		f.mu.Lock()
		f.execs = append(f.execs, req)
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeConflict, Message: "refused by the test"}})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: "no route " + p}})
	}
}

// Process tags: Start gives the run the label, List shows it, and a
// selector by tag names the newest running process that carries it.
func TestProcessTags(t *testing.T) {
	den := &taggedAPI{}
	self := inproc.New()
	self.Serve(den, den)
	t.Cleanup(func() { self.Close() })
	srv := httptest.NewServer(New(Config{API: self}))
	t.Cleanup(srv.Close)
	c := processconnect.NewProcessClient(&http.Client{Transport: envdHeaders{}}, srv.URL, connect.WithProtoJSON())
	ctx := context.Background()

	list, err := c.List(ctx, connect.NewRequest(&procpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list.Msg.GetProcesses() {
		got = append(got, p.GetConfig().GetCmd()+":"+p.GetTag())
		if p.GetPid() == 9 && p.Tag != nil {
			t.Errorf("pid 9 has no tag, listed as %q", p.GetTag())
		}
	}
	if !slices.Equal(got, []string{"serve:web", "serve:web", "cat:"}) {
		t.Errorf("listed %q", got)
	}

	byTag := func(tag string) *procpb.ProcessSelector {
		return &procpb.ProcessSelector{Selector: &procpb.ProcessSelector_Tag{Tag: tag}}
	}
	kill := func(sel *procpb.ProcessSelector) error {
		_, err := c.SendSignal(ctx, connect.NewRequest(&procpb.SendSignalRequest{Process: sel, Signal: procpb.Signal_SIGNAL_SIGKILL}))
		return err
	}
	if err := kill(byTag("web")); err != nil {
		t.Fatal(err)
	}
	if err := kill(&procpb.ProcessSelector{Selector: &procpb.ProcessSelector_Pid{Pid: 9}}); err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[*procpb.ProcessSelector]connect.Code{
		byTag("nope"): connect.CodeNotFound,
		byTag(""):     connect.CodeInvalidArgument,
		{}:            connect.CodeInvalidArgument,
	} {
		if err := kill(sel); connect.CodeOf(err) != want {
			t.Errorf("signal to %v: %v, want %v", sel, err, want)
		}
	}
	den.mu.Lock()
	signals := slices.Clone(den.signals)
	den.mu.Unlock()
	if !slices.Equal(signals, []string{"r7", "r9"}) {
		t.Errorf("signals went to %q, want the newest tagged run r7, then r9", signals)
	}

	stream, err := c.Start(ctx, connect.NewRequest(&procpb.StartRequest{
		Process: &procpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "serve"}}, Tag: ptr("job"), Stdin: ptr(true)}))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	if connect.CodeOf(stream.Err()) != connect.CodeFailedPrecondition {
		t.Errorf("start refused by den: %v", stream.Err())
	}
	den.mu.Lock()
	defer den.mu.Unlock()
	if len(den.execs) != 1 || den.execs[0].Labels[tagLabel] != "job" || len(den.execs[0].Labels) != 1 {
		t.Errorf("start asked den for %+v, want the label tag=job", den.execs)
	}
}
