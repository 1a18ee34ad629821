// Package httpapi serves den's REST API (v1) over HTTP: it decodes each
// request, calls the sandbox service or the image manager, and encodes the
// answer. Every error leaves through one function that maps its class to a
// status code and the JSON envelope of package api. The route contract is
// api/openapi.yaml; Routes lists what this package registers, and a test
// keeps the two equal.
package httpapi

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/httpapi/fleetapi"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/httpapi/portproxy"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/usage"
)

// DefaultMaxJSONBytes bounds a JSON request body when Config leaves it 0.
const DefaultMaxJSONBytes = 1 << 20

// SampleService keeps what each running sandbox used (internal/sampling).
type SampleService interface {
	// Metrics is the sandbox's samples from from to to (zero: open).
	Metrics(ctx context.Context, ref string, from, to time.Time) ([]usage.Sample, error)
}

// LogService writes runs' output (internal/runlogs).
type LogService interface {
	// Logs writes one output stream ("stdout" or "stderr") of a run to w
	// from byte offset from. Without follow it returns at the current
	// end; with follow, once the run ended and all its output was written
	// (or ctx ends).
	Logs(ctx context.Context, ref, runID, stream string, from int64, how runlogs.Follow, w io.Writer) error
}

// RunService carries out the verbs over a sandbox's runs that change no
// sandbox's state (internal/running). ref is a sandbox name or id; runID
// a run id.
type RunService interface {
	// Runs lists runs newest first, at most limit (0: all).
	Runs(ctx context.Context, ref string, limit int) ([]*sandbox.Run, error)
	// RunningRuns lists the runs still running, newest first.
	RunningRuns(ctx context.Context, ref string) ([]*sandbox.Run, error)
	Run(ctx context.Context, ref, runID string) (*sandbox.Run, error)
	// Stdin streams r to the run's stdin and closes it at EOF, unless
	// keepOpen.
	Stdin(ctx context.Context, ref, runID string, r io.Reader, keepOpen bool) error
	Resize(ctx context.Context, ref, runID string, rows, cols uint16) error
	// Signal sends sig ("TERM", "SIGKILL", "9") to the run; the service
	// validates it.
	Signal(ctx context.Context, ref, runID, sig string) error
	// Processes lists a sandbox's processes, waking it if it sleeps.
	Processes(ctx context.Context, ref string) ([]guest.Process, error)
}

