// Package initd is den-init's server: PID 1 inside every sandbox. It starts
// and reaps every process, keeps each process's output in buffers
// addressed by byte offset until the host acknowledges it, and serves
// processes, terminals and files to the host over HTTP. The protocol is
// described in internal/guest/PROTOCOL.md; internal/guest is its client.
package initd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/files"
)

// DefaultOutputLimit is how many unacknowledged bytes of one output stream
// den-init keeps before it stops reading the process's pipe.
const DefaultOutputLimit = 8 << 20

// Log keys.
const (
	keyPID   = "pid"
	keyProc  = "proc"
	keyErr   = "err"
	keyRoute = "route"
	keyArgv0 = "argv0"
)

// Config is what a Server needs.
type Config struct {
	Token   string       // bearer token every request must carry
	Logger  *slog.Logger // default: discard
	Version string       // reported by ping
	// OutputLimit is the per-stream limit of unacknowledged output
	// (default DefaultOutputLimit). Past it the process blocks on write.
	OutputLimit int
	// EtcDir holds the passwd and group files users are looked up in
	// (default /etc).
	EtcDir string
	// SignalAll makes Shutdown signal every process (kill -1), not only
	// the ones den-init started: right for PID 1, whose sandbox holds
	// nothing else, and never for a process on a host.
	SignalAll bool
	// Reaper collects exit statuses. There must be one per process; when
	// nil, New starts one and Close stops it.
	Reaper *Reaper
	// Self is den-init's own binary, run in wrapper mode to start a
	// process given secrets (default: this executable). A program that
	// embeds a Server must hand os.Args[1] == SecretExecArg to SecretExec.
	Self string
	// HostnameSocket, when set, is where den-init waits for the host name
	// helper of a warm-pool instance (see hostname.go), until its first
	// rekey or claim; HostnameSocket is den-init's as PID 1.
	HostnameSocket string
	// Cgroups is where gVisor's cgroup controllers are mounted, which
	// den-init uses to enforce limits (POST /v1/limits); default
	// /sys/fs/cgroup with SignalAll, else none.
	Cgroups string
}

