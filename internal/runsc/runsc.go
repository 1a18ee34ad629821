// Package runsc runs den's sandbox instances with gVisor's runsc CLI: one
// gVisor sandbox per instance, booted from an OCI bundle den writes, with
// one fixed set of global flags that later checkpoint and restore reuse
// unchanged.
package runsc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Config says where runsc and its files live.
type Config struct {
	Binary    string // path of the pinned runsc
	Root      string // runsc --root: engine state, e.g. /run/den/runsc
	BundleDir string // one OCI bundle directory per instance
	LogDir    string // one log file per instance: den-init's stdout and stderr
	// InitDir holds a directory per den-init version (see InstallInit),
	// one of which each instance gets at /.den (see initroot.go).
	InitDir string
	// ResolvConf is a host file mounted read-only at /etc/resolv.conf,
	// naming den's resolver, in instances whose den-init is mounted from
	// the host; none when empty. Others have den-init write the file.
	ResolvConf string
	Platform   string // default systrap
	Debug      bool   // pass --debug --debug-log to runsc
	// NoPacer turns the cgroup move pacer off (movepacer.go): each boot
	// then waits for the grace periods of a cgroup v1 host.
	NoPacer bool
}

// Runtime is the sandbox.Runtime over the runsc CLI.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	version string
	cpu     []string // what `runsc cpu-features` reported in New
	// exits tells of instances whose engine exited by itself (watch.go).
	exits exitWatcher
	// pace keeps cgroup v1 moves from waiting at each boot; nil where
	// they do not wait (movepacer.go).
	pace *movePacer
}

var (
	_ sandbox.Runtime     = (*Runtime)(nil)
	_ sandbox.HostWatcher = (*Runtime)(nil)
)

// New checks the binary and reads its version.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Runtime, error) {
	if cfg.Platform == "" {
		cfg.Platform = "systrap"
	}
	for _, d := range []string{cfg.Root, cfg.BundleDir, cfg.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating runsc directory: %w", err)
		}
	}
	out, err := exec.CommandContext(ctx, cfg.Binary, "--version").Output()
	if err != nil {
		return nil, errdefs.WithHint(
			errdefs.Unavailable("runsc at %s does not run: %v", cfg.Binary, err),
			"run `make setup` to build the pinned runsc")
	}
	v := strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "runsc version ")
	if v == "" || strings.Contains(v, "VERSION_MISSING") {
		return nil, errdefs.WithHint(
			errdefs.Unavailable("runsc at %s carries no version stamp", cfg.Binary),
			"checkpoints are only valid for one exact runsc version; rebuild it with `make setup`")
	}
	cpu, err := cpuFeatures(ctx, cfg.Binary)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{cfg: cfg, log: log, version: v, cpu: cpu}
	switch {
	case !cfg.NoPacer:
		rt.pace = newMovePacer(log, "/sys", "/proc/self/cgroup")
	case graceWaits("/sys"):
		log.Info("this host's cgroup v1 moves wait for RCU grace periods, which adds 10-25 ms to every boot, wake and fork; " +
			"`echo 1 > /sys/kernel/rcu_expedited` (as root, for the whole host) takes that off (see docs/install.md, Host tuning)")
	}
	return rt, nil
}

// cpuFeatures lists the CPU features runsc exposes to sandboxes on this
// host: a memory image only restores where all of its own are present.
func cpuFeatures(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, binary, "cpu-features").Output()
	if err != nil {
		return nil, errdefs.Unavailable("runsc at %s cannot list CPU features: %v", binary, err)
	}
	var fs []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), ",") {
		if f = strings.TrimSpace(f); f != "" {
			fs = append(fs, f)
		}
	}
	return fs, nil
}

// Version is the exact runsc version string, recorded in checkpoints.
func (r *Runtime) Version() string { return r.version }

// engineFlags are the global flags a memory image depends on: restore
// fails, or corrupts, when they differ from the checkpointing engine's.
func (r *Runtime) engineFlags() []string {
	return []string{
		"--platform=" + r.cfg.Platform,
		"--network=sandbox",
		"--overlay2=none",
		"--host-uds=none",
	}
}

// globalFlags are the same for every verb on an instance: restore refuses
// an instance whose flags changed since it was created.
func (r *Runtime) globalFlags(id string) []string {
	f := append([]string{"--root=" + r.cfg.Root}, r.engineFlags()...)
	if r.cfg.Debug && id != "" {
		f = append(f, "--debug", "--debug-log="+filepath.Join(r.cfg.LogDir, id+".runsc."))
	}
	return f
}

func (r *Runtime) command(ctx context.Context, id string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.cfg.Binary, append(r.globalFlags(id), args...)...)
	// A runsc verb must not outlive the dend that ran it: a restore left
	// running by a killed dend would bring back an instance the next dend
	// already settled. The sandbox processes it starts are its children
	// and do not inherit this.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// run executes a runsc verb and returns its stdout; failures carry stderr.
