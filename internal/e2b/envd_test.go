package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/den-dev/den/api"
	fspb "github.com/den-dev/den/internal/e2b/envdpb/filesystem"
	"github.com/den-dev/den/internal/e2b/envdpb/filesystem/filesystemconnect"
	procpb "github.com/den-dev/den/internal/e2b/envdpb/process"
	"github.com/den-dev/den/internal/e2b/envdpb/process/processconnect"
	"github.com/den-dev/den/internal/inproc"
)

// fakeSandboxAPI answers den's API for one running sandbox, sb1, with
// one running process (pid 7, run r1): its stdin is recorded, and its
// files/watch streams what is sent on changes.
type fakeSandboxAPI struct {
	changes chan api.WatchEvent

	mu    sync.Mutex
	stdin []string
	// statAs is the as= of each files/stat ("-" when absent).
	statAs []string
	// made says each write and mkdir asked of den; a path made by
	// mkdir (under /0, which does not exist) is found by stat after.
	made []string
	dirs map[string]bool
}

func (f *fakeSandboxAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/v1/sandboxes/sb1":
		json.NewEncoder(w).Encode(api.Sandbox{ID: "sb1", Name: "e2b-x", Image: "e2b-base", State: api.StateRunning, Generation: 1})
	case p == "/v1/sandboxes/sb1/runs":
		json.NewEncoder(w).Encode(api.RunList{Runs: []api.Run{{ID: "r1", Sandbox: "sb1", Generation: 1, PID: 7, Argv: []string{"cat"}, Status: api.RunRunning}}})
	case p == "/v1/sandboxes/sb1/runs/r1/stdin":
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.stdin = append(f.stdin, string(b))
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "/v1/sandboxes/sb1/files/stat":
		as := "-"
		if r.URL.Query().Has("as") {
			as = r.URL.Query().Get("as")
		}
		f.mu.Lock()
		f.statAs = append(f.statAs, as)
		made := f.dirs[r.URL.Query().Get("path")]
		f.mu.Unlock()
		if made {
			json.NewEncoder(w).Encode(api.FileInfo{Name: "d", Path: r.URL.Query().Get("path"), Type: "dir"})
			return
		}
		if strings.HasPrefix(r.URL.Query().Get("path"), "/0/") {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: "no such file"}})
			return
		}
		json.NewEncoder(w).Encode(api.FileInfo{Name: "a.txt", Path: r.URL.Query().Get("path"), Type: "file", Xattrs: map[string]string{"user.e2b.k": "v"}})
	case p == "/v1/sandboxes/sb1/files/content" && r.Method == http.MethodPut:
		io.Copy(io.Discard, r.Body)
		q := r.URL.Query()
		f.record(fmt.Sprintf("write %s as=%s parents=%s parents_by_root=%s", q.Get("path"), q.Get("as"), q.Get("parents"), q.Get("parents_by_root")))
		w.WriteHeader(http.StatusNoContent)
	case p == "/v1/sandboxes/sb1/files/mkdir":
		var req api.MkdirRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.record(fmt.Sprintf("mkdir %s as=%s parents=%t parents_by_root=%t user=%s", req.Path, r.URL.Query().Get("as"), req.Parents, req.ParentsByRoot, req.User))
		f.mu.Lock()
		if f.dirs == nil {
			f.dirs = map[string]bool{}
		}
		f.dirs[req.Path] = true
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "/v1/sandboxes/sb1/files/watch":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev, ok := <-f.changes:
				if !ok {
					return // the directory went away
				}
				json.NewEncoder(w).Encode(ev)
				w.(http.Flusher).Flush()
			}
		}
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: "no route " + p}})
	}
}

func (f *fakeSandboxAPI) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made = append(f.made, call)
}

func (f *fakeSandboxAPI) inputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stdin...)
}

// envdHeaders sends every request to sandbox sb1 with a den token.
type envdHeaders struct{}

func (envdHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(headerSandboxID, "sb1")
	r.Header.Set(headerAccessToken, token)
	return http.DefaultTransport.RoundTrip(r)
}

func newEnvdDoor(t *testing.T) (*fakeSandboxAPI, *http.Client, string) {
	t.Helper()
	den := &fakeSandboxAPI{changes: make(chan api.WatchEvent, 16)}
	self := inproc.New()
	self.Serve(den, den)
	t.Cleanup(func() { self.Close() })
	srv := httptest.NewServer(New(Config{API: self}))
	t.Cleanup(srv.Close)
	return den, &http.Client{Transport: envdHeaders{}}, srv.URL
}

