package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	pb "github.com/den-dev/den/internal/e2b/envdpb/process"
	"github.com/den-dev/den/internal/e2b/envdpb/process/processconnect"
)

// process.Process over den's runs. A process is a run, named by its pid
// inside the sandbox, which pause, hibernation and restore keep, or by
// its tag, which Start gives the run as its label "tag":
//
//	Start          an attached exec (with stdin: a detached one, whose
//	               output is followed), the Connect deadline as its timeout
//	Connect        following a running run's output from where it is now
//	List           the runs still running in the sandbox's generation
//	SendInput      POST .../runs/{run}/stdin?close=false (a terminal's too)
//	CloseStdin     POST .../runs/{run}/stdin (empty)
//	SendSignal     POST .../runs/{run}/signal
//	Update         POST .../runs/{run}/resize
//	StreamInput    SendInput, for each data message of a client stream
//
// A terminal (Start with pty) is a detached TTY run whose output is
// followed.
//
// A stream that ends because the sandbox was paused or killed is cut
// without an end, as E2B's proxy cuts it: the SDK then asks /health, gets
// 502, and says the sandbox is gone.
type processes struct {
	processconnect.UnimplementedProcessHandler
	d *Door
}

var _ processconnect.ProcessHandler = (*processes)(nil)

// keepaliveHeader says, in seconds, how often an idle stream should carry
// a keepalive; the SDK sends 50.
const keepaliveHeader = "Keepalive-Ping-Interval"

func (p *processes) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	t := targetOf(ctx)
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("no command: set process.cmd"))
	}
	er := api.ExecRequest{Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(), User: t.user, Cwd: cfg.GetCwd()}
	if tag := req.Msg.GetTag(); tag != "" {
		er.Labels = map[string]string{tagLabel: tag}
	}
	if er.Cwd == "" {
		er.Cwd = "~" // the user's home, from the sandbox's passwd
	} else {
		er.Cwd = t.abs(er.Cwd)
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the call's deadline passed before the command started"))
		}
		er.Timeout = api.Duration(left)
	}
	ev := newEvents(req.Header(), func(e *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: e}) })
	defer ev.stop()
	if pty := req.Msg.Pty; pty != nil {
		// A terminal: detached, its input through SendInput, its output
		// followed.
		er.TTY, er.Rows, er.Cols = true, uint16(pty.GetSize().GetRows()), uint16(pty.GetSize().GetCols())
		if er.Rows == 0 || er.Cols == 0 {
			er.Rows, er.Cols = 24, 80
		}
	}
	if req.Msg.GetStdin() || er.TTY {
		run, err := t.c.ExecDetached(ctx, t.sb.ID, withStdin(er))
		if err != nil {
			return rpcError(err)
		}
		if err := ev.start(run.PID); err != nil {
			return err
		}
		return p.follow(ctx, t, run, 0, 0, ev)
	}
	run, err := t.c.Exec(ctx, t.sb.ID, er, client.ExecIO{
		Stdout:  ev.writer(stdout),
		Stderr:  ev.writer(stderr),
		Started: func(run *api.Run) { ev.start(run.PID) },
	})
	return p.finish(ctx, t, run, err, ev)
}

func withStdin(er api.ExecRequest) api.ExecRequest {
	er.Stdin = true
	return er
}

// Connect streams a running process's output from now on, and its end.
func (p *processes) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	t := targetOf(ctx)
	run, err := p.find(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	ev := newEvents(req.Header(), func(e *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: e}) })
	defer ev.stop()
	if err := ev.start(run.PID); err != nil {
		return err
	}
	return p.follow(ctx, t, run, run.StdoutSize, run.StderrSize, ev)
}

