// Package miniotest starts a real MinIO server for tests and benchmarks: the
// binary scripts/test-setup.sh builds from the Go module proxy, serving a
// temporary directory on a free loopback port with credentials made up for
// the run, and removed when it stops.
//
// The server is the caller's child with a parent-death signal, so a test
// binary killed by a timeout takes it along. Start fails, saying why, when
// the binary is missing: tests that need it fail rather than skip.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/den-dev/den/internal/testproc"
)

// Version is the MinIO module version scripts/test-setup.sh builds.
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// Binary is where scripts/test-setup.sh keeps the build; DEN_MINIO
// overrides it.
func Binary() string {
	if b := os.Getenv("DEN_MINIO"); b != "" {
		return b
	}
	return "/var/cache/den-test/minio-" + Version
}

// Server is a running MinIO. Stop it when done.
type Server struct {
	Endpoint  string // 127.0.0.1:PORT
	AccessKey string
	SecretKey string

	dir  string
	keep bool // dir is the caller's: Stop leaves it
	cmd  *exec.Cmd
	done <-chan struct{}
	log  *os.File

	mu      sync.Mutex
	stopped bool
}

// Start serves a fresh temporary directory, which Stop removes.
func Start(ctx context.Context) (*Server, error) { return StartIn(ctx, "") }

// StartIn serves dir (made if missing), which holds what the server
// stores (dir/data) and its log (dir/server.log), and which Stop leaves
// for the caller; "" is a fresh temporary directory, which Stop removes.
func StartIn(ctx context.Context, dir string) (s *Server, err error) {
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MinIO is not built: %s is missing (scripts/test-setup.sh builds it; run it, or `make test`)", bin)
	}
	keep := dir != ""
	if keep {
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "den-miniotest-")
	}
	if err != nil {
		return nil, fmt.Errorf("making MinIO's directory: %w", err)
	}
	defer func() {
		if err != nil && !keep {
			os.RemoveAll(dir)
		}
	}()
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s = &Server{dir: dir, keep: keep, log: logf, AccessKey: "den" + randHex(6), SecretKey: randHex(20)}
	for try := 0; try < 5; try++ {
		if err = s.run(ctx, bin); err == nil {
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

func (s *Server) run(ctx context.Context, bin string) error {
	port, err := testproc.FreePort()
	if err != nil {
		return err
	}
	s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return s.serve(ctx, bin)
}

// serve starts the server on s.Endpoint and waits until it is ready.
func (s *Server) serve(ctx context.Context, bin string) error {
	cport, err := testproc.FreePort()
	if err != nil {
		return err
	}
	s.cmd = exec.Command(bin, "server", filepath.Join(s.dir, "data"), "--quiet",
		"--address", s.Endpoint, "--console-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(cport)))
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done, err := testproc.Start(s.cmd)
	if err != nil {
		return fmt.Errorf("starting minio: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx, s.Endpoint) {
			s.done = done
			return nil
		}
		select {
		case <-done:
			text := s.logTail()
			if strings.Contains(text, "address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("minio exited while starting: %s", text)
		case <-ctx.Done():
			s.cmd.Process.Kill()
			<-done
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-done
			return fmt.Errorf("minio was not ready within 60s: %s", s.logTail())
		}
	}
}

// ready asks MinIO's readiness probe, then whether it checks credentials
// yet: the probe answers before the IAM subsystem is up, and a request
// then gets XMinioIAMNotInitialized instead of its answer (seen under load
// as a test's "unknown key" being told to try again).
func ready(ctx context.Context, endpoint string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	get := func(path string, auth string) (int, string, bool) {
		req, _ := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+endpoint+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
			req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
			req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), true
	}
	if code, _, ok := get("/minio/health/ready", ""); !ok || code != http.StatusOK {
		return false
	}
	// A key MinIO must look up: refused once IAM is up, "try again" before.
	code, body, ok := get("/", "AWS4-HMAC-SHA256 Credential=nosuchkey/"+time.Now().UTC().Format("20060102")+
		"/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00")
	return ok && code != http.StatusServiceUnavailable && !strings.Contains(body, "NotInitialized")
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	t := strings.TrimSpace(string(b))
	if len(t) > 2000 {
		t = "..." + t[len(t)-2000:]
	}
	return t
}

// Client is a minio-go client with the server's root credentials, for
// tests to look at and damage what den stored.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")})
}

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	return c.MakeBucket(ctx, name, minio.MakeBucketOptions{})
}

// URL is the --blobs URL of a prefix of bucket on this server.
func (s *Server) URL(bucket, prefix string) string {
	return "s3://" + bucket + "/" + prefix + "?endpoint=" + s.Endpoint + "&insecure=1"
}

// WriteCredentials writes the server's keys to path (mode 0600) as
// dend's --blobs-credentials reads them.
func (s *Server) WriteCredentials(path string) error {
	text := fmt.Sprintf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", s.AccessKey, s.SecretKey)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("writing MinIO's credentials: %w", err)
	}
	return nil
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server and removes its directory, unless StartIn was
// given it.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.done != nil { // else Kill ended it
		testproc.Stop(s.cmd, s.done, syscall.SIGTERM, 10*time.Second)
	}
	s.log.Close()
	if s.keep {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// Kill ends the server with SIGKILL, as a crash would, keeping what it
// stored: the blob store is unreachable until Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.done == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.done = nil
}

// Restart starts a server Kill ended again, on the same address, with
// what it stored.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.done != nil {
		return errors.New("restarting MinIO: it is not killed")
	}
	return s.serve(ctx, Binary())
}

// ForTest starts a server for one test and stops it when the test ends;
// the test fails, with why, when it cannot start.
func ForTest(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("starting MinIO for the test: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping MinIO: %v", err)
		}
	})
	return s
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
