package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/limiting"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/peering"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/rebase"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/usage"
)

// The real service needs runsc and root; these fakes stand at the network
// boundary the handlers talk across, and record every call so tests can
// also assert that bad input reached nothing.

// call is one recorded call: the method and its arguments.
type call struct {
	Method string
	Args   []any
}

// recorder of calls, shared by the fakes of one test.
type calls struct {
	mu   sync.Mutex
	list []call
}

func (c *calls) add(method string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, call{method, args})
}

func (c *calls) all() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// find returns the calls of one method.
func (c *calls) find(method string) []call {
	var out []call
	for _, cl := range c.all() {
		if cl.Method == method {
			out = append(out, cl)
		}
	}
	return out
}

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSandboxes implements SandboxService. Every method records its call,
// then answers with err when it is set, else from the fields.
type fakeSandboxes struct {
	calls *calls
	err   error // returned by every method when set

	sandboxes []*sandbox.Sandbox
	run       *sandbox.Run      // what Exec and Run return
	final     *sandbox.Run      // what Run returns once set (the finished run)
	output    map[string]string // stream → what Logs writes
	files     *fakeFiles

	target      netip.AddrPort // what PortTarget answers
	checkpoints []*sandbox.Checkpoint
	defaults    idle.Policy // dend's defaults, for EffectivePolicy
	due         idle.Due    // what Due answers

	// Optional behaviours that replace the defaults.
	execFn  func(ctx context.Context, p sandbox.ExecParams) (*sandbox.Run, error)
	logsFn  func(ctx context.Context, stream string, from int64, follow bool, w io.Writer) error
	stdinFn func(ctx context.Context, r io.Reader) error
	panicOn string // method that panics
}

func newFakeSandboxes(c *calls) *fakeSandboxes {
	code := 0
	end := testTime.Add(time.Second)
	return &fakeSandboxes{
		calls: c,
		sandboxes: []*sandbox.Sandbox{{
			ID: "sb1", Name: "alpha", State: sandbox.StateRunning, Generation: 2,
			Spec:      sandbox.Spec{Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Env: map[string]string{"A": "1"}},
			CreatedAt: testTime, UpdatedAt: testTime,
		}},
		run: &sandbox.Run{ID: "run1", SandboxID: "sb1", Generation: 2, Argv: []string{"echo", "hi"},
			Status: sandbox.RunRunning, StartedAt: testTime},
		final: &sandbox.Run{ID: "run1", SandboxID: "sb1", Generation: 2, Argv: []string{"echo", "hi"},
			Status: sandbox.RunExited, ExitCode: &code, StartedAt: testTime, EndedAt: &end, StdoutSize: 3},
		output: map[string]string{"stdout": "hi\n"},
		files:  &fakeFiles{calls: c},
		checkpoints: []*sandbox.Checkpoint{{
			ID: "ck1", SandboxID: "sb1", Name: "base", Kind: sandbox.CheckpointManual, Memory: true, Generation: 2,
			Manifest:  sandbox.Manifest{Engine: sandbox.EngineInfo{Version: "release-20260905.0"}, MemoryBytes: 3 << 20, FilesBytes: 40 << 20},
			CreatedAt: testTime, NeededBy: []string{"kid"},
		}, {
			ID: "ck2", SandboxID: "sb1", Kind: sandbox.CheckpointManual, Parent: "ck1", Generation: 2,
			Manifest:  sandbox.Manifest{FilesBytes: 41 << 20},
			CreatedAt: testTime.Add(time.Minute),
		}},
		defaults: idle.Policy{PauseAfter: new(5 * time.Minute), HibernateAfter: new(time.Hour)},
	}
}

func (f *fakeSandboxes) enter(method string, args ...any) error {
	f.calls.add(method, args...)
	if f.panicOn == method {
		panic("fake panic in " + method)
	}
	return f.err
}

func (f *fakeSandboxes) Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Sandbox, error) {
	if err := f.enter("Create", p); err != nil {
		return nil, err
	}
	return &sandbox.Sandbox{ID: "sb2", Name: p.Name, State: sandbox.StateRunning, Generation: 1,
		Spec:      sandbox.Spec{Image: p.Image, CPUs: p.CPUs, MemoryBytes: p.MemoryBytes, Env: p.Env, Labels: p.Labels},
		CreatedAt: testTime, UpdatedAt: testTime}, nil
}