func (p *processes) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	t := targetOf(ctx)
	runs, err := p.running(ctx, t)
	if err != nil {
		return nil, err
	}
	out := &pb.ListResponse{}
	for _, run := range runs {
		cfg := &pb.ProcessConfig{Cmd: run.Argv[0], Args: run.Argv[1:], Envs: map[string]string{}}
		switch {
		case run.Cwd == "~" && run.User == "":
			cfg.Cwd = ptr(home("root"))
		case run.Cwd == "~":
			cfg.Cwd = ptr(home(run.User))
		case run.Cwd != "":
			cfg.Cwd = ptr(run.Cwd)
		}
		info := &pb.ProcessInfo{Pid: uint32(run.PID), Config: cfg}
		if tag, ok := run.Labels[tagLabel]; ok {
			info.Tag = &tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

func (p *processes) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	t := targetOf(ctx)
	run, err := p.find(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := t.c.SendStdin(ctx, t.sb.ID, run.ID, bytes.NewReader(inputBytes(req.Msg.GetInput())), false); err != nil {
		return nil, p.endedAsNotFound(err, run)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// inputBytes is what an input carries: for a process's stdin, or for its
// terminal, which den feeds the same way.
func inputBytes(in *pb.ProcessInput) []byte {
	if _, ok := in.GetInput().(*pb.ProcessInput_Pty); ok {
		return in.GetPty()
	}
	return in.GetStdin()
}

// StreamInput feeds a process's input from a client stream: a start
// naming the process first, then data, each sent on as SendInput sends
// it, in order; keepalives are skipped. It answers once the stream ends.
// (E2B's JS SDK never calls it: browsers' fetch cannot stream a request.)
func (p *processes) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	t := targetOf(ctx)
	var run *api.Run
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			if run != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a second start event: one stream feeds one process"))
			}
			found, err := p.find(ctx, t, ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			run = found
		case *pb.StreamInputRequest_Data:
			if run == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input before the start event that names the process"))
			}
			if err := t.c.SendStdin(ctx, t.sb.ID, run.ID, bytes.NewReader(inputBytes(ev.Data.GetInput())), false); err != nil {
				return nil, p.endedAsNotFound(err, run)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, rpcError(err)
	}
	if run == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no start event: the stream must name its process first"))
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// Update resizes a process's terminal.
func (p *processes) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	t := targetOf(ctx)
	size := req.Msg.GetPty().GetSize()
	if size.GetRows() == 0 || size.GetCols() == 0 || size.GetRows() > 65535 || size.GetCols() > 65535 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid terminal size %dx%d", size.GetCols(), size.GetRows()))
	}
	run, err := p.find(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := t.c.ResizeRun(ctx, t.sb.ID, run.ID, uint16(size.GetRows()), uint16(size.GetCols())); err != nil {
		return nil, p.endedAsNotFound(err, run)
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

func (p *processes) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	t := targetOf(ctx)
	run, err := p.find(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := t.c.SendStdin(ctx, t.sb.ID, run.ID, http.NoBody, true); err != nil {
		return nil, p.endedAsNotFound(err, run)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (p *processes) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	t := targetOf(ctx)
	var sig string
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = "KILL"
	case pb.Signal_SIGNAL_SIGTERM:
		sig = "TERM"
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unknown signal %v: send SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.GetSignal()))
	}
	run, err := p.find(ctx, t, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := t.c.Signal(ctx, t.sb.ID, run.ID, sig); err != nil {
		return nil, p.endedAsNotFound(err, run)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

// endedAsNotFound: a run that ended between finding it and acting on it
// is, to E2B, a process that is no longer there.
func (p *processes) endedAsNotFound(err error, run *api.Run) error {
	if client.IsConflict(err) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", run.PID))
	}
	return rpcError(err)
}

// running lists the runs still running in the sandbox's generation.
func (p *processes) running(ctx context.Context, t *target) ([]api.Run, error) {
	runs, err := t.c.RunningRuns(ctx, t.sb.ID)
	if err != nil {
		return nil, rpcError(err)
	}
	var out []api.Run
	for _, r := range runs {
		if r.Status == api.RunRunning && r.Generation == t.sb.Generation && r.PID > 0 && len(r.Argv) > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// tagLabel is the label of a run that holds its E2B process tag.
const tagLabel = "tag"

// find is the running run sel names: by pid, or by tag (the newest of
// those that carry it; den lists running runs newest first).
func (p *processes) find(ctx context.Context, t *target, sel *pb.ProcessSelector) (*api.Run, error) {
	_, byTag := sel.GetSelector().(*pb.ProcessSelector_Tag)
	pid, tag := int(sel.GetPid()), sel.GetTag()
	switch {
	case byTag && tag == "":
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an empty tag: give the tag the process was started with, or its pid"))
	case !byTag && pid == 0:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no process: give its pid or its tag"))
	}
	runs, err := p.running(ctx, t)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		if byTag && runs[i].Labels[tagLabel] == tag || !byTag && runs[i].PID == pid {
			return &runs[i], nil
		}
	}
	if byTag {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process tagged %q", tag))
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process with pid %d", pid))
}

// follow streams a run's output from the given offsets until it ends,
// then its end.
func (p *processes) follow(ctx context.Context, t *target, run *api.Run, outFrom, errFrom int64, ev *events) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range []struct {
		stream string
		from   int64
		kind   int
	}{{api.StreamStdout, outFrom, outputKind(run)}, {api.StreamStderr, errFrom, stderr}} {
		g.Go(func() error {
			rc, err := t.c.FollowLogs(gctx, t.sb.ID, run.ID, s.stream, s.from, false)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(ev.writer(s.kind), rc)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctxError(ctx)
		}
		if ev.sendErr() != nil {
			return ev.sendErr() // the client went away
		}
		// The follow stopped short of the run's end: the sandbox was put
		// to sleep or killed under it.
		p.d.log.Debug("e2b: process stream cut", "sandbox", t.sb.ID, "run", run.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
	final, err := t.c.GetRun(ctx, t.sb.ID, run.ID)
	return p.finish(ctx, t, final, err, ev)
}

// finish ends a process's stream as the run ended: an end event, or the
// deadline, or, when the sandbox went away under it, a cut connection.
func (p *processes) finish(ctx context.Context, t *target, run *api.Run, err error, ev *events) error {
	switch {
	case err != nil && ctx.Err() != nil:
		return ctxError(ctx)
	case err != nil && ev.sendErr() != nil:
		return ev.sendErr()
	case err != nil && !ev.started():
		return rpcError(err) // refused before it started: den's reason
	case err != nil || run.Status == api.RunLost:
		p.d.log.Debug("e2b: process stream cut", "sandbox", t.sb.ID, "err", err)
		panic(http.ErrAbortHandler)
	case run.Status == api.RunTimedOut:
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("process %d ran past the call's timeout and was killed", run.PID))
	}
	end := &pb.ProcessEvent_EndEvent{}
	switch {
	case run.Status == api.RunKilled || run.Signal != "":
		end.ExitCode, end.Status = -1, "signal: "+signalName(run.Signal)
	case run.ExitCode != nil:
		end.ExitCode, end.Exited, end.Status = int32(*run.ExitCode), true, "exit status "+strconv.Itoa(*run.ExitCode)
	}
	if !end.Exited || end.ExitCode != 0 {
		end.Error = ptr(end.Status)
	}
	return ev.send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
}

// signalName is how Go (and so envd) names a signal: "killed" for KILL.
func signalName(sig string) string {
	if n := unix.SignalNum("SIG" + sig); n != 0 {
		return syscall.Signal(n).String()
	}
	return sig
}

func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the call's timeout passed"))
	}
	return connect.NewError(connect.CodeCanceled, ctx.Err())
}

// Output kinds.
const (
	stdout = iota
	stderr
	ptyOut // a terminal's, all of it
)

// outputKind is how a run's stdout is sent: as a terminal's for a TTY.
func outputKind(run *api.Run) int {
	if run.TTY {
		return ptyOut
	}
	return stdout
}

// events sends a process's events on one stream: the start, output,
// keepalives while nothing else goes, and the end. It is safe for
// concurrent use.
type events struct {
	mu      sync.Mutex
	sendFn  func(*pb.ProcessEvent) error
	err     error // the first failed send
	begun   bool
	last    time.Time
	stopped chan struct{}
	once    sync.Once
}

func newEvents(h http.Header, send func(*pb.ProcessEvent) error) *events {
	ev := &events{sendFn: send, stopped: make(chan struct{}), last: time.Now()}
	go ev.keepalive(keepaliveInterval(h))
	return ev
}

// keepaliveInterval is how often an idle stream carries a keepalive: as
// often as the client asks, 50 s by default.
func keepaliveInterval(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get(keepaliveHeader)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 50 * time.Second
}

func (ev *events) keepalive(interval time.Duration) {
	tick := time.NewTicker(interval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ev.stopped:
			return
		case <-tick.C:
			ev.mu.Lock()
			idle := ev.begun && time.Since(ev.last) >= interval/2
			ev.mu.Unlock()
			if idle {
				ev.send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}})
			}
		}
	}
}

func (ev *events) stop() { ev.once.Do(func() { close(ev.stopped) }) }

func (ev *events) send(e *pb.ProcessEvent) error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.err != nil {
		return ev.err
	}
	if err := ev.sendFn(e); err != nil {
		ev.err = err
		return err
	}
	ev.last = time.Now()
	return nil
}

func (ev *events) start(pid int) error {
	err := ev.send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(pid)}}})
	ev.mu.Lock()
	ev.begun = true
	ev.mu.Unlock()
	return err
}

func (ev *events) started() bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.begun
}

func (ev *events) sendErr() error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.err
}

// writer sends what is written to it as output of kind.
func (ev *events) writer(kind int) io.Writer { return eventWriter{ev, kind} }

type eventWriter struct {
	ev   *events
	kind int
}

func (w eventWriter) Write(b []byte) (int, error) {
	data := &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
	switch w.kind {
	case stderr:
		data.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
	case ptyOut:
		data.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: b}
	}
	if err := w.ev.send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data}}); err != nil {
		return 0, err
	}
	return len(b), nil
}
