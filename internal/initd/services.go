package initd

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

// serviceHooksOf are the supervisor's hooks on s's process table: a
// service's run is a process like any other (GET /v1/procs lists it, and
// its output is streamed and acknowledged the same way), whose id dend
// records as the run's.
func (s *Server) serviceHooksOf() serviceHooks {
	return serviceHooks{start: s.startService, probe: s.probeService}
}

func (s *Server) startService(spec guest.ServiceSpec) (serviceRun, error) {
	p, err := s.startProc(guest.ProcSpec{Argv: spec.Argv, Env: spec.Env, Cwd: spec.Cwd, User: spec.User})
	if err != nil {
		return serviceRun{}, err
	}
	return serviceRun{
		id: p.id, pid: p.pid, exited: p.exitedCh,
		exit: func() guest.ServiceExit {
			st := p.Status()
			ex := guest.ServiceExit{Code: st.ExitCode, Signal: st.Signal, At: time.Now().UTC()}
			if st.EndedAt != nil {
				ex.At = *st.EndedAt
			}
			return ex
		},
		signal: func(sig syscall.Signal) { s.reaper.Kill(p.pid, sig) },
	}, nil
}

// probeService checks a service's readiness once: its port accepts on
// 127.0.0.1, or its command exits 0 within a few seconds.
func (s *Server) probeService(ctx context.Context, spec guest.ServiceSpec) bool {
	if spec.ReadyPort > 0 {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(spec.ReadyPort)))
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	return s.runCheck(ctx, spec)
}

// runCheck runs spec's readiness command with /bin/sh as the service's
// environment has it, its output dropped, and reports whether it exited
// 0 within 10 seconds.
func (s *Server) runCheck(ctx context.Context, spec guest.ServiceSpec) bool {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	cwd := spec.Cwd
	if cwd == "" || cwd == guest.HomeDir {
		cwd = "/"
	}
	exited := make(chan unix.WaitStatus, 1)
	pid, err := s.reaper.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", spec.ReadyCmd}, &syscall.ProcAttr{
			Dir: cwd, Env: spec.Env, Files: []uintptr{null.Fd(), null.Fd(), null.Fd()},
			Sys: &syscall.SysProcAttr{Setpgid: true},
		})
	}, func(ws unix.WaitStatus) { exited <- ws })
	if err != nil {
		return false
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case ws := <-exited:
		return ws.Exited() && ws.ExitStatus() == 0
	case <-ctx.Done():
	case <-t.C:
	}
	s.reaper.Kill(pid, syscall.SIGKILL)
	return false
}

// handleSetServices is PUT /v1/services.
func (s *Server) handleSetServices(w http.ResponseWriter, r *http.Request) error {
	var req guest.ServicesRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, sp := range req.Services {
		if sp.Name == "" || len(sp.Argv) == 0 || seen[sp.Name] {
			return errdefs.Invalid("service %q: a name, once, and a command are needed", sp.Name)
		}
		seen[sp.Name] = true
	}
	httpio.WriteJSON(w, http.StatusOK, s.services.set(req.Services))
	return nil
}

// handleServices is GET /v1/services[?after=N].
func (s *Server) handleServices(w http.ResponseWriter, r *http.Request) error {
	after := uint64(0)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errdefs.Invalid("after %q is not a version", v)
		}
		after = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), guest.ServicesWait)
	defer cancel()
	httpio.WriteJSON(w, http.StatusOK, s.services.wait(ctx, after))
	return nil
}

// handleRestartService is POST /v1/services/{name}/restart.
func (s *Server) handleRestartService(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !s.services.restart(name) {
		return errdefs.NotFound("no service %q", name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
