package runsc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Pause and resume go straight to the engine instead of through a runsc
// process: starting runsc, loading its configuration and record, and
// connecting cost 10 to 80 ms per verb, while the call that stops the
// sandbox's kernel takes well under one. Reading where an instance is
// (State, and the pid its exit is watched by) reads runsc's record the
// same way, for the same reason: `runsc state` costs 7 ms of a core. The calls are the ones `runsc
// pause` and `runsc resume` make, in the same order with the same lock,
// so runsc's record of the instance stays what runsc itself would have
// written: `runsc state`, `runsc list` and every later runsc verb see a
// paused instance as paused.
//
// The engine's kernel counts pauses: a resume it did not pause is fatal to
// it. runsc's record is what keeps the two in step, so both verbs check it
// first and change it only after the engine answered, as runsc does.

// The engine's control protocol: one JSON call on a stream socket, one
// JSON answer.
type controlCall struct {
	Method string `json:"method"`
	Arg    any    `json:"arg"`
}

type controlAnswer struct {
	Success bool   `json:"success"`
	Err     string `json:"err"`
}

// stateFile is runsc's record of one instance, and the lock runsc takes
// around every change to it. den names instances and their sandboxes
// alike.
type stateFile struct {
	path, lock string
}

func (r *Runtime) stateFile(id string) stateFile {
	base := filepath.Join(r.cfg.Root, id+"_sandbox:"+id)
	return stateFile{path: base + ".state", lock: base + ".lock"}
}

var (
	// errNoRecord means runsc holds no record of the instance.
	errNoRecord = errors.New("no runsc record")
	// errBadRecord means runsc's record is not what den knows how to
	// read: another runsc version may have written it.
	errBadRecord = errors.New("decoding runsc's record")
	// errUnanswered means a call reached the engine but its answer did
	// not come back: the engine may have done it all the same.
	errUnanswered = errors.New("no answer")
)

// record is what den reads of runsc's record of an instance.
type record struct {
	Status  string `json:"status"`
	Sandbox struct {
		Pid               int    `json:"pid"`
		ControlSocketPath string `json:"controlSocketPath"`
	} `json:"sandbox"`
}

// read returns the instance's record as runsc last wrote it, under
// runsc's lock, so never half-written.
func (sf stateFile) read(ctx context.Context) (record, error) {
	var rec record
	err := sf.withRecord(ctx, func(r record) (string, error) {
		rec = r
		return r.Status, nil
	})
	return rec, err
}

// withRecord runs f on the instance's record under runsc's lock and
// writes back the status f returns, when it differs.
func (sf stateFile) withRecord(ctx context.Context, f func(rec record) (string, error)) error {
	lf, err := os.OpenFile(sf.lock, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return errNoRecord
	}
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := flock(ctx, lf); err != nil {
		return err
	}
	defer unix.Flock(int(lf.Fd()), unix.LOCK_UN)

	rf, err := os.OpenFile(sf.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return errNoRecord
	}
	if err != nil {
		return err
	}
	defer rf.Close()
	b, err := io.ReadAll(rf)
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("%w: %w", errBadRecord, err)
	}
	next, err := f(rec)
	if err != nil || next == rec.Status {
		return err
	}
	off, patch, err := statusPatch(b, next)
	if err != nil {
		return fmt.Errorf("changing runsc's record: %w", err)
	}
	if _, err := rf.WriteAt(patch, off); err != nil {
		return fmt.Errorf("changing runsc's record: %w", err)
	}
	return nil
}

// statusPatch finds where record's top-level status value lies and
// returns what to write there for status: the new value padded with
// spaces when shorter, or with the rest of the record after it when
// longer. The record never shrinks: truncating or replacing a file makes
// ext4 flush it, a millisecond, and runsc's reader takes trailing spaces.
func statusPatch(record []byte, status string) (int64, []byte, error) {
	dec := json.NewDecoder(bytes.NewReader(record))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, nil, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, nil, err
		}
		// The value starts after the colon and any space.
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, nil, err
		}
		end := dec.InputOffset()
		if key != "status" {
			continue
		}
		start = end - int64(len(v))
		// Padding left by an earlier patch is room to grow into.
		for end < int64(len(record)) && record[end] == ' ' {
			end++
		}
		val, err := json.Marshal(status)
		if err != nil {
			return 0, nil, err
		}
		if pad := int(end-start) - len(val); pad >= 0 {
			return start, append(val, bytes.Repeat([]byte{' '}, pad)...), nil
		}
		return start, append(val, record[end:]...), nil
	}
	return 0, nil, fmt.Errorf("no status in the record")
}

