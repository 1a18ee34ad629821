package sandbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/specs"
)

// Defaults for a new sandbox.
const (
	DefaultImage  = "debian"
	DefaultCPUs   = 1.0
	DefaultMemory = 1 << 30
)

// CreateParams is what a caller asks for when creating a sandbox.
type CreateParams struct {
	Name        string
	Image       string  // default DefaultImage
	CPUs        float64 // default DefaultCPUs
	MemoryBytes int64   // default DefaultMemory
	PIDs        int     // processes and threads at once; default DefaultPIDs(MemoryBytes)
	DiskBytes   int64   // cap on its files; default 0, none
	Env         map[string]string
	Labels      map[string]string
	// From is a checkpoint to start from instead of an image: its id, or
	// SANDBOX:NAME. The spec comes from the checkpoint; Image, CPUs and
	// MemoryBytes must then be unset.
	From string
	// Ephemeral sandboxes are destroyed when their TTL ends, keeping nothing.
	Ephemeral bool
	Policy    idle.Policy
	// Owner is the id of the API token creating it; "" for admin callers.
	Owner string
	// Network is what it may reach; nil means mode none, or, with From,
	// the checkpoint's policy.
	Network *netpolicy.Policy
	// Secrets are granted to its commands. A sandbox made from a
	// checkpoint or forked gets only these, never its origin's.
	Secrets []grant.Grant
	// Setup are shell commands run in order once it boots, and again by
	// every rebase; Keep the paths a rebase carries over besides
	// DefaultKeep.
	Setup []string
	Keep  []string
}

// ExecParams is what a caller asks for when running a command.
type ExecParams struct {
	Argv    []string
	Env     map[string]string
	Cwd     string
	User    string
	TTY     bool
	Stdin   bool
	Rows    uint16
	Cols    uint16
	Timeout time.Duration
	Detach  bool
	// Labels tag the run, as a sandbox's labels tag it, with the same
	// bounds (specs.ValidateLabels).
	Labels map[string]string
	// OutputMax is the most bytes kept of each output stream (head and
	// tail); 0 is dend's cap, and more than dend's cap is refused.
	OutputMax int64
}

// MaxArgvBytes bounds a command line.
const MaxArgvBytes = 128 << 10

// Validate checks an exec request.
func (p *ExecParams) Validate() error {
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return errdefs.WithHint(errdefs.Invalid("no command given"), "pass the command after --, e.g. `den exec NAME -- ls -l`")
	}
	n := 0
	for _, a := range p.Argv {
		n += len(a) + 1
		if strings.ContainsRune(a, 0) {
			return errdefs.Invalid("command argument contains a NUL byte")
		}
	}
	if n > MaxArgvBytes {
		return errdefs.TooLarge("command line is %d bytes, over the %d limit", n, MaxArgvBytes)
	}
	if p.Cwd != "" && p.Cwd != guest.HomeDir && !strings.HasPrefix(p.Cwd, "/") {
		return errdefs.WithHint(errdefs.Invalid("working directory %q is not absolute", p.Cwd), "use an absolute path inside the sandbox, e.g. /root, or ~ for the user's home")
	}
	if p.Timeout < 0 {
		return errdefs.Invalid("negative timeout %s", p.Timeout)
	}
	if p.OutputMax < 0 || p.OutputMax > 0 && p.OutputMax < runoutput.MinPerStream {
		return errdefs.WithHint(errdefs.Invalid("invalid output cap %d bytes", p.OutputMax),
			fmt.Sprintf("use a size of at least %s, e.g. 1M, or leave it out for dend's cap", size(runoutput.MinPerStream)))
	}
	if err := specs.ValidateLabels(p.Labels); err != nil {
		return err
	}
	return specs.ValidateEnv(p.Env)
}

// ParseMemory reads a size like "512M", "2G" or "1073741824" (bytes).
// Units are binary: 1G is 1024³ bytes.
func ParseMemory(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(s)
	if err != nil || n <= 0 {
		return 0, errdefs.WithHint(errdefs.Invalid("invalid memory size %q", s), "use a size like 512M or 2G")
	}
	return n, nil
}

// DefaultPIDs is the process limit of a sandbox created without one: one
// per MiB of memory, within [256, 32768], which keeps gVisor's host cost
// per process inside the engine's backstops.
func DefaultPIDs(memory int64) int {
	return min(max(int(memory>>20), 256), 32768)
}