func (f *fakeSandboxes) Get(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Get", ref); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

func (f *fakeSandboxes) GetOwned(ctx context.Context, owner, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("GetOwned", owner, ref); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

func (f *fakeSandboxes) List(ctx context.Context) ([]*sandbox.Sandbox, error) {
	if err := f.enter("List"); err != nil {
		return nil, err
	}
	return f.sandboxes, nil
}

func (f *fakeSandboxes) Start(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Start", ref); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

func (f *fakeSandboxes) Stop(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Stop", ref); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.State = sandbox.StateStopped
	return &sb, nil
}

func (f *fakeSandboxes) Remove(ctx context.Context, ref string, force bool) error {
	return f.enter("Remove", ref, force)
}

func (f *fakeSandboxes) Metrics(ctx context.Context, ref string, from, to time.Time) ([]usage.Sample, error) {
	if err := f.enter("Metrics", ref); err != nil {
		return nil, err
	}
	return []usage.Sample{{At: testTime, CPUPercent: 12.5, CPUs: 1, MemoryBytes: 1 << 20}}, nil
}

func (f *fakeSandboxes) Events(ctx context.Context, ref string) ([]sandbox.Event, error) {
	if err := f.enter("Events", ref); err != nil {
		return nil, err
	}
	return []sandbox.Event{{Seq: 1, Time: testTime, Type: sandbox.EventCreated, To: sandbox.StateCreating, Generation: 0}}, nil
}

func (f *fakeSandboxes) Address(sb *sandbox.Sandbox) string { return "10.77.0.2" }

func (f *fakeSandboxes) Exec(ctx context.Context, ref string, p sandbox.ExecParams) (*sandbox.Run, error) {
	if err := f.enter("Exec", ref, p); err != nil {
		return nil, err
	}
	if f.execFn != nil {
		return f.execFn(ctx, p)
	}
	run := *f.run
	run.TTY, run.Detached = p.TTY, p.Detach
	return &run, nil
}

func (f *fakeSandboxes) Runs(ctx context.Context, ref string, limit int) ([]*sandbox.Run, error) {
	if err := f.enter("Runs", ref, limit); err != nil {
		return nil, err
	}
	return []*sandbox.Run{f.final}, nil
}

func (f *fakeSandboxes) RunningRuns(ctx context.Context, ref string) ([]*sandbox.Run, error) {
	if err := f.enter("RunningRuns", ref); err != nil {
		return nil, err
	}
	return []*sandbox.Run{}, nil
}

func (f *fakeSandboxes) Run(ctx context.Context, ref, runID string) (*sandbox.Run, error) {
	if err := f.enter("Run", ref, runID); err != nil {
		return nil, err
	}
	return f.final, nil
}

func (f *fakeSandboxes) Logs(ctx context.Context, ref, runID, stream string, from int64, how runlogs.Follow, w io.Writer) error {
	follow := how != runlogs.FollowNo
	if err := f.enter("Logs", ref, runID, stream, from, follow); err != nil {
		return err
	}
	if f.logsFn != nil {
		return f.logsFn(ctx, stream, from, follow, w)
	}
	out := f.output[stream]
	if from > int64(len(out)) {
		return nil
	}
	_, err := io.WriteString(w, out[from:])
	return err
}

func (f *fakeSandboxes) Stdin(ctx context.Context, ref, runID string, r io.Reader, keepOpen bool) error {
	if err := f.enter("Stdin", ref, runID, keepOpen); err != nil {
		return err
	}
	if f.stdinFn != nil {
		return f.stdinFn(ctx, r)
	}
	_, err := io.Copy(io.Discard, r)
	return err
}

func (f *fakeSandboxes) Resize(ctx context.Context, ref, runID string, rows, cols uint16) error {
	return f.enter("Resize", ref, runID, rows, cols)
}

func (f *fakeSandboxes) Signal(ctx context.Context, ref, runID, sig string) error {
	return f.enter("Signal", ref, runID, sig)
}

func (f *fakeSandboxes) Files(ctx context.Context, ref string) (sandbox.Files, error) {
	if err := f.enter("Files", ref); err != nil {
		return nil, err
	}
	return f.files, nil
}

// withState returns a copy of the first sandbox in state st.
func (f *fakeSandboxes) withState(st sandbox.State) *sandbox.Sandbox {
	sb := *f.sandboxes[0]
	sb.State = st
	return &sb
}

func (f *fakeSandboxes) Pause(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Pause", ref); err != nil {
		return nil, err
	}
	return f.withState(sandbox.StatePaused), nil
}

func (f *fakeSandboxes) Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Resume", ref); err != nil {
		return nil, err
	}
	return f.withState(sandbox.StateRunning), nil
}