// SandboxService carries out every sandbox verb. *sandbox.Service
// implements it. ref is a sandbox name or id; runID a run id.
type SandboxService interface {
	Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Sandbox, error)
	// Get finds a sandbox as an admin names it; GetOwned one of an owner
	// identity's, any other being not found.
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	GetOwned(ctx context.Context, owner, ref string) (*sandbox.Sandbox, error)
	List(ctx context.Context) ([]*sandbox.Sandbox, error)
	Start(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Stop(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Remove(ctx context.Context, ref string, force bool) error
	Events(ctx context.Context, ref string) ([]sandbox.Event, error)
	// Address is the sandbox's private address, or "".
	Address(sb *sandbox.Sandbox) string

	// Exec starts a command and returns at once with its run.
	Exec(ctx context.Context, ref string, p sandbox.ExecParams) (*sandbox.Run, error)

	// Files is the file system of a running sandbox.
	Files(ctx context.Context, ref string) (sandbox.Files, error)

	// Pause freezes a running sandbox in RAM; Hibernate saves a running or
	// paused one to disk; Resume brings either back to running.
	Pause(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Hibernate(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	// Checkpoint takes a checkpoint; ckpt, in Restore, is a checkpoint id
	// or name among the sandbox's. Listing, reading and removing them is
	// CheckpointService's.
	Checkpoint(ctx context.Context, ref string, p sandbox.CheckpointParams) (*sandbox.Checkpoint, error)
	// FindCheckpoint finds any sandbox's checkpoint by its id or as
	// SANDBOX:NAME, whoever may see it.
	FindCheckpoint(ctx context.Context, ref string) (*sandbox.Checkpoint, error)
	// Restore rewinds a sandbox in place to one of its checkpoints.
	Restore(ctx context.Context, ref, ckpt string) (*sandbox.Sandbox, error)
	// Fork makes children of a sandbox and returns them.
	Fork(ctx context.Context, ref string, p sandbox.ForkParams) ([]*sandbox.Sandbox, error)
	// Hold keeps a sandbox in use until the returned func is called.
	Hold(ctx context.Context, ref string) func()
	// Resources is what a sandbox uses now.
	Resources(ctx context.Context, sb *sandbox.Sandbox) (sandbox.ResourceUsage, sandbox.DiskQuota)
	// EffectivePolicy is sb's policy with dend's defaults filled in; Due
	// is the next step it takes.
	EffectivePolicy(sb *sandbox.Sandbox) idle.Policy
	Due(sb *sandbox.Sandbox) idle.Due
}

// Config is what the API needs. Sandboxes, Images and Logger are required.
type Config struct {
	Sandboxes SandboxService
	Images    ImageService
	Logger    *slog.Logger
	// Health reports on dend for GET /v1/health; nil answers {"status":"ok"}.
	Health func(ctx context.Context) api.Health
	// Version is the release of den this dend runs, named on every
	// answer in api.VersionHeader; "" names none.
	Version string
	// MaxJSONBytes bounds JSON request bodies; 0 means DefaultMaxJSONBytes.
	// Uploads (file content, archives, image imports) are streamed and
	// not bounded by it.
	MaxJSONBytes int64

	// Tokens checks the bearer token of every request that did not come
	// through Local, and serves /v1/tokens. nil: only requests through
	// Local get in, and the token routes answer 503.
	Tokens TokenService
	// SSHKeys serves /v1/ssh-keys, the SSH gateway's keys. nil: those
	// routes answer 503.
	SSHKeys SSHKeyService
	// Audit records every call that changes something, and serves
	// /v1/audit. nil: nothing is recorded.
	Audit audit.Log
	// Secrets serves /v1/secrets. nil: those routes answer 503.
	Secrets SecretService
	// Owners serves /v1/owners (quotas and grants). nil: 503.
	Owners OwnerService
	// Rebase serves a sandbox's setup and rebase routes. nil: 503.
	Rebase RebaseService
	// Policies changes sandboxes' idle policies (internal/idling). nil:
	// 503.
	Policies PolicyService
	// Grants changes which secrets sandboxes' commands get
	// (internal/granting). nil: 503.
	Grants GrantService
	// Limits changes sandboxes' resource limits (internal/limiting).
	// nil: 503.
	Limits LimitService
	// Services serves a sandbox's services routes (internal/servicing).
	// nil: 503.
	Services ServiceVerbs
	// Network changes what sandboxes may reach (internal/networking).
	// nil: 503.
	Network NetworkService
	// Ports exposes sandboxes' ports and finds where a request to one
	// goes (internal/exposing). Required.
	Ports portproxy.Ports
	// Recover serves a sandbox's recover route. nil: 503.
	Recover RecoverService
	// Samples serves a sandbox's metrics route (internal/sampling). nil:
	// 503.
	Samples SampleService
	// Logs serves runs' output: their logs route and an attached exec's
	// streams (internal/runlogs); required with Sandboxes.
	Logs LogService
	// Checkpoints lists, reads and removes sandboxes' checkpoints
	// (internal/checkpointing); required with Sandboxes.
	Checkpoints CheckpointService
	// Runs serves runs' records, input, window sizes and signals, and
	// sandboxes' processes (internal/running); required with Sandboxes.
	Runs RunService
	// Export serves a sandbox's export and the import of an archive.
	// nil: 503.
	Export ExportService
	// MaxArchiveBytes bounds an archive an import reads (0:
	// DefaultMaxArchiveBytes).
	MaxArchiveBytes int64
	// Peers serves /v1/sandboxes/{name}/peers, sandboxes' read-only
	// views of others. nil: 503.
	Peers PeerService
	// PortsKey signs URLs to exposed ports (see internal/httpapi/portproxy); 32 random
	// bytes. nil: no URLs are signed (503) and none is accepted.
	PortsKey []byte
	// Requests keeps the record of requests sent with an idempotency
	// key and serves /v1/requests. nil: keys are checked but nothing is
	// recorded (a repeat runs again), and /v1/requests answers 503.
	Requests RequestStore
	// PortsDomain, when set, serves requests to the host
	// PORT-NAME.PortsDomain as the proxy of that port of that sandbox.
	PortsDomain string
	// MCP, when set, serves the Model Context Protocol at /mcp to any
	// caller with a principal; what its tools do is checked as the API
	// calls they make.
	MCP http.Handler
	// Blobs collects the blob store on request; nil: dend has none, and
	// the route answers 503.
	Blobs fleetapi.Blobs
	// E2B, when set, serves E2B's API to the requests it claims, before
	// they meet the API's own authentication: it carries its callers'
	// keys to the API itself, whose calls are checked and audited.
	E2B Door
	// Nodes serves /v1/nodes. nil: 503.
	Nodes fleetapi.Nodes
	// Fleet moves sandboxes to and from the other nodes of the fleet.
	// nil: dend is not part of a fleet.
	Fleet fleetapi.Fleet
	// Warm keeps this node's warm pools: PUT /v1/images/{image}/warm,
	// and each image's pool in GET /v1/images. nil: 503, and none shown.
	Warm WarmService
	// Events serves GET /v1/events. nil: 503.
	Events EventStream
	// Metrics serves GET /metrics (Prometheus' format) to admin and
	// admin:read tokens. nil: 503.
	Metrics http.Handler
	// SSH serves SSH logins other nodes of the fleet relay here
	// (GET /v1/sandboxes/{name}/ssh, between nodes only). nil: 503.
	SSH SSHRelay
	// Stopping is closed when dend shuts down: streams that would never
	// end on their own (GET /v1/events) end then.
	Stopping <-chan struct{}
	// Cluster, when set, is the fleet this dend is a node of: a request
	// for a sandbox another node runs is forwarded to it (cluster.go).
	Cluster Cluster
	// UI, when set, serves the web dashboard at UIPath and under it. It
	// holds static files only, served without a token: the pages call
	// this API with the token the user signs in with, so every rule of
	// the API holds for them.
	UI http.Handler
}

// UIPath is where the web dashboard is served.
const UIPath = "/ui"

// Door is a front door that speaks another protocol on dend's listeners:
// it answers the requests Claims says are its own.
type Door interface {
	http.Handler
	Claims(r *http.Request) bool
}

// MaxMCPBytes bounds one message to /mcp: a file_write's content is its
// largest part. The MCP SDK takes no more either.
const MaxMCPBytes = 4 << 20

// server holds the dependencies every handler shares.
type server struct {
	sandboxes    SandboxService
	images       ImageService
	log          *slog.Logger
	health       func(ctx context.Context) api.Health
	maxJSONBytes int64
	tokens       TokenService
	sshKeys      SSHKeyService
	audit        audit.Log
	secrets      SecretService
	owners       OwnerService
	rebase       RebaseService
	policies     PolicyService
	grants       GrantService
	limits       LimitService
	services     ServiceVerbs
	network      NetworkService
	recovery     RecoverService
	samples      SampleService
	logs         LogService
	checkpoints  CheckpointService
	runs         RunService
	export       ExportService
	// maxArchiveBytes bounds an archive an import reads.
	maxArchiveBytes int64
	peers           PeerService
	requests        RequestStore
	// ports serves exposed ports: their routes, the proxy, and who may
	// reach them without a token.
	ports *portproxy.Proxy
	// refusals logs requests refused for want of a valid token.
	refusals *refusalLog
	cluster  Cluster
	nodes    fleetapi.Nodes
	fleet    fleetapi.Fleet
	// fleetAPI serves the fleet's routes: nodes, moves, the blob store.
	fleetAPI *fleetapi.Handlers
	warm     WarmService
	events   EventStream
	stopping <-chan struct{}
	metrics  http.Handler
	ssh      SSHRelay
}

// New returns the handler of the whole API: every route of Routes, JSON
// errors for unknown routes and wrong methods, request logging at Debug
// level, and recovery from panics. Every request needs a principal (see
// access.go): wrap the handler in Local for the unix socket; elsewhere a
// bearer token is required.
func New(cfg Config) http.Handler {
	s := &server{
		sandboxes:       cfg.Sandboxes,
		images:          cfg.Images,
		log:             cfg.Logger,
		health:          cfg.Health,
		maxJSONBytes:    cfg.MaxJSONBytes,
		tokens:          cfg.Tokens,
		sshKeys:         cfg.SSHKeys,
		audit:           cfg.Audit,
		secrets:         cfg.Secrets,
		cluster:         cfg.Cluster,
		fleet:           cfg.Fleet,
		nodes:           cfg.Nodes,
		warm:            cfg.Warm,
		events:          cfg.Events,
		stopping:        cfg.Stopping,
		metrics:         cfg.Metrics,
		ssh:             cfg.SSH,
		owners:          cfg.Owners,
		rebase:          cfg.Rebase,
		policies:        cfg.Policies,
		grants:          cfg.Grants,
		limits:          cfg.Limits,
		services:        cfg.Services,
		network:         cfg.Network,
		recovery:        cfg.Recover,
		samples:         cfg.Samples,
		logs:            cfg.Logs,
		checkpoints:     cfg.Checkpoints,
		runs:            cfg.Runs,
		export:          cfg.Export,
		maxArchiveBytes: cmp.Or(cfg.MaxArchiveBytes, DefaultMaxArchiveBytes),
		peers:           cfg.Peers,
		requests:        cfg.Requests,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.refusals = newRefusalLog(s.log, nil)
	if s.maxJSONBytes <= 0 {
		s.maxJSONBytes = DefaultMaxJSONBytes
	}
	s.ports = portproxy.New(portproxy.Config{Sandboxes: s.sandboxes, Ports: cfg.Ports, ToSandbox: s.toSandbox, Key: cfg.PortsKey,
		Domain: cfg.PortsDomain, MaxJSONBytes: s.maxJSONBytes, Logger: s.log})
	s.fleetAPI = fleetapi.New(fleetapi.Config{Nodes: s.nodes, Fleet: s.fleet, Blobs: cfg.Blobs, Cluster: s.cluster,
		ToSandbox: s.toSandbox, MaxJSONBytes: s.maxJSONBytes})
	mux := http.NewServeMux()
	queries := routeQueries()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.idempotent(rt, s.handle(s.guard(rt, queries[rt.method+" "+rt.path]))))
	}
	if cfg.MCP != nil {
		mux.Handle(mcpPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpx.InfoOf(r).Route = mcpPath
			r.Body = http.MaxBytesReader(w, r.Body, MaxMCPBytes)
			cfg.MCP.ServeHTTP(w, r)
		}))
	}
	return namesVersion(cfg.Version, s.logRequests(s.recoverPanics(s.ports.RouteHosts(s.door(cfg.E2B, s.ui(cfg.UI, s.authenticate(s.auditCalls(s.fallback(mux)))))))))
}

