package e2b

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The control plane: E2B's REST API over den's sandbox verbs.
//
//	POST /v2/sandboxes, POST /sandboxes   create        POST /v1/sandboxes
//	GET  /v2/sandboxes, GET /sandboxes    list          GET  /v1/sandboxes
//	GET  /sandboxes/{id}                  get           GET  /v1/sandboxes/{id}
//	DELETE /sandboxes/{id}                kill          DELETE ...?force=true
//	POST /sandboxes/{id}/timeout          set timeout   PATCH .../policy
//	POST /sandboxes/{id}/pause            pause         POST .../hibernate (memory:false: .../stop)
//	POST /[v2/]sandboxes/{id}/connect     connect       .../resume or .../start, then the timeout
//	GET  /sandboxes/{id}/metrics          metrics       GET .../{id}/metrics
//	POST /sandboxes/{id}/fork             fork          POST .../fork, then each child's timeout
//	snapshots and templates               (snapshots.go)
//	PUT  /sandboxes/{id}/network          egress rules  PUT .../network

// maxBody bounds a control plane request body.
const maxBody = 1 << 20

// defaultTimeout is the life E2B gives a sandbox created or connected
// without a timeout.
const defaultTimeout = 300 * time.Second

// controlHandler handles one control plane route as the caller of c.
type controlHandler func(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error

func (d *Door) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range map[string]controlHandler{
		"POST /v2/sandboxes":              d.create,
		"POST /sandboxes":                 d.create,
		"GET /v2/sandboxes":               d.list,
		"GET /sandboxes":                  d.listV1,
		"GET /sandboxes/{id}":             d.get,
		"DELETE /sandboxes/{id}":          d.kill,
		"POST /sandboxes/{id}/timeout":    d.setTimeout,
		"POST /sandboxes/{id}/refreshes":  d.refresh,
		"POST /sandboxes/{id}/pause":      d.pause,
		"POST /sandboxes/{id}/connect":    d.connect,
		"POST /v2/sandboxes/{id}/connect": d.connect,
		"POST /sandboxes/{id}/resume":     d.connect,
		"GET /sandboxes/{id}/metrics":     d.metrics,
		"POST /sandboxes/{id}/fork":       d.fork,
		"POST /sandboxes/{id}/snapshots":  d.createSnapshot,
		"GET /snapshots":                  d.listSnapshots,
		"DELETE /templates/{id}":          d.deleteTemplate,
		"GET /templates":                  d.listTemplates,
		"GET /templates/aliases/{alias}":  d.templateAlias,
		"PUT /sandboxes/{id}/network":     d.updateNetwork,
	} {
		mux.Handle(pattern, d.controlCall(h))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			writeJSON(w, http.StatusNotFound, errorBody{Code: http.StatusNotFound,
				Message: fmt.Sprintf("%s %s is not part of the E2B API den serves\nhint: see den's docs/agents.md, section E2B, for what is", r.Method, r.URL.Path)})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// controlCall finds the caller, bounds the body, and answers errors.
func (d *Door) controlCall(h controlHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, token, err := d.clientFor(r, headerAPIKey, "Authorization")
		if err == nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			err = h(w, r, c, token)
		}
		if err != nil {
			d.writeError(w, r, err)
		}
	})
}