func (f *fakeSandboxes) Hibernate(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("Hibernate", ref); err != nil {
		return nil, err
	}
	sb := f.withState(sandbox.StateHibernated)
	sb.Checkpoint = "ck-h"
	return sb, nil
}

func (f *fakeSandboxes) Checkpoint(ctx context.Context, ref string, p sandbox.CheckpointParams) (*sandbox.Checkpoint, error) {
	if err := f.enter("Checkpoint", ref, p); err != nil {
		return nil, err
	}
	return &sandbox.Checkpoint{ID: "ck3", SandboxID: "sb1", Name: p.Name, Kind: sandbox.CheckpointManual,
		Parent: "ck2", Memory: !p.FSOnly, Generation: 2, CreatedAt: testTime}, nil
}

func (f *fakeSandboxes) Checkpoints(ctx context.Context, ref string) ([]*sandbox.Checkpoint, error) {
	if err := f.enter("Checkpoints", ref); err != nil {
		return nil, err
	}
	return f.checkpoints, nil
}

func (f *fakeSandboxes) GetCheckpoint(ctx context.Context, ref, ckpt string) (*sandbox.Checkpoint, error) {
	if err := f.enter("GetCheckpoint", ref, ckpt); err != nil {
		return nil, err
	}
	for _, c := range f.checkpoints {
		if c.ID == ckpt || c.Name == ckpt {
			return c, nil
		}
	}
	return nil, errdefs.NotFound("no checkpoint %q", ckpt)
}

func (f *fakeSandboxes) ReceiveAhead(ctx context.Context, from string, h fleet.Handover, r io.Reader, whole func() error) error {
	return f.enter("ReceiveAhead", from, h.Sandbox, h.Part)
}

func (f *fakeSandboxes) Rehome(ctx context.Context, ref string) (string, error) {
	return "", f.enter("Rehome", ref)
}

func (f *fakeSandboxes) LostNodeHint(ctx context.Context, sb *sandbox.Sandbox) string {
	return "wait for node " + sb.Node
}

func (f *fakeSandboxes) FindCheckpoint(ctx context.Context, ref string) (*sandbox.Checkpoint, error) {
	if err := f.enter("FindCheckpoint", ref); err != nil {
		return nil, err
	}
	for _, c := range f.checkpoints {
		if c.ID == ref {
			return c, nil
		}
	}
	return nil, errdefs.NotFound("no checkpoint %q", ref)
}

func (f *fakeSandboxes) RemoveCheckpoint(ctx context.Context, ref, ckpt string) error {
	return f.enter("RemoveCheckpoint", ref, ckpt)
}

func (f *fakeSandboxes) Restore(ctx context.Context, ref, ckpt string) (*sandbox.Sandbox, error) {
	if err := f.enter("Restore", ref, ckpt); err != nil {
		return nil, err
	}
	sb := f.withState(sandbox.StateRunning)
	sb.Generation++
	sb.Head = ckpt
	return sb, nil
}

func (f *fakeSandboxes) SetSetup(ctx context.Context, ref string, c rebase.SetupChange) (*sandbox.Sandbox, error) {
	if err := f.enter("SetSetup", ref, c); err != nil {
		return nil, err
	}
	sb := f.withState(sandbox.StateRunning)
	if c.Steps != nil {
		sb.Spec.Setup = *c.Steps
	}
	if c.Keep != nil {
		sb.Spec.Keep = *c.Keep
	}
	return sb, nil
}