// Validate checks the config and names the bad field.
func (c *Config) Validate() error {
	if c.Token == "" {
		return errdefs.Invalid("config: Token is empty")
	}
	if c.OutputLimit < 0 {
		return errdefs.Invalid("config: OutputLimit %d is negative", c.OutputLimit)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Self == "" {
		c.Self, _ = os.Executable()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.OutputLimit == 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.EtcDir == "" {
		c.EtcDir = "/etc"
	}
	if c.Cgroups == "" && c.SignalAll {
		c.Cgroups = "/sys/fs/cgroup"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
}

// Server is den-init's HTTP server and process table.
type Server struct {
	cfg       Config
	log       *slog.Logger
	reaper    *Reaper
	ownReaper bool
	limits    *limiter
	files     *files.Server // the file routes (internal/initd/files)
	http      *http.Server
	seq       atomic.Uint64 // numbers processes in start order
	// auth is "Bearer <token>", the header every request must carry; a
	// restored copy of a sandbox is given its own with Rekey.
	auth atomic.Pointer[[]byte]

	mu       sync.Mutex
	info     guest.Info // what ping answers; a claim renews it
	addr     string     // where Serve listens
	procs    map[string]*proc
	stopping bool // after Shutdown: no new processes
	// secretRoots are the pids of processes started with secrets, each
	// the leader of its process group (and, with a terminal, session),
	// for as long as any process of theirs lives: see secretHolders.
	secretRoots map[int]bool
	// secretsGiven is whether a process was ever started here with
	// secrets: only then do the holders' marks mean anything.
	secretsGiven bool
	// holds is the cgroup every process started with secrets, and all it
	// forks, belongs to; nil where there are no cgroups.
	holds *holdGroup
	// hasMark reports whether a process bears the holders' mark
	// (holdmark.go); tests replace it.
	hasMark func(pid int) bool
	// hostname waits for a warm-pool instance's host name helper; nil
	// without a HostnameSocket, or when it could not listen.
	hostname *hostnameHelper
	// services are the sandbox's services, kept running (supervisor.go).
	services *supervisor
	// fence stops the sandbox when its node's lease may have run out
	// (fence.go).
	fence *fence
}

// New returns a Server; call Serve to accept connections.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger,
		reaper:      cfg.Reaper,
		procs:       make(map[string]*proc),
		secretRoots: make(map[int]bool),
		hasMark:     hasMark,
		files:       files.New(cfg.EtcDir, cfg.Logger),
		info: guest.Info{
			Version: cfg.Version,
			BootID:  randomID(16),
			Started: time.Now().UTC(),
		},
	}
	s.setToken(cfg.Token)
	s.fence = newFence(cfg.Logger, s.freezeAll, s.thawAll)
	s.services = newSupervisor(cfg.Logger, s.serviceHooksOf())
	if s.reaper == nil {
		r, err := NewReaper(cfg.Logger)
		if err != nil {
			return nil, err
		}
		s.reaper, s.ownReaper = r, true
	}
	var err error
	if s.holds, err = newHoldGroup(cfg.Cgroups); err != nil {
		cfg.Logger.Warn("secret holders are known by their lineage alone", keyErr, err)
	}
	if cfg.HostnameSocket != "" {
		if s.hostname, err = listenHostname(cfg.HostnameSocket); err != nil {
			cfg.Logger.Warn("a warm instance cannot be named when claimed", keyErr, err)
		}
	}
	s.limits = newLimiter(cfg.Cgroups, limitHooks{overMemory: s.killForMemory, atPIDs: s.blamePIDs, idle: s.reaper.Childless}, cfg.Logger)
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving at once and, when the Server started its own
// reaper, stops reaping. Processes keep running.
func (s *Server) Close() error {
	err := s.http.Close()
	s.services.close()
	s.hostname.close()
	s.limits.close()
	s.fence.close()
	if s.ownReaper {
		s.reaper.Stop()
	}
	return err
}

// Addr is the address Serve listens on, or "" before Serve.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Info is what ping answers.
func (s *Server) Info() guest.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Shutdown ends every process: SIGTERM to each process group (and, with
// Config.SignalAll, to every process there is), up to grace for them to
// exit, SIGKILL to whatever is left, then sync(2). No process can be
// started afterwards; the server keeps serving.
func (s *Server) Shutdown(ctx context.Context, grace time.Duration) {
	s.services.close() // nothing starts again
	s.mu.Lock()
	s.stopping = true
	procs := s.listLocked()
	s.mu.Unlock()

	for _, p := range procs {
		_ = s.reaper.Kill(p.pid, sigTERM)
	}
	if s.cfg.SignalAll {
		_ = unix.Kill(-1, sigTERM) // everyone but ourselves
	}
	s.waitQuiet(ctx, procs, grace)
	for _, p := range procs {
		if !p.finished() {
			s.killTree(p)
		}
	}
	if s.cfg.SignalAll {
		_ = unix.Kill(-1, sigKILL)
	}
	// Give the kernel a moment to deliver the kills, so that what sync
	// writes is the final state; SIGKILL cannot be refused.
	s.waitQuiet(ctx, procs, time.Second)
	syncFS()
}

// waitQuiet waits up to limit until every process in procs has exited
// and, with SignalAll, no other process is left alive.
func (s *Server) waitQuiet(ctx context.Context, procs []*proc, limit time.Duration) {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		quiet := true
		for _, p := range procs {
			if !p.hasExited() {
				quiet = false
				break
			}
		}
		if quiet && s.cfg.SignalAll {
			self := os.Getpid()
			for _, pe := range readProcTable() {
				if pe.pid != self && !pe.zombie {
					quiet = false
					break
				}
			}
		}
		if quiet {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

func (s *Server) proc(id string) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return nil, errdefs.NotFound("no process %q", id)
	}
	return p, nil
}

// listLocked returns the processes, oldest first.
func (s *Server) listLocked() []*proc {
	out := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}
