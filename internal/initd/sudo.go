package initd

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/initd/sudo"
)

// ServeSudo answers den's sudo (internal/initd/sudo) on ln until it is
// closed: commands of root and of the group sudo, run as den-init runs
// processes.
func (s *Server) ServeSudo(ln *net.UnixListener) error {
	return sudo.New(sudoHost{s}, s.cfg.EtcDir, s.log).Serve(ln)
}

// sudoHost is the process table as sudo sees it (sudo.Host).
type sudoHost struct{ s *Server }

func (h sudoHost) Stopping() bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.stopping
}

func (h sudoHost) HoldsSecrets(pid int) bool { return h.s.holdsSecrets(pid) }

func (h sudoHost) LookPath(argv0 string, env []string, cwd string) (string, error) {
	return lookPath(argv0, envValue(env, "PATH"), cwd)
}

func (h sudoHost) Start(forkExec func() (int, error), exited func(unix.WaitStatus)) (int, error) {
	return h.s.reaper.Start(func() (int, error) { return h.s.limits.fork(forkExec) }, exited)
}

func (h sudoHost) Kill(pid int, sig syscall.Signal) bool { return h.s.reaper.Kill(pid, sig) }