// sandboxJSON is E2B's Sandbox: what create and connect answer.
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detailJSON is E2B's SandboxDetail and ListedSandbox.
type detailJSON struct {
	SandboxID           string            `json:"sandboxID"`
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	ClientID            string            `json:"clientID"`
	Metadata            map[string]string `json:"metadata"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	State               string            `json:"state"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int64             `json:"memoryMB"`
	DiskSizeMB          int64             `json:"diskSizeMB"`
	EnvdVersion         string            `json:"envdVersion"`
	VolumeMounts        []any             `json:"volumeMounts"`
	Domain              *string           `json:"domain"`
	Lifecycle           lifecycleJSON     `json:"lifecycle"`
	Network             networkInfoJSON   `json:"network"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
}

type lifecycleJSON struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// newSandboxJSON is the body of POST /v2/sandboxes (and of the v1 route,
// which adds secure).
type newSandboxJSON struct {
	TemplateID          string                  `json:"templateID"`
	Timeout             *int64                  `json:"timeout"`
	AutoPause           *bool                   `json:"autoPause"`
	AutoPauseMemory     *bool                   `json:"autoPauseMemory"`
	AutoResume          *struct{ Enabled bool } `json:"autoResume"`
	Secure              *bool                   `json:"secure"`
	AllowInternetAccess *bool                   `json:"allow_internet_access"`
	Network             *networkJSON            `json:"network"`
	Metadata            map[string]string       `json:"metadata"`
	EnvVars             map[string]string       `json:"envVars"`
	MCP                 json.RawMessage         `json:"mcp"`
	IAM                 json.RawMessage         `json:"iam"`
	VolumeMounts        []json.RawMessage       `json:"volumeMounts"`
}

// timeoutJSON is the body of timeout, connect and refreshes.
type timeoutJSON struct {
	Timeout  *int64 `json:"timeout"`
	Duration *int64 `json:"duration"` // refreshes
	Memory   *bool  `json:"memory"`   // pause and connect: false boots anew
}

func (d *Door) create(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req newSandboxJSON
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if len(req.MCP) > 0 && string(req.MCP) != "null" {
		return invalidHint("run the MCP server you need as a command in the sandbox",
			"den has no MCP gateway for sandboxes (mcp)")
	}
	if len(req.VolumeMounts) > 0 {
		return invalidHint("leave volumeMounts out; a den sandbox keeps its own files across sleep, stop and start",
			"den does not mount E2B volumes (volumeMounts)")
	}
	if len(req.IAM) > 0 && string(req.IAM) != "null" && string(req.IAM) != "{}" {
		return invalid("den does not issue workload identity tokens (iam)")
	}
	image, from, err := templateSource(req.TemplateID, req.EnvVars)
	if err != nil {
		return err
	}
	timeout, err := d.seconds(req.Timeout, defaultTimeout)
	if err != nil {
		return err
	}
	network, err := createNetwork(req.AllowInternetAccess, req.Network)
	if err != nil {
		return err
	}
	action := timeoutAction(req.AutoPause, req.AutoPauseMemory)
	labels, err := autoResumeLabel(req.AutoResume != nil && req.AutoResume.Enabled, action, req.Metadata)
	if err != nil {
		return err
	}
	// A sandbox killed at its timeout keeps nothing, as E2B's.
	create := api.CreateSandboxRequest{
		Image: image, From: from, Env: req.EnvVars, Labels: labels, Network: network,
		Policy: d.timeoutPolicy(action, 0, timeout), Ephemeral: action == killAtTimeout,
	}
	create.Name = newName()
	sb, err := c.CreateSandbox(r.Context(), create)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d.newSandboxAnswer(r, sb, token))
	return nil
}

func (d *Door) get(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, detail(sb, time.Now()))
	return nil
}

func (d *Door) kill(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := c.RemoveSandbox(r.Context(), sb.ID, true); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setTimeout gives the sandbox timeout more seconds from now, shorter or
// longer than it had.
func (d *Door) setTimeout(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req timeoutJSON
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if req.Timeout == nil {
		return invalid("no timeout given: send {\"timeout\": SECONDS}")
	}
	timeout, err := d.seconds(req.Timeout, 0)
	if err != nil {
		return err
	}
	return d.retime(w, r, c, timeout, false)
}

// refresh is the old keep-alive: duration more seconds, never less than
// the sandbox had.
func (d *Door) refresh(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req timeoutJSON
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	timeout, err := d.seconds(req.Duration, 60*time.Second)
	if err != nil {
		return err
	}
	return d.retime(w, r, c, timeout, true)
}

func (d *Door) retime(w http.ResponseWriter, r *http.Request, c *client.Client, timeout time.Duration, extendOnly bool) error {
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if p := d.retimePolicy(sb, timeout, extendOnly); p != nil {
		if _, err := c.SetPolicy(r.Context(), sb.ID, *p); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pause saves a running sandbox to disk with its memory (hibernate), or,
// with memory false, stops it: it boots afresh on connect.
func (d *Door) pause(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req timeoutJSON
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	ref := r.PathValue("id")
	sb, err := lookup(r.Context(), c, ref)
	if err != nil {
		return err
	}
	if stateOf(sb) == statePaused {
		return &client.Error{API: &api.Error{Code: api.CodeConflict,
			Message: fmt.Sprintf("sandbox %s is already paused (%s)", sb.ID, sb.State)}}
	}
	if req.Memory != nil && !*req.Memory {
		_, err = c.StopSandbox(r.Context(), sb.ID)
	} else {
		_, err = c.Hibernate(r.Context(), sb.ID)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect resumes a paused sandbox (201), or finds a running one (200),
// and gives it at least timeout more seconds. memory false (onResume:
// reboot) asks for a boot from the files alone: what a sandbox paused
// with memory false always gets, and what den refuses, as E2B's SDK says
// a control plane may, for one paused with its memory, whose files den
// keeps only as the snapshot its memory image belongs to.
func (d *Door) connect(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req timeoutJSON
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	timeout, err := d.seconds(req.Timeout, defaultTimeout)
	if err != nil {
		return err
	}
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if sb.State == api.StateRunning && sb.Pending != "" {
		// A pause or stop under way (the timeout's, say) still shows it
		// running: den's verbs take turns on a sandbox, so a resume waits
		// for that to end, then wakes it. One that ended stopped is
		// started below.
		if woke, rerr := c.Resume(r.Context(), sb.ID); rerr == nil {
			sb, status = woke, http.StatusCreated
		} else if sb, err = lookup(r.Context(), c, sb.ID); err != nil {
			return err
		}
	}
	reboot := req.Memory != nil && !*req.Memory
	switch sb.State {
	case api.StatePaused, api.StateHibernated:
		if reboot {
			return invalidHint("connect without onResume to restore it, then pause it with keepMemory: false, which connect then boots afresh",
				"sandbox %s was paused with its memory, and den resumes such a sandbox only by restoring it (onResume: reboot)", sb.ID)
		}
		sb, err = c.Resume(r.Context(), sb.ID)
		status = http.StatusCreated
	case api.StateStopped:
		sb, err = c.StartSandbox(r.Context(), sb.ID)
		status = http.StatusCreated
	case api.StateError:
		err = &client.Error{API: &api.Error{Code: api.CodeConflict,
			Message: fmt.Sprintf("sandbox %s is in error: %s", sb.ID, sb.Reason),
			Hint:    "`den recover " + sb.Name + "` brings it back, or kill it"}}
	}
	if err != nil {
		return err
	}
	// Always a change, even with nothing to extend: connect hands out the
	// sandbox's access token, which a read-only den token must not get.
	p := d.retimePolicy(sb, timeout, true)
	if p == nil {
		p = &api.Policy{}
	}
	if sb, err = c.SetPolicy(r.Context(), sb.ID, *p); err != nil {
		return err
	}
	writeJSON(w, status, d.newSandboxAnswer(r, sb, token))
	return nil
}

// clientID is the client id create, connect, list and info answer. SDKs
// before 2.0 (Python 1.x, JavaScript 1.x) address a sandbox as
// ID-CLIENTID, which E2B's API and proxy read as ID.
const clientID = "den"

// lookup finds a sandbox the caller may see; one den destroyed (its record
// kept) is, to E2B, not found. ID-den is sandbox ID when nothing is named
// ID-den.
func lookup(ctx context.Context, c *client.Client, ref string) (*api.Sandbox, error) {
	sb, err := c.LookupSandbox(ctx, ref)
	if id, ok := strings.CutSuffix(ref, "-"+clientID); ok && client.IsNotFound(err) {
		if byID, idErr := c.LookupSandbox(ctx, id); idErr == nil && byID.ID == id {
			sb, err = byID, nil
		}
	}
	if err == nil && sb.State == api.StateDestroyed {
		return nil, &client.Error{API: &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("sandbox %s was destroyed: %s", ref, sb.Reason)}}
	}
	return sb, err
}

// forkTimeout is the life E2B gives forks made without a timeout.
const forkTimeout = 15 * time.Second

// maxForks bounds one fork request.
const maxForks = 100

// forkResultJSON is one fork's outcome; den makes all of them or none.
type forkResultJSON struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
}

// fork makes copies of a running sandbox, files, memory and processes
// (den's fork), each with the timeout asked for in the parent's mode.
func (d *Door) fork(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	timeout, err := d.seconds(req.Timeout, forkTimeout)
	if err != nil {
		return err
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > maxForks {
		return invalid("invalid count %d: give a number from 1 to %d", count, maxForks)
	}
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	children, err := c.Fork(r.Context(), sb.ID, client.ForkOptions{Name: newName(), Count: count})
	if err != nil {
		return err
	}
	out := make([]forkResultJSON, 0, len(children))
	for i := range children {
		child := &children[i]
		if p := d.retimePolicy(child, timeout, false); p != nil {
			if child, err = c.SetPolicy(r.Context(), child.ID, *p); err != nil {
				return err
			}
		}
		out = append(out, forkResultJSON{Sandbox: ptr(d.newSandboxAnswer(r, child, token))})
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// metricsJSON is one sample of E2B's metrics.
type metricsJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metrics answers the samples den took of the sandbox while it ran (every
// few seconds, the last hour), from start to end: Unix seconds, each end
// open when absent.
func (d *Door) metrics(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	start, err := unixQuery(r, "start")
	if err != nil {
		return err
	}
	end, err := unixQuery(r, "end")
	if err != nil {
		return err
	}
	if !end.IsZero() {
		end = end.Add(time.Second - 1) // the whole of its second
	}
	if !start.IsZero() && !end.IsZero() && end.Before(start) {
		return invalid("invalid range: end is before start")
	}
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	samples, err := c.Metrics(r.Context(), sb.ID, start, end)
	if err != nil {
		return err
	}
	out := make([]metricsJSON, 0, len(samples))
	for _, m := range samples {
		out = append(out, metricsJSON{
			Timestamp: m.At.UTC(), TimestampUnix: m.At.Unix(), CPUCount: cpuCount(m.CPUs), CPUUsedPct: math.Round(m.CPUPercent*100) / 100,
			MemUsed: m.MemoryBytes, MemTotal: m.MemoryLimit, DiskUsed: m.DiskBytes, DiskTotal: m.DiskLimit,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func unixQuery(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
		return time.Time{}, invalid("invalid %s %q: give a Unix time in seconds", name, v)
	}
	return time.Unix(n, 0), nil
}

// decodeBody reads a JSON body into v. An empty body is fine when
// optional. Unknown fields are ignored, as E2B's newer SDKs send more.
func decodeBody(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &client.Error{API: &api.Error{Code: api.CodeTooLarge, Message: fmt.Sprintf("the request body is over %d bytes", maxBody)}}
		}
		return invalid("reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if optional {
			return nil
		}
		return invalid("no request body: send a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return invalid("invalid request body: %s must be a %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return invalid("invalid request body: %v", err)
	}
	return nil
}

// seconds reads a timeout in whole seconds; absent is def.
func (d *Door) seconds(v *int64, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	if *v < 0 || *v > math.MaxInt64/int64(time.Second) {
		return 0, invalid("invalid timeout %d: give a number of seconds, 0 or more", *v)
	}
	t := time.Duration(*v) * time.Second
	if floor := d.minTimeout(); t > 0 && t < floor {
		return 0, invalidHint(fmt.Sprintf("ask for %s or more; the operator sets this floor with `dend --e2b-min-timeout`", floor),
			"invalid timeout %s: shorter than %s, the shortest this dend gives E2B's sandboxes", t, floor)
	}
	return t, nil
}

// templateImage is the den image behind an E2B template: base (the
// default) is e2b-base; any other template names a den image.
func templateImage(template string) (string, error) {
	switch template {
	case "", "base":
		return "e2b-base", nil
	case "mcp-gateway":
		return "", invalid("den has no mcp-gateway template")
	}
	return template, nil
}

// templateSource is what a sandbox of template is made from: a den
// image, or a snapshot (snapshots.go), which carries its env vars.
func templateSource(template string, env map[string]string) (image, from string, err error) {
	if !isSnapshot(template) {
		image, err = templateImage(template)
		return image, "", err
	}
	if len(env) > 0 {
		return "", "", invalidHint("leave envs out, or set them in the sandbox the snapshot is taken of",
			"a sandbox created from snapshot %s has its env vars from it", template)
	}
	return "", template, nil
}

// templateOf is the E2B template a den image stands for.
func templateOf(image string) string {
	if image == "e2b-base" {
		return "base"
	}
	return image
}

// newName is the den name of a sandbox E2B creates; E2B knows it by its
// den id.
func newName() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return "e2b-" + string(b)
}

// newSandboxAnswer is what create, connect and fork answer: the
// sandbox's own tokens (access.go) and the domain of its hosts. A door
// without a key hands out the caller's den token instead, which signs no
// URL dend can check.
func (d *Door) newSandboxAnswer(r *http.Request, sb *api.Sandbox, token string) sandboxJSON {
	out := sandboxJSON{
		SandboxID: sb.ID, TemplateID: templateOf(sb.Image), Alias: templateOf(sb.Image), ClientID: clientID,
		EnvdVersion: envdVersion, EnvdAccessToken: token, Domain: ptr(d.domainFor(r)),
	}
	if len(d.key) > 0 {
		out.EnvdAccessToken = d.sandboxToken(envdTokenPrefix, sb.ID)
		out.TrafficAccessToken = ptr(d.sandboxToken(trafficTokenPrefix, sb.ID))
	}
	return out
}

// E2B knows two states; den's sleeping and stopped sandboxes are paused
// to it (connect brings them back), and so is one in error, which
// connect explains.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

func stateOf(sb *api.Sandbox) string {
	switch sb.State {
	case api.StateRunning, api.StateCreating:
		return stateRunning
	}
	return statePaused
}

func detail(sb *api.Sandbox, now time.Time) detailJSON {
	mode := "kill"
	if !killMode(sb) {
		mode = "pause"
	}
	out := detailJSON{
		SandboxID: sb.ID, TemplateID: templateOf(sb.Image), Alias: templateOf(sb.Image), ClientID: clientID,
		Metadata: e2bMetadata(sb), StartedAt: sb.CreatedAt, EndAt: endAt(sb, now), State: stateOf(sb),
		CPUCount: cpuCount(sb.CPUs), MemoryMB: sb.MemoryBytes >> 20, DiskSizeMB: sb.DiskBytes >> 20,
		EnvdVersion: envdVersion, VolumeMounts: []any{}, Lifecycle: lifecycleJSON{OnTimeout: mode, AutoResume: autoResumes(sb)},
	}
	out.Network, out.AllowInternetAccess = networkInfo(sb.Network)
	return out
}

func cpuCount(cpus float64) int { return max(1, int(math.Ceil(cpus))) }

func ptr[T any](v T) *T { return &v }
