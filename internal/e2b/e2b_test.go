package e2b

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	pb "github.com/den-dev/den/internal/e2b/envdpb/filesystem"
	"github.com/den-dev/den/internal/inproc"
)

const token = "den_0123456789ab_" + "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f"

func TestKeys(t *testing.T) {
	key := E2BKey(token)
	if key != "e2b_0123456789ab0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f" {
		t.Fatalf("E2BKey = %q", key)
	}
	if got := denToken(key); got != token {
		t.Errorf("denToken(%q) = %q", key, got)
	}
	for _, k := range []string{token, "e2b_0123", "e2b_" + strings.Repeat("zz", 38), "whatever"} {
		if got := denToken(k); got != k {
			t.Errorf("denToken(%q) = %q, want it unchanged", k, got)
		}
	}
	if E2BKey("nope") != "" {
		t.Error("E2BKey of a non-token")
	}
}

func TestClaims(t *testing.T) {
	d := New(Config{API: inproc.New()})
	for path, want := range map[string]bool{
		"/sandboxes": true, "/sandboxes/abc/pause": true, "/v2/sandboxes": true, "/v2/sandboxes/x/connect": true,
		"/v1/sandboxes": false, "/mcp": false, "/health": false, "/sandboxesx": false,
	} {
		r := httptest.NewRequest("GET", path, nil)
		if got := d.Claims(r); got != want {
			t.Errorf("Claims(%s) = %v", path, got)
		}
	}
	r := httptest.NewRequest("POST", "/process.Process/List", nil)
	r.Header.Set(headerSandboxID, "abc")
	if !d.Claims(r) {
		t.Error("an envd call is not claimed")
	}
}