// send writes call to conn, with files' descriptors attached to its first
// bytes.
func send(conn net.Conn, call []byte, files []*os.File) error {
	if len(files) == 0 {
		_, err := conn.Write(call)
		return err
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return errors.New("passing files needs a unix socket")
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := uc.WriteMsgUnix(call, unix.UnixRights(fds...), nil)
	runtime.KeepAlive(files) // open until sent
	if err != nil {
		return err
	}
	_, err = conn.Write(call[n:])
	return err
}

// flock takes an exclusive lock on f, giving up when ctx ends. runsc
// holds it only for the length of a verb.
func flock(ctx context.Context, f *os.File) error {
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("locking runsc's record: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("locking runsc's record: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// setPaused moves an instance between running and paused through its
// control socket, as `runsc pause` or `runsc resume` would. The call is
// marked under way (unsettled.go) from before it is sent until its end
// is recorded, or known not to have changed the engine: a dend killed in
// between leaves the next one the mark to settle the record by.
func (r *Runtime) setPaused(ctx context.Context, id string, pause bool) error {
	from, to, method, verb := "running", "paused", "containerManager.Pause", verbPause
	if !pause {
		from, to, method, verb = "paused", "running", "containerManager.Resume", verbResume
	}
	// settled: the engine either did what it was asked, its end now in
	// the record, or surely did not.
	marked, settled := false, true
	err := r.stateFile(id).withRecord(ctx, func(rec record) (string, error) {
		if rec.Status != from && !(pause && rec.Status == "created") {
			return rec.Status, fmt.Errorf("instance %s is %s, not %s", id, rec.Status, from)
		}
		if err := r.markUnderWay(id, verb); err != nil {
			return rec.Status, err
		}
		marked = true
		if err := callEngine(ctx, rec, method, nil, nil); err != nil {
			settled = !errors.Is(err, errUnanswered)
			return rec.Status, err
		}
		// Until the record is written, the engine's new state is
		// known only to the mark.
		settled = false
		return to, nil
	})
	if err == nil {
		settled = true
	}
	if marked && settled {
		r.unmark(id)
	}
	return err
}

// callEngine makes one call on the control socket of the engine rec
// records. When the connection breaks under the call, the engine is most
// likely dying (a kill -9, the OOM killer): the kernel closes its socket
// before the process is dead, so the call waits a moment for it to be,
// and whoever asks the instance's state next learns the truth.
func callEngine(ctx context.Context, rec record, method string, arg any, files []*os.File) error {
	err := control(ctx, rec.Sandbox.ControlSocketPath, method, arg, files)
	if err != nil && ctx.Err() == nil && brokenConn(err) {
		deadline := time.Now().Add(engineExitWait)
		for alive(rec.Sandbox.Pid) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return err
}

// engineExitWait bounds how long a call whose connection broke waits for
// the engine's process to be gone.
const engineExitWait = time.Second

// brokenConn reports whether err is the control connection breaking, not
// an answer of the engine.
func brokenConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, unix.ECONNRESET) ||
		errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNREFUSED)
}

// control makes one call on an engine's control socket: method with arg,
// and files passed along as runsc's urpc does (with the call's first
// bytes).
func control(ctx context.Context, socket, method string, arg any, files []*os.File) error {
	if socket == "" {
		return errors.New("runsc's record names no control socket")
	}
	if len(socket) >= len(unix.RawSockaddrUnix{}.Path) {
		// Too long to connect to by name: by an open descriptor instead,
		// as runsc does.
		fd, err := unix.Open(socket, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening the engine's control socket: %w", err)
		}
		defer unix.Close(fd)
		socket = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("connecting to the engine: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	call, err := json.Marshal(controlCall{Method: method, Arg: arg})
	if err != nil {
		return err
	}
	if err := send(conn, call, files); err != nil {
		return fmt.Errorf("calling the engine: %w", err)
	}
	var ans controlAnswer
	dec := json.NewDecoder(conn)
	if err := dec.Decode(&ans); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("reading the engine's answer to %s: %w: %w", method, errUnanswered, err)
	}
	if !ans.Success {
		return fmt.Errorf("the engine refused %s: %s", method, strings.TrimSpace(ans.Err))
	}
	return nil
}
