// Package pgtest starts a real PostgreSQL server for tests and benchmarks:
// Debian's postgresql package, a cluster made by initdb in a temporary
// directory, served on a free loopback port and a private unix socket,
// and removed when it stops. Tests get a fresh, empty database each.
//
// When the caller is root the server runs as an unprivileged user
// (nobody), as PostgreSQL requires. It is started as the caller's child
// with a parent-death signal rather than daemonized by pg_ctl, so a test
// binary killed by a timeout takes its server with it.
//
// Start fails, saying why, when PostgreSQL is missing or does not come up:
// tests that need it fail rather than skip.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/testproc"
)

// Password is the superuser's password: clients connect over TCP with
// it, as a fleet's dends would.
const Password = "den-test-password"

// superuser is the role initdb makes.
const superuser = "den"

// Options tune the server.
type Options struct {
	// Durable keeps fsync and synchronous commit on, as a production
	// server has them (benchmarks); tests leave it off for speed.
	Durable bool
	// Dir, when set, holds the cluster, its socket and its log
	// (server.log): made if missing, and left for the caller at Stop,
	// which keeps what the server logged. Unset: a temporary directory
	// Stop removes.
	Dir string
}

// Server is a running PostgreSQL cluster. Stop it when done.
type Server struct {
	dir  string // the cluster's directory
	keep bool   // dir is the caller's: Stop leaves it
	port int
	// bin, data, cred and o are how the server was started: Resume
	// starts it so again.
	bin, data string
	cred      *syscall.Credential
	o         Options
	cmd       *exec.Cmd
	done      <-chan struct{} // closed when the server process has exited
	log       *os.File

	mu     sync.Mutex
	closed bool
	n      atomic.Int64 // databases made
}

// Start makes a cluster in o.Dir, or a temporary directory, and starts
// it.
func Start(ctx context.Context, o Options) (s *Server, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, keep := o.Dir, o.Dir != ""
	if keep {
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "den-pgtest-")
	}
	if err != nil {
		return nil, fmt.Errorf("making the cluster's directory: %w", err)
	}
	defer func() {
		if err != nil && !keep {
			os.RemoveAll(dir)
		}
	}()
	cred, err := serverUser(dir)
	if err != nil {
		return nil, err
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--pwfile", pwfile, "--auth-host=scram-sha-256", "--auth-local=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s = &Server{dir: dir, keep: keep, log: logf, done: make(chan struct{}), bin: bin, data: data, cred: cred, o: o}
	// The port is picked free and may be taken before the server binds
	// it: try a few.
	for try := 0; try < 5; try++ {
		if s.port, err = testproc.FreePort(); err != nil {
			logf.Close()
			return nil, err
		}
		if err = s.run(ctx, bin, data, cred, o); err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	logf.Close()
	return nil, err
}

var errPortTaken = errors.New("port taken")

// run starts the server process and waits until it accepts connections.
func (s *Server) run(ctx context.Context, bin, data string, cred *syscall.Credential, o Options) error {
	args := []string{"-D", data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
		"-c", "shared_buffers=64MB", "-c", "log_min_messages=warning"}
	if !o.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Dir = s.dir
	// SIGQUIT is PostgreSQL's immediate shutdown.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	done, err := testproc.Start(s.cmd)
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			s.done = done
			return nil
		}
		select {
		case <-done:
			logText := s.logTail()
			if strings.Contains(logText, "Address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("postgres exited while starting: %s", logText)
		case <-ctx.Done():
			s.kill(done)
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.kill(done)
			return fmt.Errorf("postgres did not accept connections within 30s (last: %v): %s", err, s.logTail())
		}
	}
}

func (s *Server) kill(done <-chan struct{}) {
	s.cmd.Process.Signal(syscall.SIGQUIT)
	<-done
}

// logTail is the end of the server's log, for errors.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	t := strings.TrimSpace(string(b))
	if len(t) > 2000 {
		t = "..." + t[len(t)-2000:]
	}
	return t
}

// DSN is the address of database db as a client gives it.
func (s *Server) DSN(db string) string { return s.dsn(db) }

func (s *Server) dsn(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(superuser, Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the loopback port the server listens on.
func (s *Server) Port() int { return s.port }

// CreateDatabase makes a new, empty database and returns its name.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("den_test_%d", s.n.Add(1))
	if err := s.admin(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return name, nil
}

// DropDatabase removes a database, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// Halt shuts the server down as `pg_ctl stop -m fast` does (its
// sessions are ended, the cluster is kept): clients get errors until
// Resume starts it again. For tests of a database restart or outage.
func (s *Server) Halt() { s.signal(syscall.SIGINT) }

// Kill kills the server, as kill -9 of its processes would: the
// postmaster and every backend, so that its sessions end at once and
// nothing holds its shared memory when Resume starts it again (a
// postmaster refuses to start while a backend of the last one lives).
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	pgid := s.cmd.Process.Pid // its own process group (Setpgid)
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// signal sends the postmaster sig and waits for it to exit.
func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	testproc.Stop(s.cmd, s.done, sig, 10*time.Second)
}

// Resume starts a halted server again, on the same port, and waits
// until it accepts connections.
func (s *Server) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("resuming PostgreSQL: the server was stopped for good")
	}
	select {
	case <-s.done:
	default:
		return errors.New("resuming PostgreSQL: it is running")
	}
	if err := s.run(ctx, s.bin, s.data, s.cred, s.o); err != nil {
		return fmt.Errorf("resuming PostgreSQL on port %d: %w", s.port, err)
	}
	return nil
}

// Stop shuts the server down at once and removes its directory, unless
// it is Options.Dir.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	testproc.Stop(s.cmd, s.done, syscall.SIGQUIT, 10*time.Second)
	s.log.Close()
	if s.keep {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// binDir finds Debian's PostgreSQL binaries, the newest version first.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/initdb " +
		"(scripts/test-setup.sh installs Debian's postgresql package; run it, or `make test`)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// serverUser returns who the server runs as: nobody when the caller is
// root (PostgreSQL refuses to run as root), else the caller (nil). It
// hands dir to that user.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("finding the user postgres runs as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, fmt.Errorf("handing %s to nobody: %w", dir, err)
	}
	// nobody must reach dir through its parents.
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return nil, fmt.Errorf("postgres runs as nobody, who cannot enter %s (mode %s): set TMPDIR to a directory others can enter", p, fi.Mode().Perm())
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// The server a test binary shares, started on first use.
var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Main runs a test binary's tests, then stops the shared server if one
// was started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the shared server, if one was started: for a TestMain
// that does more than Main.
func StopShared() {
	if shared.s != nil {
		if err := shared.s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stopping the server:", err)
		}
	}
}

// Shared returns the test binary's server, starting it on first use. The
// test fails, with why, when it cannot start. Only a TestMain that calls
// Main stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.s, shared.err = Start(ctx, Options{})
	})
	if shared.err != nil {
		t.Fatalf("starting PostgreSQL for the test: %v", shared.err)
	}
	return shared.s
}

// NewDatabase makes a fresh database on the shared server and returns
// its DSN; it is dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name, err := s.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.DropDatabase(context.Background(), name); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s.DSN(name)
}