// StreamInput: a start naming the process, then data, each passed on as
// the process's input in order; a stream that names none is refused.
func TestStreamInput(t *testing.T) {
	den, hc, url := newEnvdDoor(t)
	c := processconnect.NewProcessClient(hc, url, connect.WithProtoJSON())
	ctx := context.Background()
	sel := &procpb.ProcessSelector{Selector: &procpb.ProcessSelector_Pid{Pid: 7}}
	stream := c.StreamInput(ctx)
	for _, m := range []*procpb.StreamInputRequest{
		{Event: &procpb.StreamInputRequest_Start{Start: &procpb.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &procpb.StreamInputRequest_Data{Data: &procpb.StreamInputRequest_DataEvent{Input: &procpb.ProcessInput{Input: &procpb.ProcessInput_Stdin{Stdin: []byte("one ")}}}}},
		{Event: &procpb.StreamInputRequest_Keepalive{Keepalive: &procpb.StreamInputRequest_KeepAlive{}}},
		{Event: &procpb.StreamInputRequest_Data{Data: &procpb.StreamInputRequest_DataEvent{Input: &procpb.ProcessInput{Input: &procpb.ProcessInput_Pty{Pty: []byte("two")}}}}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if got := den.inputs(); strings.Join(got, "|") != "one |two" {
		t.Errorf("the process got %q", got)
	}

	for name, msgs := range map[string][]*procpb.StreamInputRequest{
		"data first": {{Event: &procpb.StreamInputRequest_Data{Data: &procpb.StreamInputRequest_DataEvent{Input: &procpb.ProcessInput{}}}}},
		"no start":   {},
		"unknown pid": {{Event: &procpb.StreamInputRequest_Start{Start: &procpb.StreamInputRequest_StartEvent{
			Process: &procpb.ProcessSelector{Selector: &procpb.ProcessSelector_Pid{Pid: 999}}}}}},
	} {
		stream := c.StreamInput(ctx)
		for _, m := range msgs {
			stream.Send(m)
		}
		_, err := stream.CloseAndReceive()
		want := connect.CodeInvalidArgument
		if name == "unknown pid" {
			want = connect.CodeNotFound
		}
		if connect.CodeOf(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if got := den.inputs(); len(got) != 2 {
		t.Errorf("refused streams fed the process: %q", got)
	}
}

// Watchers: created, polled for what changed since the poll before (with
// entries when asked), removed; a watcher whose directory went reports
// it once its last events are taken.
func TestWatchers(t *testing.T) {
	den, hc, url := newEnvdDoor(t)
	c := filesystemconnect.NewFilesystemClient(hc, url, connect.WithProtoJSON())
	ctx := context.Background()
	created, err := c.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "dir", Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetWatcherId()
	poll := func() ([]*fspb.FilesystemEvent, error) {
		res, err := c.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetEvents(), nil
	}
	den.changes <- api.WatchEvent{Name: "a.txt", Op: "create"}
	den.changes <- api.WatchEvent{Name: "gone.txt", Op: "remove"}
	var got []*fspb.FilesystemEvent
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		evs, err := poll()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs...)
	}
	if len(got) != 2 || got[0].GetName() != "a.txt" || got[0].GetType() != fspb.EventType_EVENT_TYPE_CREATE ||
		got[0].GetEntry().GetPath() != "/home/user/dir/a.txt" || got[0].GetEntry().GetMetadata()["k"] != "v" ||
		got[1].GetType() != fspb.EventType_EVENT_TYPE_REMOVE || got[1].GetEntry() != nil {
		t.Fatalf("events %v", got)
	}
	if evs, err := poll(); err != nil || len(evs) != 0 {
		t.Errorf("a poll with nothing new: %v %v", evs, err)
	}

	// Another watcher; its directory goes: the poll says so, then it is
	// gone.
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := poll(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("polling a removed watcher: %v", err)
	}
	created, err = c.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "/tmp/x"}))
	if err != nil {
		t.Fatal(err)
	}
	id = created.Msg.GetWatcherId()
	close(den.changes)
	var last error
	for time.Now().Before(deadline) {
		if _, last = poll(); last != nil {
			break
		}
	}
	var cerr *connect.Error
	if !errors.As(last, &cerr) || cerr.Code() != connect.CodeNotFound || !strings.Contains(cerr.Message(), "removed") {
		t.Errorf("polling a watcher whose directory went: %v", last)
	}
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("removing an unknown watcher: %v", err)
	}
}

// File RPCs are den's file calls made as the user the caller acts as:
// Basic auth's, else the image's default (user on e2b-base); root's are
// den's plain calls, which any den-init serves.
func TestFileCallsActAsTheUser(t *testing.T) {
	den, hc, url := newEnvdDoor(t)
	c := filesystemconnect.NewFilesystemClient(hc, url, connect.WithProtoJSON())
	for _, user := range []string{"user", "", "root", "alice", "0"} {
		req := connect.NewRequest(&fspb.StatRequest{Path: "/a.txt"})
		if user != "" {
			req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		}
		if _, err := c.Stat(context.Background(), req); err != nil {
			t.Fatalf("stat as %q: %v", user, err)
		}
	}
	den.mu.Lock()
	defer den.mu.Unlock()
	if want := []string{"user", "user", "-", "alice", "-"}; !slices.Equal(den.statAs, want) {
		t.Errorf("stats made as %q, want %q", den.statAs, want)
	}
}

// Writes and mkdirs as a user have den make the missing directories as
// root and give them to the user, as envd does (writing /0/x.txt as
// user works in E2B), while the file itself is written as the user.
func TestMissingParentsAreMadeByRoot(t *testing.T) {
	den, hc, url := newEnvdDoor(t)
	for _, user := range []string{"user", "root"} {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		part, _ := mw.CreateFormFile("file", "/0/x.txt")
		part.Write([]byte("zero"))
		mw.Close()
		resp, err := hc.Post(url+"/files?path=/0/x.txt&username="+user, mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upload as %s: %d %s", user, resp.StatusCode, b)
		}
		c := filesystemconnect.NewFilesystemClient(hc, url, connect.WithProtoJSON())
		req := connect.NewRequest(&fspb.MakeDirRequest{Path: "/0/" + user + "/d"})
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		if _, err := c.MakeDir(context.Background(), req); err != nil {
			t.Fatalf("makeDir as %s: %v", user, err)
		}
	}
	den.mu.Lock()
	defer den.mu.Unlock()
	want := []string{
		"write /0/x.txt as=user parents=true parents_by_root=true",
		"mkdir /0/user/d as=user parents=true parents_by_root=true user=user",
		"write /0/x.txt as= parents=true parents_by_root=true",
		"mkdir /0/root/d as= parents=true parents_by_root=true user=root",
	}
	if !slices.Equal(den.made, want) {
		t.Errorf("den was asked:\n%s\nwant:\n%s", strings.Join(den.made, "\n"), strings.Join(want, "\n"))
	}
}