func (r *Runtime) run(ctx context.Context, id string, args ...string) ([]byte, error) {
	cmd := r.command(ctx, id, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("runsc %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Start writes the instance's bundle and boots it detached. It returns once
// runsc reports the container started; den-init may still be coming up.
func (r *Runtime) Start(ctx context.Context, inst sandbox.Instance) error {
	if inRoot(inst.Init) {
		if err := r.placeInit(inst.Rootfs, inst.Init); err != nil {
			return fmt.Errorf("booting instance %s: %w", inst.ID, err)
		}
	}
	return r.boot(ctx, inst, "booting", "run", "--detach")
}

// boot writes inst's bundle and runs verb (run or restore, with args) on
// it. The sandbox inherits runsc's stdout and stderr, den-init's log, so
// a failure carries what runsc wrote there.
func (r *Runtime) boot(ctx context.Context, inst sandbox.Instance, doing string, verb ...string) error {
	bundle, err := r.writeBundle(inst)
	if err != nil {
		return err
	}
	logPath := filepath.Join(r.cfg.LogDir, inst.ID+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening instance log: %w", err)
	}
	defer logf.Close()
	before, _ := logf.Seek(0, io.SeekEnd)

	if inRoot(inst.Init) {
		prefetchInit(inst.Rootfs)
	}
	if err := makeCgroupParent(cgroupRoot); err != nil {
		return fmt.Errorf("%s instance %s: %w", doing, inst.ID, err)
	}
	cmd := r.command(ctx, inst.ID, slices.Concat(verb, []string{"--bundle", bundle, inst.ID})...)
	cmd.Stdout, cmd.Stderr = logf, logf
	defer r.pace.hold()()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s instance %s: %w: %s", doing, inst.ID, err, tail(logPath, before))
	}
	return nil
}

// writeBundle writes inst's OCI bundle and returns its directory.
func (r *Runtime) writeBundle(inst sandbox.Instance) (string, error) {
	bundle := filepath.Join(r.cfg.BundleDir, inst.ID)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return "", fmt.Errorf("creating bundle for %s: %w", inst.ID, err)
	}
	spec, err := json.Marshal(r.spec(inst))
	if err != nil {
		return "", fmt.Errorf("encoding spec for %s: %w", inst.ID, err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o600); err != nil {
		return "", fmt.Errorf("writing spec for %s: %w", inst.ID, err)
	}
	return bundle, nil
}

// tail returns what runsc wrote to the log after offset, for error text.
func tail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= offset {
		return "no output"
	}
	s := strings.TrimSpace(string(b[offset:]))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

type stateJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Pid    int    `json:"pid"`
}

// State reads where an instance is from runsc's record (see control.go),
// or asks `runsc state` when den cannot read the record.
func (r *Runtime) State(ctx context.Context, id string) (sandbox.InstanceState, error) {
	st, err := r.state(ctx, id)
	if err != nil {
		if isMissing(err) {
			return sandbox.InstanceMissing, nil
		}
		return "", fmt.Errorf("reading state of %s: %w", id, err)
	}
	// runsc believes its record of a paused sandbox without looking:
	// check the sandbox process is really there.
	if (st.Status == "running" || st.Status == "created" || st.Status == "paused") && !alive(st.Pid) {
		return sandbox.InstanceStopped, nil
	}
	switch st.Status {
	case "running", "created":
		return sandbox.InstanceRunning, nil
	case "paused":
		return sandbox.InstancePaused, nil
	default:
		return sandbox.InstanceStopped, nil
	}
}

// Started reports whether the instance ever started: runsc records an
// instance "created" from when its sandbox is made until a start or a
// restore completes, so one still created with no runsc call under way
// had its boot or restore cut short. An instance that is gone counts as
// started: nothing of it waits to begin.
func (r *Runtime) Started(ctx context.Context, id string) (bool, error) {
	st, err := r.state(ctx, id)
	if err != nil {
		if isMissing(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading state of %s: %w", id, err)
	}
	return st.Status != "created", nil
}

// state is runsc's record of an instance: its status and sandbox pid.
func (r *Runtime) state(ctx context.Context, id string) (stateJSON, error) {
	rec, err := r.stateFile(id).read(ctx)
	switch {
	case err == nil:
		return stateJSON{ID: id, Status: rec.Status, Pid: rec.Sandbox.Pid}, nil
	case errors.Is(err, errNoRecord):
		return stateJSON{}, errdefs.NotFound("instance %s does not exist", id)
	case !errors.Is(err, errBadRecord):
		return stateJSON{}, err
	}
	out, err := r.run(ctx, id, "state", id)
	if err != nil {
		return stateJSON{}, err
	}
	var st stateJSON
	if err := json.Unmarshal(out, &st); err != nil {
		return stateJSON{}, fmt.Errorf("decoding state of %s: %w", id, err)
	}
	return st, nil
}

func isMissing(err error) bool {
	if errors.Is(err, errdefs.ErrNotFound) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "does not exist") || strings.Contains(s, "not found") ||
		strings.Contains(s, "no such file or directory")
}

// Destroy kills an instance and removes every trace runsc keeps of it.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	// delete --force kills the sandbox and waits for it.
	if _, err := r.run(ctx, id, "delete", "--force", id); err != nil && !isMissing(err) {
		return fmt.Errorf("destroying instance %s: %w", id, err)
	}
	if n := r.killStragglers(id); n > 0 {
		r.log.Warn("killed engine processes runsc had lost track of", "instance", id, "processes", n)
	}
	if err := removeCgroups(ctx, cgroupRoot, id); err != nil {
		r.log.Warn("destroying an instance", "instance", id, "err", err)
	}
	if err := os.RemoveAll(filepath.Join(r.cfg.BundleDir, id)); err != nil {
		return fmt.Errorf("removing bundle of %s: %w", id, err)
	}
	return nil
}

// List returns every instance runsc knows under den's root.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	out, err := r.run(ctx, "", "list", "--format=json")
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	var all []stateJSON
	if len(bytes.TrimSpace(out)) > 0 && !bytes.Equal(bytes.TrimSpace(out), []byte("null")) {
		if err := json.Unmarshal(out, &all); err != nil {
			return nil, fmt.Errorf("decoding instance list: %w", err)
		}
	}
	ids := make([]string, 0, len(all))
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	return ids, nil
}