func (f *fakeSandboxes) Rebase(ctx context.Context, ref string, p rebase.Params) (*rebase.Result, error) {
	if err := f.enter("Rebase", ref, p); err != nil {
		return nil, err
	}
	sb := f.withState(sandbox.StateRunning)
	sb.Generation++
	return &rebase.Result{Sandbox: sb, Checkpoint: &sandbox.Checkpoint{ID: "ck9"}, From: "debian@1", To: "debian@2",
		Kept: []string{"/root"}, Steps: []sandbox.StepResult{{Step: 1, Command: "true", RunID: "run1"}}}, nil
}

func (f *fakeSandboxes) SetHarness(ctx context.Context, ref string, h sandbox.Harness) (*rebase.HarnessResult, error) {
	if err := f.enter("SetHarness", ref, h); err != nil {
		return nil, err
	}
	sb := f.withState(sandbox.StateRunning)
	sb.Spec.Harness = &h
	return &rebase.HarnessResult{Sandbox: sb, Checkpoint: &sandbox.Checkpoint{ID: "ck8"},
		Steps: []sandbox.StepResult{{Step: 1, Harness: true, Command: "true", RunID: "run2"}}}, nil
}

func (f *fakeSandboxes) RemoveHarness(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	if err := f.enter("RemoveHarness", ref); err != nil {
		return nil, err
	}
	return f.withState(sandbox.StateRunning), nil
}

func (f *fakeSandboxes) Fork(ctx context.Context, ref string, p sandbox.ForkParams) ([]*sandbox.Sandbox, error) {
	if err := f.enter("Fork", ref, p); err != nil {
		return nil, err
	}
	n := max(p.Count, 1)
	var out []*sandbox.Sandbox
	for i := range n {
		name := p.Name
		if n > 1 {
			name = fmt.Sprintf("%s-%d", p.Name, i+1)
		}
		out = append(out, &sandbox.Sandbox{ID: "child" + fmt.Sprint(i+1), Name: name, State: sandbox.StateRunning,
			Generation: 1, Spec: f.sandboxes[0].Spec, Origin: "ck-fork", CreatedAt: testTime, UpdatedAt: testTime})
	}
	return out, nil
}

func (f *fakeSandboxes) RecoverSandbox(ctx context.Context, ref string, p sandbox.RecoverParams) (*sandbox.Sandbox, error) {
	if err := f.enter("RecoverSandbox", ref, p); err != nil {
		return nil, err
	}
	return f.withState(sandbox.StateRunning), nil
}

func (f *fakeSandboxes) Move(ctx context.Context, ref string, p fleet.MoveParams) (*sandbox.Sandbox, error) {
	if err := f.enter("Move", ref, p); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.Node = p.To
	return &sb, nil
}

func (f *fakeSandboxes) Adopt(ctx context.Context, id, from string, cold bool) (*sandbox.Sandbox, error) {
	if err := f.enter("Adopt", id, from); err != nil {
		return nil, err
	}
	return f.withState(sandbox.StateRunning), nil
}

func (f *fakeSandboxes) SetPolicy(ctx context.Context, ref string, p idle.Policy) (*sandbox.Sandbox, error) {
	if err := f.enter("SetPolicy", ref, p); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.Policy = p.Merge(sb.Policy)
	return &sb, nil
}

func (f *fakeSandboxes) SetNetwork(ctx context.Context, ref string, p netpolicy.Policy) (*sandbox.Sandbox, error) {
	if err := f.enter("SetNetwork", ref, p); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.Spec.Network = p
	return &sb, nil
}

func (f *fakeSandboxes) SetSecrets(ctx context.Context, ref string, grants []grant.Grant) (*sandbox.Sandbox, error) {
	if err := f.enter("SetSecrets", ref, grants); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.Spec.Secrets = grants
	return &sb, nil
}

func (f *fakeSandboxes) Peers(ctx context.Context, ref string) ([]peers.Peer, error) {
	if err := f.enter("Peers", ref); err != nil {
		return nil, err
	}
	return f.sandboxes[0].Spec.Peers, nil
}

func (f *fakeSandboxes) AddPeer(ctx context.Context, ref string, p peering.Params) (*sandbox.Sandbox, *peers.Peer, error) {
	if err := f.enter("AddPeer", ref, p); err != nil {
		return nil, nil, err
	}
	peer := peers.Peer{ID: "v1", Sandbox: p.Other, SandboxID: "sb9", At: p.At, Checkpoint: p.Checkpoint, TakenAt: testTime}
	return f.sandboxes[0], &peer, nil
}