// The metadata filter arrives escaped three times over, as the SDK sends
// it: {"a b": "x&y", "k": "v"}.
func TestParseListMetadata(t *testing.T) {
	inner := url.Values{}
	inner.Set(url.QueryEscape("a b"), url.QueryEscape("x&y"))
	inner.Set("k", "v")
	q, err := parseList(url.Values{"metadata": {inner.Encode()}, "state": {"running,paused"}, "order": {"asc"}, "limit": {"5"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.metadata.Get("a b") != "x&y" || q.metadata.Get("k") != "v" || !q.asc || q.limit != 5 || !slices.Equal(q.states, []string{"running", "paused"}) {
		t.Errorf("parsed %+v", q)
	}
	for _, bad := range []url.Values{{"state": {"dead"}}, {"limit": {"0"}}, {"limit": {"101"}}, {"order": {"up"}},
		{"startedAfter": {"yesterday"}}, {"nextToken": {"!!"}}} {
		if _, err := parseList(bad, nil); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}

func TestListFiltersAndPages(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	sbs := []api.Sandbox{
		{ID: "a", Image: "e2b-base", State: api.StateRunning, CreatedAt: at(1), Labels: map[string]string{"team": "x"}},
		{ID: "b", Image: "debian", State: api.StateHibernated, CreatedAt: at(2), Labels: map[string]string{"team": "x"}},
		{ID: "c", Image: "e2b-base", State: api.StatePaused, CreatedAt: at(3)},
		{ID: "d", Image: "e2b-base", State: api.StateDestroyed, CreatedAt: at(4)},
		{ID: "e", Image: "e2b-base", State: api.StateStopped, CreatedAt: at(5), Labels: map[string]string{"team": "x"}},
	}
	ids := func(q listQuery) []string {
		page, _ := q.apply(sbs)
		var out []string
		for _, sb := range page {
			out = append(out, sb.ID)
		}
		return out
	}
	all := listQuery{limit: 100}
	tests := []struct {
		name string
		q    listQuery
		want []string
	}{
		{"newest first, no destroyed", all, []string{"e", "c", "b", "a"}},
		{"paused", listQuery{limit: 100, states: []string{statePaused}}, []string{"e", "c", "b"}},
		{"running", listQuery{limit: 100, states: []string{stateRunning}}, []string{"a"}},
		{"metadata", listQuery{limit: 100, metadata: url.Values{"team": {"x"}}}, []string{"e", "b", "a"}},
		{"template", listQuery{limit: 100, template: "base"}, []string{"e", "c", "a"}},
		{"image", listQuery{limit: 100, template: "debian"}, []string{"b"}},
		{"started after, inclusive", listQuery{limit: 100, startedAfter: at(3), asc: true}, []string{"c", "e"}},
	}
	for _, tt := range tests {
		if got := ids(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Pages of two, following the token.
	var got []string
	q := listQuery{limit: 2}
	for range 5 {
		page, next := q.apply(sbs)
		for _, sb := range page {
			got = append(got, sb.ID)
		}
		if next == nil {
			break
		}
		cur, ok := parseCursor(next.token())
		if !ok {
			t.Fatalf("token %q", next.token())
		}
		q.after = &cur
	}
	if !slices.Equal(got, []string{"e", "c", "b", "a"}) {
		t.Errorf("pages: %v", got)
	}
}

func TestTimeoutPolicy(t *testing.T) {
	d := &Door{cfg: Config{MinTimeout: time.Minute}}
	kill := d.timeoutPolicy(killAtTimeout, 0, 300*time.Second)
	if *kill.TTL != "5m" || *kill.PauseAfter != "0" || *kill.HibernateAfter != "0" {
		t.Errorf("kill: %+v", kill)
	}
	if short := d.timeoutPolicy(killAtTimeout, 0, 10*time.Second); *short.TTL != "1m" {
		t.Errorf("a timeout under dend's floor: ttl %s", *short.TTL)
	}
	pause := d.timeoutPolicy(pauseAtTimeout, 0, 90*time.Second)
	if *pause.TTL != "0" || *pause.HibernateAfter != "1m30s" || *pause.PauseAfter != "0" {
		t.Errorf("pause: %+v", pause)
	}
	// dend refuses a hibernate_after under its floor: E2B's timeout is
	// rounded up to it, as the TTL is.
	if short := d.timeoutPolicy(pauseAtTimeout, 0, 10*time.Second); *short.HibernateAfter != "1m" {
		t.Errorf("an auto-pause timeout under dend's floor: hibernate_after %s", *short.HibernateAfter)
	}

	running := func(ttl, hib, ran string) *api.Sandbox {
		return &api.Sandbox{RunningFor: ran, Policy: api.Policy{TTL: &ttl, HibernateAfter: &hib}}
	}
	sb := running("10m", "0", "4m")
	if p := d.retimePolicy(sb, 2*time.Minute, false); p == nil || *p.TTL != "6m" {
		t.Errorf("setTimeout shortens: %+v", p)
	}
	if p := d.retimePolicy(sb, 2*time.Minute, true); p != nil {
		t.Errorf("connect never shortens: %+v", p)
	}
	if p := d.retimePolicy(sb, 10*time.Minute, true); p == nil || *p.TTL != "14m" {
		t.Errorf("connect extends: %+v", p)
	}
	if p := d.retimePolicy(running("0", "5m", "1h"), time.Minute, false); p == nil || *p.HibernateAfter != "1m" || p.TTL != nil {
		t.Errorf("pause mode: %+v", p)
	}
	if p := d.retimePolicy(running("0", "5m", "1h"), 10*time.Second, false); p == nil || *p.HibernateAfter != "1m" {
		t.Errorf("setTimeout under dend's floor in pause mode: %+v", p)
	}

	// Pause without memory stops the sandbox at its timeout, its files kept.
	no, yes := false, true
	if a := timeoutAction(&yes, &no); a != stopAtTimeout {
		t.Errorf("autoPause without memory: %v", a)
	}
	if timeoutAction(&yes, nil) != pauseAtTimeout || timeoutAction(nil, &no) != killAtTimeout {
		t.Errorf("autoPause alone pauses, none kills")
	}
	stop := d.timeoutPolicy(stopAtTimeout, 0, 90*time.Second)
	if *stop.StopAfter != "1m30s" || *stop.HibernateAfter != "0" || *stop.TTL != "0" || *stop.PauseAfter != "0" {
		t.Errorf("stop: %+v", stop)
	}
	stopping := &api.Sandbox{Policy: api.Policy{TTL: new("0"), HibernateAfter: new("0"), StopAfter: new("5m")}}
	if p := d.retimePolicy(stopping, 10*time.Minute, false); p == nil || p.StopAfter == nil || *p.StopAfter != "10m" || p.HibernateAfter != nil {
		t.Errorf("setTimeout in stop mode: %+v", p)
	}
	if p := d.retimePolicy(stopping, 2*time.Minute, true); p != nil {
		t.Errorf("connect never shortens a stop: %+v", p)
	}

	// The floor is the door's, refused with its value in the words; by
	// default a second, so E2B's setTimeout(5000) means five seconds.
	five := int64(5)
	if _, err := d.seconds(&five, 0); err == nil || !strings.Contains(err.Error(), "shorter than 1m0s") || !strings.Contains(wireError(err).Hint, "--e2b-min-timeout") {
		t.Errorf("a timeout under the door's floor: %v", err)
	}
	byDefault := &Door{}
	if got, err := byDefault.seconds(&five, 0); err != nil || got != 5*time.Second {
		t.Errorf("a 5s timeout by default: %v %v", got, err)
	}
	if p := byDefault.timeoutPolicy(killAtTimeout, 0, 5*time.Second); *p.TTL != "5s" {
		t.Errorf("a 5s timeout by default: ttl %s", *p.TTL)
	}
	if p := byDefault.timeoutPolicy(killAtTimeout, 0, 0); *p.TTL != "1s" {
		t.Errorf("a timeout of 0 takes the floor: ttl %s", *p.TTL)
	}
}

func TestEntryInfo(t *testing.T) {
	mt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		fi                 api.FileInfo
		linkType           string
		perms, owner, link string
		typ                pb.FileType
	}{
		{api.FileInfo{Name: "f", Path: "/h/f", Type: "file", Mode: 0o644, Owner: "user", Group: "user"}, "", "-rw-r--r--", "user", "", pb.FileType_FILE_TYPE_FILE},
		{api.FileInfo{Name: "d", Path: "/h/d", Type: "dir", Mode: 0o755, UID: 1234}, "", "drwxr-xr-x", "1234", "", pb.FileType_FILE_TYPE_DIRECTORY},
		{api.FileInfo{Name: "l", Path: "/h/x/l", Type: "symlink", Mode: 0o777, Target: "../f"}, "file", "Lrwxrwxrwx", "0", "/h/f", pb.FileType_FILE_TYPE_FILE},
		{api.FileInfo{Name: "ld", Path: "/h/ld", Type: "symlink", Mode: 0o777, Target: "/h/d/"}, "dir", "Lrwxrwxrwx", "0", "/h/d", pb.FileType_FILE_TYPE_DIRECTORY},
		{api.FileInfo{Name: "dangling", Path: "/h/dangling", Type: "symlink", Mode: 0o777, Target: "gone"}, "", "Lrwxrwxrwx", "0", "/h/gone", pb.FileType_FILE_TYPE_UNSPECIFIED},
		{api.FileInfo{Name: "s", Path: "/usr/bin/s", Type: "file", Mode: 0o4755}, "", "urwxr-xr-x", "0", "", pb.FileType_FILE_TYPE_FILE},
		{api.FileInfo{Name: "m", Path: "/h/m", Type: "file", Mode: 0o600, Owner: "user", Xattrs: map[string]string{"user.e2b.k": "v"}}, "", "-rw-------", "user", "", pb.FileType_FILE_TYPE_FILE},
	}
	for _, tt := range tests {
		tt.fi.ModTime = mt
		e := entryInfo(&tt.fi, tt.linkType)
		if e.Type != tt.typ || e.Permissions != tt.perms || e.Owner != tt.owner || e.GetSymlinkTarget() != tt.link || e.Mode != tt.fi.Mode&0o777 || !e.ModifiedTime.AsTime().Equal(mt) ||
			len(e.Metadata) != len(tt.fi.Xattrs) || e.Metadata["k"] != tt.fi.Xattrs["user.e2b.k"] {
			t.Errorf("%s: %+v", tt.fi.Path, e)
		}
	}
}

func TestErrorShapes(t *testing.T) {
	den := func(code, msg string) error {
		return &client.Error{API: &api.Error{Code: code, Message: msg, Hint: "do this"}}
	}
	tests := []struct {
		err    error
		status int
		rpc    connect.Code
	}{
		{den(api.CodeNotFound, "no sandbox x"), 404, connect.CodeNotFound},
		{den(api.CodeInvalid, "bad"), 400, connect.CodeInvalidArgument},
		{den(api.CodeInvalid, `starting "bash": no user "bob" in the sandbox`), 401, connect.CodeUnauthenticated},
		{den(api.CodeUnavailable, "no space left in sandbox"), 507, connect.CodeUnavailable},
		{den(api.CodeInvalid, `"/etc/shadow": permission denied`), 403, connect.CodePermissionDenied},
		{den(api.CodeConflict, "is paused"), 409, connect.CodeFailedPrecondition},
		{den(api.CodeQuotaExceeded, "quota"), 403, connect.CodePermissionDenied},
		{den(api.CodeUnauthorized, "expired"), 401, connect.CodeUnauthenticated},
		{io.ErrUnexpectedEOF, 500, connect.CodeInternal},
	}
	for _, tt := range tests {
		e := wireError(tt.err)
		if got := httpStatus(e); got != tt.status {
			t.Errorf("%v: status %d, want %d", tt.err, got, tt.status)
		}
		var ce *connect.Error
		if rpc := rpcError(tt.err); !asConnect(rpc, &ce) || ce.Code() != tt.rpc {
			t.Errorf("%v: rpc %v, want %v", tt.err, rpc, tt.rpc)
		}
	}
	if m := message(wireError(den(api.CodeInvalid, "bad"))); m != "bad\nhint: do this" {
		t.Errorf("message %q", m)
	}
}

// File parts keep the directories of their names, which Part.FileName
// drops.
func TestPartFileName(t *testing.T) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, name := range []string{"a/b/c.txt", "/abs/d.txt"} {
		w, _ := mw.CreateFormFile("file", name)
		io.WriteString(w, "x")
	}
	mw.Close()
	mr := multipart.NewReader(&body, mw.Boundary())
	var got []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		got = append(got, partFileName(p))
	}
	if !slices.Equal(got, []string{"a/b/c.txt", "/abs/d.txt"}) {
		t.Errorf("names %q", got)
	}
}

// The control plane asks den's API for the right things, as the caller.
// controlDoor is a door over a fakeAPI, and a call to its control plane
// with the key of token: the status and the JSON answered.
func controlDoor(t *testing.T) (*Door, *fakeAPI, func(method, path, body string) (int, map[string]any)) {
	den := newFakeAPI()
	d := doorOver(t, den, Config{})
	return d, den, func(method, path, body string) (int, map[string]any) {
		return controlCall[map[string]any](d, method, path, body)
	}
}

func TestControlPlane(t *testing.T) {
	d, den, call := controlDoor(t)

	status, out := call("POST", "/v2/sandboxes", `{"templateID":"base","timeout":120,"metadata":{"k":"v"},"envVars":{"A":"1"}}`)
	if status != 201 || out["sandboxID"] != "sb1" || out["envdAccessToken"] != token || out["envdVersion"] != envdVersion {
		t.Fatalf("create: %d %v", status, out)
	}
	create := den.last("POST /v1/sandboxes")
	var req api.CreateSandboxRequest
	json.Unmarshal([]byte(create.body), &req)
	if req.Image != "e2b-base" || !strings.HasPrefix(req.Name, "e2b-") || req.Labels["k"] != "v" || req.Env["A"] != "1" ||
		*req.Policy.TTL != "2m" || *req.Policy.HibernateAfter != "0" || !req.Ephemeral || create.auth != "Bearer "+token {
		t.Errorf("create asked den for %+v (auth %q)", req, create.auth)
	}

	den.state = api.StateRunning
	if status, _ := call("POST", "/sandboxes/sb1/timeout", `{"timeout":60}`); status != 204 || !strings.Contains(den.last("PATCH /v1/sandboxes/sb1/policy").body, `"ttl":"11m"`) {
		t.Errorf("timeout: %d %+v", status, den.last("PATCH /v1/sandboxes/sb1/policy"))
	}
	if status, _ := call("POST", "/sandboxes/sb1/pause", ``); status != 204 || den.last("POST /v1/sandboxes/sb1/hibernate").path == "" {
		t.Errorf("pause: %d", status)
	}
	if status, _ := call("POST", "/sandboxes/sb1/pause", `{"memory":false}`); status != 204 || den.last("POST /v1/sandboxes/sb1/stop").path == "" {
		t.Errorf("pause without memory: %d", status)
	}
	den.state = api.StateHibernated
	if status, out := call("POST", "/sandboxes/sb1/pause", ``); status != 409 || out["code"] != float64(409) {
		t.Errorf("pausing a paused sandbox: %d %v", status, out)
	}
	if status, out := call("POST", "/v2/sandboxes/sb1/connect", `{"timeout":600}`); status != 201 || out["sandboxID"] != "sb1" || den.last("POST /v1/sandboxes/sb1/resume").path == "" {
		t.Errorf("connect to a paused sandbox: %d %v", status, out)
	}
	// onResume: reboot of a sandbox paused with its memory: refused, in
	// den's words, and nothing done.
	n0 := len(den.calls())
	if status, out := call("POST", "/v2/sandboxes/sb1/connect", `{"timeout":600,"memory":false}`); status != 400 || out["code"] != float64(400) ||
		!strings.Contains(out["message"].(string), "hint: connect without onResume") {
		t.Errorf("connect with memory false to a sandbox paused with it: %d %v", status, out)
	}
	for _, c := range den.calls()[n0:] {
		if c.route != "GET /v1/sandboxes/sb1" {
			t.Errorf("a refused reboot asked den for %s", c.route)
		}
	}
	// Connect while the timeout's pause is under way (running, pending
	// hibernate): a resume, which den runs once the pause is done.
	den.state, den.pending, den.wakes = api.StateRunning, "hibernate", true
	n0 = len(den.calls())
	status, out = call("POST", "/v2/sandboxes/sb1/connect", `{"timeout":600}`)
	if status != 201 || out["sandboxID"] != "sb1" || !slices.ContainsFunc(den.calls()[n0:], func(c fakeCall) bool { return c.route == "POST /v1/sandboxes/sb1/resume" }) {
		t.Errorf("connect during a pause: %d %v", status, out)
	}
	den.wakes = false
	den.state = api.StateStopped
	if status, _ := call("POST", "/v2/sandboxes/sb1/connect", `{"memory":false}`); status != 201 || den.last("POST /v1/sandboxes/sb1/start").path == "" {
		t.Errorf("connect with memory false to a sandbox paused without it: %d", status)
	}
	if status, _ := call("DELETE", "/sandboxes/sb1", ``); status != 204 || den.last("DELETE /v1/sandboxes/sb1").query != "force=true" {
		t.Errorf("kill: %d", status)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/sandboxes/nope", ""}, {"DELETE", "/sandboxes/nope", ""}, {"POST", "/sandboxes/nope/timeout", `{"timeout":1}`},
		{"POST", "/v2/sandboxes/nope/connect", `{}`}, {"POST", "/sandboxes/nope/pause", `{}`},
	} {
		if status, out := call(c.method, c.path, c.body); status != 404 || out["code"] != float64(404) || !strings.Contains(out["message"].(string), "nope") {
			t.Errorf("%s %s of an unknown sandbox: %d %v", c.method, c.path, status, out)
		}
	}
	n := len(den.calls())
	for _, body := range []string{`{`, `{"timeout":-1}`, `{"timeout":"x"}`, `{"mcp":{"x":{}}}`, `{"volumeMounts":[{}]}`} {
		if status, out := call("POST", "/v2/sandboxes", body); status != 400 || out["code"] != float64(400) {
			t.Errorf("create with %s: %d %v", body, status, out)
		}
	}
	if len(den.calls()) != n {
		t.Errorf("bad input reached den: %v", den.calls()[n:])
	}
	r := httptest.NewRequest("GET", "/v2/sandboxes", nil)
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	if w.Code != 401 || !strings.Contains(w.Body.String(), `"code":401`) {
		t.Errorf("without a key: %d %s", w.Code, w.Body)
	}
}

// SDKs before 2.0 address a sandbox as ID-CLIENTID: E2B's API reads that
// as ID, and so does den when no sandbox is named ID-den.
func TestClientIDSuffix(t *testing.T) {
	_, den, call := controlDoor(t)
	if status, out := call("GET", "/sandboxes/sb1-den", ""); status != 200 || out["sandboxID"] != "sb1" || out["clientID"] != clientID {
		t.Errorf("info of sb1-den: %d %v", status, out)
	}
	if status, _ := call("DELETE", "/sandboxes/sb1-den", ""); status != 204 || den.last("DELETE /v1/sandboxes/sb1").path == "" {
		t.Errorf("kill of sb1-den: %d, den saw %v", status, den.calls())
	}
	if status, out := call("GET", "/sandboxes/nope-den", ""); status != 404 || out["code"] != float64(404) || den.last("GET /v1/sandboxes/nope").path == "" {
		t.Errorf("info of an unknown nope-den: %d %v", status, out)
	}
	d := New(Config{API: inproc.New()})
	for host, want := range map[string]string{
		"49983-abc123-den.e2b.localhost:7070": "abc123",
		"49983-abc123-other.e2b.localhost":    "",
		"49983--den.e2b.localhost":            "",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if id, _, ok := d.hostTarget(r); id != want || ok != (want != "") {
			t.Errorf("hostTarget(%s) = %q %v, want %q", host, id, ok, want)
		}
	}
}

// controlCall makes a control plane call to d with the test's key, and
// reads its answer as a T.
func controlCall[T any](d *Door, method, path, body string) (int, T) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set(headerAPIKey, E2BKey(token))
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	var out T
	json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// doorOver is a door of cfg over den as dend's API.
func doorOver(t *testing.T, den *fakeAPI, cfg Config) *Door {
	t.Helper()
	self := inproc.New()
	self.Serve(den, den)
	t.Cleanup(func() { self.Close() })
	cfg.API = self
	return New(cfg)
}

// fakeAPI answers den's API for one sandbox, sb1, and records calls.
type fakeAPI struct {
	mu      sync.Mutex
	log     []fakeCall
	state   string
	pending string
	labels  map[string]string
	// wakes has resume leave the sandbox running.
	wakes bool
}

type fakeCall struct {
	route, path, query, body, auth string
	actAs                          string // the owner a door acted for
	ownOrigin                      string // what the door said of the port's origin
}

func newFakeAPI() *fakeAPI { return &fakeAPI{state: api.StateRunning} }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.log = append(f.log, fakeCall{route: r.Method + " " + r.URL.Path, path: r.URL.Path, query: r.URL.RawQuery, body: string(b), auth: r.Header.Get("Authorization"),
		actAs: r.Header.Get(inproc.ActAsOwnerHeader), ownOrigin: r.Header.Get(inproc.OwnOriginHeader)})
	if f.wakes && strings.HasSuffix(r.URL.Path, "/resume") {
		f.state = api.StateRunning
	}
	if strings.HasSuffix(r.URL.Path, "/resume") {
		f.pending = ""
	}
	state, pending, labels := f.state, f.pending, f.labels
	f.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/v1/sandboxes/nope") || strings.HasSuffix(r.URL.Path, "-den") {
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeNotFound, Message: `sandbox "nope" not found`}})
		return
	}
	ttl, zero := "10m", "0"
	sb := api.Sandbox{ID: "sb1", Name: "e2b-x", Image: "e2b-base", State: state, Pending: pending, RunningFor: "10m", Owner: "alice", Labels: labels,
		Policy: api.Policy{TTL: &ttl, HibernateAfter: &zero, PauseAfter: &zero}}
	if fakeCheckpoints(w, r, b) {
		return
	}
	switch {
	case r.Method == "DELETE":
		w.WriteHeader(204)
	case strings.Contains(r.URL.Path, "/proxy"):
		w.Header().Set("X-Proxied", r.URL.Path)
		w.Write([]byte("from the app"))
	case r.URL.Path == "/v1/sandboxes" && r.Method == "POST":
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(sb)
	default:
		json.NewEncoder(w).Encode(sb)
	}
}

func (f *fakeAPI) calls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fakeAPI) last(route string) fakeCall {
	calls := f.calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].route == route {
			return calls[i]
		}
	}
	return fakeCall{}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func asConnect(err error, target **connect.Error) bool {
	ce, ok := err.(*connect.Error)
	*target = ce
	return ok
}