// namesVersion sets api.VersionHeader to version on every answer of next,
// refusals and unknown routes included: a client of another release
// learns it from any call.
func namesVersion(version string, next http.Handler) http.Handler {
	if version == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, version)
		next.ServeHTTP(w, r)
	})
}

// ui sends requests for UIPath and below to h, the others on to next.
func (s *server) ui(h http.Handler, next http.Handler) http.Handler {
	if h == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == UIPath || strings.HasPrefix(r.URL.Path, UIPath+"/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// door sends the requests d claims to d, the others on to next.
func (s *server) door(d Door, next http.Handler) http.Handler {
	if d == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.Claims(r) {
			d.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handlerFunc is a route's handler. It returns an error instead of writing
// one, so that errors leave through writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle turns a handlerFunc into an http.Handler. An error returned before
// anything was written becomes the JSON envelope; after the status line went
// out, it can only be logged and the response cut short, so the client sees
// a broken body rather than a complete-looking one.
func (s *server) handle(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := asRecorder(w)
		err := fn(rec, r)
		if err == nil {
			return
		}
		if r.Context().Err() != nil {
			// The client went away, most likely the cause; nobody is
			// left to tell.
			s.log.Debug("request ended with the client gone", "method", r.Method, "path", r.URL.Path, "err", err)
			return
		}
		if !rec.wroteHeader {
			httpx.WriteError(s.log, rec, r, err)
			return
		}
		level := slog.LevelWarn
		_, body, internal := httpx.ToAPIError(err)
		if internal {
			level = slog.LevelError
		}
		httpx.NoteError(r, body.Message)
		s.log.Log(r.Context(), level, "response cut short", "method", r.Method, "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	})
}

// fallback answers requests no route matches with the JSON envelope: 404
// for an unknown path, 405 (with Allow) for a known path and wrong method.
func (s *server) fallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer tells 404 from 405; keep only its status
		// and Allow header.
		probe := &headerProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			httpx.WriteJSONError(w, http.StatusMethodNotAllowed, &api.Error{
				Code:    api.CodeInvalid,
				Message: api.NoMethodMessage + r.Method + " not allowed on " + r.URL.Path,
				Hint:    "allowed: " + probe.header.Get("Allow"),
			})
			return
		}
		httpx.WriteJSONError(w, http.StatusNotFound, &api.Error{
			Code:    api.CodeNotFound,
			Message: api.NoRouteMessage + r.Method + " " + r.URL.Path,
			Hint:    "see GET /v1/openapi.yaml for the routes",
		})
	})
}

// headerProbe is a ResponseWriter that keeps the status and headers and
// drops the body.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(status int)      { p.status = status }

func (s *server) getHealth(w http.ResponseWriter, r *http.Request) error {
	h := api.Health{Status: "ok"}
	if s.health != nil {
		h = s.health(r.Context())
	}
	// The disk, the pool and the warm pools are the host's, shared by
	// every owner: how full they are tells one owner of the others'
	// work. An owner's own use is in GET /v1/owners/{id}, and a create
	// refused for want of room says so.
	if !httpx.PrincipalOf(r).Scope.Admin() {
		h.Disk, h.Pool, h.Warm, h.Blobs = nil, nil, nil, nil
	}
	return httpx.WriteJSON(w, http.StatusOK, h)
}

func (s *server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(api.OpenAPI)
	return err
}
