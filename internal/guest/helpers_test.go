package guest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd"
	"github.com/den-dev/den/internal/sandbox"
)

// The client is what dend uses as its sandbox.Guest.
var _ sandbox.Guest = (*guest.Client)(nil)

const testToken = "test-token"

// reaper is the test process's one reaper: every server shares it, as
// two would steal each other's exit statuses.
var reaper *initd.Reaper

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == initd.SecretExecArg {
		err := initd.SecretExec(os.Args[2:])
		os.Stderr.WriteString("secret exec: " + err.Error() + "\n")
		os.Exit(127)
	}
	r, err := initd.NewReaper(slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	reaper = r
	os.Exit(m.Run())
}

// serve runs a den-init server on 127.0.0.1 for the test and returns a
// client for it.
func serve(t testing.TB, tweak ...func(*initd.Config)) *guest.Client {
	t.Helper()
	c, _ := serveWith(t, tweak...)
	return c
}

// serveWith is serve that also returns the server.
func serveWith(t testing.TB, tweak ...func(*initd.Config)) (*guest.Client, *initd.Server) {
	t.Helper()
	cfg := initd.Config{
		Token:   testToken,
		Reaper:  reaper,
		Logger:  slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Version: "test",
	}
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := initd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	addr := netip.MustParseAddrPort(ln.Addr().String())
	c := guest.New(addr, testToken)
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, srv
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// result is a finished process: its output and final status.
type result struct {
	stdout, stderr string
	status         guest.ProcStatus
}

// run starts spec and streams it to the end.
func run(t *testing.T, c *guest.Client, spec guest.ProcSpec) result {
	t.Helper()
	ctx := context.Background()
	st, err := c.Start(ctx, spec)
	if err != nil {
		t.Fatalf("starting %q: %v", spec.Argv, err)
	}
	return streamAll(t, c, st.ID)
}

func streamAll(t *testing.T, c *guest.Client, id string) result {
	t.Helper()
	var out, errb bytes.Buffer
	st, err := c.Stream(context.Background(), id, 0, 0, func(kind byte, p []byte) error {
		if kind == guest.FrameStdout {
			out.Write(p)
		} else {
			errb.Write(p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("streaming %s: %v", id, err)
	}
	return result{out.String(), errb.String(), st}
}

func sh(script string) guest.ProcSpec {
	return guest.ProcSpec{Argv: []string{"sh", "-c", script}}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// processGone reports whether pid has left the process table: dead and
// reaped, not a zombie.
func processGone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
}
