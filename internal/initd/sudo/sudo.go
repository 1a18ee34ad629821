// Package sudo is sudo inside a sandbox. gVisor does not honour the
// set-user-ID bit, so the real sudo cannot become root there. den-init,
// which is root, runs the commands instead: `sudo` in an image is a link to den-init's own
// binary (guest.InitPath), which, run under that name (Main), sends
// its command line, environment, working directory and standard files
// (SCM_RIGHTS) over the abstract unix socket Socket. den-init asks
// the kernel who is asking (SO_PEERCRED) and runs the command, as the
// user asked for, only for root and members of the group sudo, with the
// caller's own standard files, so its output goes where the caller's
// goes. It answers with the command's exit status once it ended. Signals
// the caller gets are passed on; a caller that goes away takes the
// command with it. A command holding secrets (Host.HoldsSecrets) is
// refused, wherever it moved itself: what it started would no longer be
// marked as a holder.
//
// Every message on the socket is a 4-byte big-endian length and JSON.
//
// It never starts, signals or waits for a process but through its Host
// (den-init's process table, which reaps every process and applies the
// limits), and runs nothing for a caller the kernel does not vouch for.
package sudo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/users"
)

// Socket is den-init's socket for sudo, in the abstract namespace.
const Socket = "@den-sudo"

// Group may run commands as anyone.
const Group = "sudo"

// Log keys.
const (
	keyPID   = "pid"
	keyArgv0 = "argv0"
)

// Host is what sudo asks of den-init's process table.
type Host interface {
	// Stopping reports whether the sandbox is shutting down: no process
	// may start any more.
	Stopping() bool
	// HoldsSecrets reports whether process pid may hold a secret.
	HoldsSecrets(pid int) bool
	// LookPath finds the executable for argv0 as den-init finds a
	// process's, in env's PATH, relative to cwd.
	LookPath(argv0 string, env []string, cwd string) (string, error)
	// Start starts a process with forkExec, within the sandbox's limits,
	// and calls exited with its wait status once it has been reaped
	// (from the reaper, so exited must not block).
	Start(forkExec func() (int, error), exited func(unix.WaitStatus)) (int, error)
	// Kill sends sig to the process group led by pid, if pid has not
	// been reaped yet; false when it was.
	Kill(pid int, sig syscall.Signal) bool
}

// Server answers sudo requests.
type Server struct {
	host Host
	etc  string // holds the passwd and group files users are looked up in
	log  *slog.Logger
}

// New returns a Server that runs commands through host, as the users of
// the passwd and group files in etc, the sandbox's own.
func New(host Host, etc string, log *slog.Logger) *Server {
	return &Server{host: host, etc: etc, log: log}
}

// sudoRequest asks den-init to run a command.
type sudoRequest struct {
	Argv []string `json:"argv"`
	User string   `json:"user,omitempty"` // as ProcSpec.User; "" is root
	Env  []string `json:"env"`            // HOME, USER and LOGNAME become the user's
	Cwd  string   `json:"cwd"`            // guest.HomeDir for the user's home
}

// sudoReply is den-init's answer: an error before the command started,
// or how it ended.
type sudoReply struct {
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"` // the signal that ended it
}

// sudoSignal is a signal the caller got, for the command.
type sudoSignal struct {
	Signal int `json:"signal"`
}

const maxSudoMessage = 1 << 20

// Listen opens den-init's sudo socket.
func Listen() (*net.UnixListener, error) { return listen(Socket) }

func listen(name string) (*net.UnixListener, error) {
	return net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
}

// Serve answers sudo requests on ln until it is closed.
func (s *Server) Serve(ln *net.UnixListener) error {
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.serve(conn)
	}
}