func (f *fakeSandboxes) RefreshPeer(ctx context.Context, ref, peer string, p peering.Params) (*sandbox.Sandbox, *peers.Peer, error) {
	if err := f.enter("RefreshPeer", ref, peer, p); err != nil {
		return nil, nil, err
	}
	return f.sandboxes[0], &peers.Peer{ID: "v2", At: "/peers/x", TakenAt: testTime}, nil
}

func (f *fakeSandboxes) RemovePeer(ctx context.Context, ref, peer string, restart bool) (*sandbox.Sandbox, error) {
	if err := f.enter("RemovePeer", ref, peer, restart); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

func (f *fakeSandboxes) ExposePort(ctx context.Context, ref string, port uint16, public bool) (*sandbox.Sandbox, error) {
	if err := f.enter("ExposePort", ref, port, public); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	sb.Spec.Ports = []expose.Port{{Port: port, Public: public}}
	return &sb, nil
}

func (f *fakeSandboxes) UnexposePort(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error) {
	if err := f.enter("UnexposePort", ref, port); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

func (f *fakeSandboxes) RevokePortLinks(ctx context.Context, ref string, port uint16) (*sandbox.Sandbox, error) {
	if err := f.enter("RevokePortLinks", ref, port); err != nil {
		return nil, err
	}
	return f.sandboxes[0], nil
}

// PortTarget answers target, a server the test runs, for every port.
func (f *fakeSandboxes) PortTarget(ctx context.Context, ref string, port uint16) (netip.AddrPort, error) {
	if err := f.enter("PortTarget", ref, port); err != nil {
		return netip.AddrPort{}, err
	}
	if !f.target.IsValid() {
		return netip.AddrPort{}, errdefs.NotFound("port %d of sandbox %q is not exposed", port, ref)
	}
	return f.target, nil
}

func (f *fakeSandboxes) Processes(ctx context.Context, ref string) ([]guest.Process, error) {
	if err := f.enter("Processes", ref); err != nil {
		return nil, err
	}
	return []guest.Process{{PID: 7, PPID: 1, Name: "sleep", Command: "sleep 100", State: "S", RSSBytes: 4096}}, nil
}

func (f *fakeSandboxes) SetLimits(ctx context.Context, ref string, c limiting.Change) (*sandbox.Sandbox, error) {
	if err := f.enter("SetLimits", ref, c); err != nil {
		return nil, err
	}
	sb := *f.sandboxes[0]
	if c.PIDs != nil {
		sb.Spec.PIDs = *c.PIDs
	}
	return &sb, nil
}

func (f *fakeSandboxes) Resources(ctx context.Context, sb *sandbox.Sandbox) (sandbox.ResourceUsage, sandbox.DiskQuota) {
	return sandbox.ResourceUsage{MemoryBytes: 1 << 20, PIDs: 3}, sandbox.DiskQuota{}
}

func (f *fakeSandboxes) Hold(ctx context.Context, ref string) func() { return func() {} }

func (f *fakeSandboxes) EffectivePolicy(sb *sandbox.Sandbox) idle.Policy {
	return sb.Policy.Merge(f.defaults)
}

func (f *fakeSandboxes) Due(sb *sandbox.Sandbox) idle.Due { return f.due }

// fakeFiles implements sandbox.Files over one file, "/root/a.txt".
type fakeFiles struct {
	calls   *calls
	err     error
	content string
	written string // the last WriteFile's or WriteTar's body
	// watch are the events a Watch sends, then watchErr ends it.
	watch    []guest.WatchEvent
	watchErr error
	// acting is the user each call was made as ("" for root).
	acting []string
}

func (ff *fakeFiles) enter(ctx context.Context, method string, args ...any) error {
	ff.calls.add("Files."+method, args...)
	ff.acting = append(ff.acting, guest.ActingUser(ctx))
	return ff.err
}

func (ff *fakeFiles) info(p string) guest.FileInfo {
	name := p[strings.LastIndexByte(p, '/')+1:]
	return guest.FileInfo{Name: name, Path: p, Size: int64(len(ff.content)), Mode: 0o644, Type: "file", ModTime: testTime}
}

func (ff *fakeFiles) Stat(ctx context.Context, p string) (guest.FileInfo, error) {
	if err := ff.enter(ctx, "Stat", p); err != nil {
		return guest.FileInfo{}, err
	}
	return ff.info(p), nil
}

func (ff *fakeFiles) ReadDir(ctx context.Context, p string) ([]guest.FileInfo, error) {
	if err := ff.enter(ctx, "ReadDir", p); err != nil {
		return nil, err
	}
	return []guest.FileInfo{ff.info(p + "/a.txt")}, nil
}

func (ff *fakeFiles) ReadFile(ctx context.Context, p string) (io.ReadCloser, guest.FileInfo, error) {
	if err := ff.enter(ctx, "ReadFile", p); err != nil {
		return nil, guest.FileInfo{}, err
	}
	return io.NopCloser(strings.NewReader(ff.content)), ff.info(p), nil
}

func (ff *fakeFiles) WriteFile(ctx context.Context, p string, r io.Reader, o guest.WriteOptions) error {
	args := []any{p, o.Mode}
	if o.User != "" || o.Parents {
		args = append(args, o.User, o.Parents)
	}
	if err := ff.enter(ctx, "WriteFile", args...); err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	ff.written = string(b)
	return err
}

func (ff *fakeFiles) Mkdir(ctx context.Context, req guest.MkdirRequest) error {
	args := []any{req.Path, req.Parents, req.Mode}
	if req.User != "" {
		args = append(args, req.User)
	}
	return ff.enter(ctx, "Mkdir", args...)
}

func (ff *fakeFiles) Remove(ctx context.Context, p string, recursive bool) error {
	return ff.enter(ctx, "Remove", p, recursive)
}

func (ff *fakeFiles) Move(ctx context.Context, from, to string) error {
	return ff.enter(ctx, "Move", from, to)
}

func (ff *fakeFiles) ReadTar(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := ff.enter(ctx, "ReadTar", p); err != nil {
		return nil, err
	}
	return io.NopCloser(strings.NewReader("tar:" + ff.content)), nil
}

func (ff *fakeFiles) Watch(ctx context.Context, dir string, recursive bool, ready func(), each func(guest.WatchEvent) error) error {
	if err := ff.enter(ctx, "Watch", dir, recursive); err != nil {
		return err
	}
	ready()
	for _, ev := range ff.watch {
		if err := each(ev); err != nil {
			return err
		}
	}
	return ff.watchErr
}

func (ff *fakeFiles) WriteTar(ctx context.Context, dir string, r io.Reader) error {
	if err := ff.enter(ctx, "WriteTar", dir); err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	ff.written = string(b)
	return err
}

// env is one test's API: a server over fakes, and what it logged.
type env struct {
	t      *testing.T
	calls  *calls
	sbx    *fakeSandboxes
	img    *fakeImages
	logBuf *syncBuffer
	srv    *httptest.Server
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t *testing.T, configure ...func(*Config)) *env {
	t.Helper()
	c := &calls{}
	e := &env{t: t, calls: c, sbx: newFakeSandboxes(c), img: newFakeImages(c), logBuf: &syncBuffer{}}
	cfg := Config{
		Sandboxes: e.sbx,
		Rebase:    e.sbx,
		Policies:  e.sbx,
		Grants:    e.sbx,
		Limits:    e.sbx,
		Network:   e.sbx,
		Ports:     e.sbx,
		Recover:   e.sbx,
		Samples:   e.sbx,
		Logs:      e.sbx,
		Runs:      e.sbx,
		Images:    e.img,
		Fleet:     e.sbx,
		Peers:     e.sbx,
		Logger:    slog.New(slog.NewJSONHandler(e.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),

		Checkpoints: e.sbx,
	}
	for _, f := range configure {
		f(&cfg)
	}
	e.srv = httptest.NewServer(Local(New(cfg))) // root, as on the unix socket
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request and returns the response with its body read.
func (e *env) do(method, path string, body io.Reader, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b
}

// noCalls fails the test if any fake was called.
func (e *env) noCalls() {
	e.t.Helper()
	if got := e.calls.all(); len(got) > 0 {
		e.t.Errorf("service was called: %v", got)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func (c call) String() string { return fmt.Sprintf("%s%v", c.Method, c.Args) }
