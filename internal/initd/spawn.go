package initd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/users"
)

// defaultPath is PATH when the process's environment has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// execution is a process ready to fork: what to run, as whom, and its
// standard files.
type execution struct {
	path string
	attr *syscall.ProcAttr
	// childEnds are the files the child gets; closed in den-init after fork.
	childEnds []*os.File
	// outputs are the read ends of stdout and stderr (for a terminal, its
	// master as stdout and nil).
	outputs [2]*os.File
	stdin   *os.File
	outIDs  []string
}

func (ex *execution) closeChildEnds() {
	for _, f := range ex.childEnds {
		f.Close()
	}
}

func (ex *execution) closeParentEnds() {
	for _, f := range ex.outputs {
		if f != nil {
			f.Close()
		}
	}
	if ex.stdin != nil && !slices.Contains(ex.outputs[:], ex.stdin) {
		ex.stdin.Close()
	}
}

// prepare checks spec and sets up everything a fork needs. On error
// nothing is left open.
func (s *Server) prepare(spec guest.ProcSpec) (*execution, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errdefs.Invalid("no command given")
	}
	for _, a := range slices.Concat(spec.Argv, spec.Env) {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errdefs.Invalid("argument or environment variable contains a NUL byte")
		}
	}
	// The user first: an unknown user is the error, not the home it
	// would have had.
	acct, err := users.Lookup(s.cfg.EtcDir, spec.User)
	if err != nil {
		return nil, err
	}
	cwd := spec.Cwd
	switch cwd {
	case "":
		cwd = "/"
	case guest.HomeDir:
		cwd = acct.Home
	}
	cwd, err = fspath.Clean(cwd)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, errdefs.WithHint(errdefs.Invalid("working directory %q does not exist", cwd),
			"create it first, or pick another")
	}
	env := processEnv(spec, acct)
	path, err := lookPath(spec.Argv[0], envValue(env, "PATH"), cwd)
	if err != nil {
		return nil, err
	}
	sys := &syscall.SysProcAttr{}
	if spec.User != "" {
		sys.Credential = &syscall.Credential{Uid: acct.UID, Gid: acct.GID, Groups: acct.Groups}
	}
	ex := &execution{path: path}
	if spec.TTY {
		err = ex.openTerminal(spec, sys)
	} else {
		err = ex.openPipes(spec, sys)
	}
	if err != nil {
		return nil, err
	}
	files := make([]uintptr, len(ex.childEnds))
	for i, f := range ex.childEnds {
		files[i] = f.Fd()
	}
	if spec.TTY {
		files = []uintptr{files[0], files[0], files[0]}
	}
	ex.attr = &syscall.ProcAttr{Dir: cwd, Env: env, Files: files, Sys: sys}
	return ex, nil
}

// openPipes gives the process pipes for stdout and stderr, and a pipe or
// /dev/null for stdin, in its own process group.
func (ex *execution) openPipes(spec guest.ProcSpec, sys *syscall.SysProcAttr) (err error) {
	defer func() {
		if err != nil {
			ex.closeChildEnds()
			ex.closeParentEnds()
		}
	}()
	sys.Setpgid = true
	var in *os.File
	if spec.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("creating stdin pipe: %w", err)
		}
		in, ex.stdin = r, w
	} else if in, err = os.Open(os.DevNull); err != nil {
		return fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	ex.childEnds = append(ex.childEnds, in)
	for i := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("creating %s pipe: %w", streamNames[i], err)
		}
		ex.outputs[i] = r
		ex.childEnds = append(ex.childEnds, w)
		var st unix.Stat_t
		if err := unix.Fstat(int(w.Fd()), &st); err == nil { // w: Fd would make r blocking
			ex.outIDs = append(ex.outIDs, fmt.Sprintf("pipe:[%d]", st.Ino))
		}
	}
	return nil
}

// openTerminal gives the process a new terminal as stdin, stdout and
// stderr, in a new session that has it as controlling terminal.
func (ex *execution) openTerminal(spec guest.ProcSpec, sys *syscall.SysProcAttr) error {
	master, tty, err := pty.Open()
	if err != nil {
		return fmt.Errorf("opening a terminal: %w", err)
	}
	defer master.Close()
	rows, cols := spec.Rows, spec.Cols
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	if err := pty.Setsize(tty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		tty.Close()
		return fmt.Errorf("sizing the terminal: %w", err)
	}
	// pty.Open leaves the master in blocking mode; a non-blocking copy
	// goes through Go's poller, so Close interrupts a pending read.
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		tty.Close()
		return fmt.Errorf("setting up the terminal: %w", err)
	}
	m := os.NewFile(uintptr(fd), "ptmx")
	ex.outputs[stdout] = m
	ex.stdin = m
	ex.childEnds = []*os.File{tty}
	ex.outIDs = []string{tty.Name()}
	sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	return nil
}

// processEnv is the environment the process gets: spec.Env, or den-init's
// own environment without its private variables, completed with PATH,
// HOME, USER and LOGNAME (and TERM for a terminal) when missing.
func processEnv(spec guest.ProcSpec, acct users.Account) []string {
	env := spec.Env
	if env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "DEN_INIT_") {
				env = append(env, kv)
			}
		}
	}
	env = slices.Clone(env)
	add := func(k, v string) {
		if _, ok := lookupEnv(env, k); !ok {
			env = append(env, k+"="+v)
		}
	}
	add("PATH", defaultPath)
	add("HOME", acct.Home)
	if acct.Name != "" {
		add("USER", acct.Name)
		add("LOGNAME", acct.Name)
	}
	if spec.TTY {
		add("TERM", "xterm-256color")
	}
	return env
}

func lookupEnv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func envValue(env []string, key string) string {
	v, _ := lookupEnv(env, key)
	return v
}

// lookPath finds the executable for argv0 the way a shell does: a name
// with a slash is a path (relative to cwd), others are searched in PATH.
func lookPath(argv0, pathEnv, cwd string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := isExecutable(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", errdefs.NotFound("executable %q not found", argv0)
			}
			return "", errdefs.Invalid("%q is not executable", argv0)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, argv0)
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", errdefs.WithHint(errdefs.NotFound("executable %q not found in PATH", argv0),
		"install it, or give its full path")
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// execError classifies a failed fork/exec.
func execError(argv0 string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return errdefs.NotFound("executable %q not found (or its interpreter is missing)", argv0)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return errdefs.Invalid("cannot run %q: permission denied", argv0)
	case errors.Is(err, unix.ENOEXEC):
		return errdefs.Invalid("cannot run %q: not an executable format", argv0)
	case errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EAGAIN):
		return errdefs.Unavailable("cannot run %q: out of memory or process slots", argv0)
	}
	return fmt.Errorf("starting %q: %w", argv0, err)
}