func (s *Server) serve(conn *net.UnixConn) {
	defer conn.Close()
	req, files, rd, err := readSudoRequest(conn)
	if err == nil {
		err = s.maySudo(conn)
	}
	var exited chan unix.WaitStatus
	var pid int
	if err == nil {
		pid, exited, err = s.startSudo(req, files)
	}
	for _, f := range files {
		f.Close() // the command has its own copies
	}
	if err != nil {
		_ = writeMessage(conn, sudoReply{Error: err.Error()})
		return
	}
	s.log.Debug("sudo started", keyPID, pid, keyArgv0, req.Argv[0])

	// The caller's signals, until it goes away.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			var sig sudoSignal
			if err := readMessage(rd, &sig); err != nil {
				return
			}
			if sig.Signal > 0 && sig.Signal < 65 {
				s.host.Kill(pid, syscall.Signal(sig.Signal))
			}
		}
	}()
	select {
	case ws := <-exited:
		reply := sudoReply{ExitCode: ws.ExitStatus()}
		if ws.Signaled() {
			reply.ExitCode, reply.Signal = -1, int(ws.Signal())
		}
		_ = writeMessage(conn, reply)
	case <-gone:
		s.host.Kill(pid, syscall.SIGKILL)
	}
}

// maySudo lets root and the members of Group in.
func (s *Server) maySudo(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("cannot tell who is asking: %w", credErr)
	}
	if s.host.HoldsSecrets(int(cred.Pid)) {
		return errors.New("a command holding secrets cannot use sudo: what it ran would not be marked as holding them " +
			"(run the command as root with `den exec --user root`, or use sudo from a command started without secrets)")
	}
	if cred.Uid == 0 {
		return nil
	}
	accounts, _ := users.ReadPasswd(filepath.Join(s.etc, "passwd"))
	groups, _ := users.ReadGroups(filepath.Join(s.etc, "group"))
	name := fmt.Sprint(cred.Uid)
	for _, u := range accounts {
		if u.UID == cred.Uid {
			name = u.Name
			for _, g := range groups {
				if g.Name == Group && (g.GID == u.GID || g.HasMember(u.Name)) {
					return nil
				}
			}
			break
		}
	}
	return fmt.Errorf("%s is not in the %s group: only its members may run commands as another user", name, Group)
}

// startSudo starts req's command with files as its standard files.
func (s *Server) startSudo(req sudoRequest, files []*os.File) (int, chan unix.WaitStatus, error) {
	if s.host.Stopping() {
		return 0, nil, errors.New("the sandbox is shutting down")
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return 0, nil, errors.New("no command given")
	}
	if len(files) != 3 {
		return 0, nil, fmt.Errorf("want the caller's 3 standard files, got %d", len(files))
	}
	acct, err := users.Lookup(s.etc, req.User)
	if err != nil {
		return 0, nil, errors.New(errdefs.Hint(err) + ": " + err.Error())
	}
	cwd := req.Cwd
	if cwd == guest.HomeDir || cwd == "" {
		cwd = acct.Home
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return 0, nil, fmt.Errorf("unable to change to directory %s", cwd)
	}
	env := withEnv(req.Env, "HOME", acct.Home)
	if acct.Name != "" {
		env = withEnv(withEnv(env, "USER", acct.Name), "LOGNAME", acct.Name)
	}
	path, err := s.host.LookPath(req.Argv[0], env, cwd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: command not found", req.Argv[0])
	}
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: acct.UID, Gid: acct.GID, Groups: acct.Groups}}}
	exited := make(chan unix.WaitStatus, 1)
	pid, err := s.host.Start(func() (int, error) { return syscall.ForkExec(path, req.Argv, attr) },
		func(ws unix.WaitStatus) { exited <- ws })
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", req.Argv[0], err)
	}
	return pid, exited, nil
}

// withEnv sets key in env.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// readSudoRequest reads the request and the files sent with it; rd reads
// what follows.
func readSudoRequest(conn *net.UnixConn) (req sudoRequest, files []*os.File, rd io.Reader, err error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return req, nil, conn, fmt.Errorf("reading the request: %w", err)
	}
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				files = append(files, os.NewFile(uintptr(fd), "sudo-stdio"))
			}
		}
	}
	rd = io.MultiReader(bytes.NewReader(buf[:n]), conn)
	if err := readMessage(rd, &req); err != nil {
		return req, files, rd, fmt.Errorf("reading the request: %w", err)
	}
	return req, files, rd, nil
}

func writeMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	_, err = w.Write(append(msg, b...))
	return err
}

func readMessage(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxSudoMessage {
		return fmt.Errorf("a message of %d bytes is over %d", n, maxSudoMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
