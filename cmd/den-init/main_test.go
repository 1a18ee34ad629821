package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/guest"
)

// The test binary stands in for den-init when asked to.
func TestMain(m *testing.M) {
	if os.Getenv("DEN_INIT_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startInit runs den-init as a child process and returns a client for it.
func startInit(t *testing.T) (*exec.Cmd, *guest.Client) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DEN_INIT_TEST_MAIN=1",
		guest.EnvToken+"=secret", guest.EnvAddr+"=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// den-init logs where it listens; read its log until it says so.
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec.Msg == "serving" {
			go io.Copy(io.Discard, stderr)
			c := guest.New(netip.MustParseAddrPort(rec.Addr), "secret")
			t.Cleanup(c.Close)
			return cmd, c
		}
	}
	t.Fatal("den-init exited without serving")
	return nil, nil
}

func TestServesAndHidesItsEnvironment(t *testing.T) {
	_, c := startInit(t)
	ctx := context.Background()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sh", "-c", `echo "[$DEN_INIT_TOKEN][$DEN_INIT_ADDR]"`}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.Stream(ctx, st.ID, 0, 0, func(_ byte, p []byte) error { out.Write(p); return nil }); err != nil {
		t.Fatal(err)
	}
	if out.String() != "[][]\n" {
		t.Fatalf("children see %q", out.String())
	}
}

func TestSIGTERMEndsProcessesAndExits(t *testing.T) {
	cmd, c := startInit(t)
	ctx := context.Background()
	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("den-init exited with %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/stat")
		if errors.Is(err, os.ErrNotExist) || err == nil && strings.Contains(string(b), ") Z ") {
			break // gone, or a zombie waiting for the test process to reap it
		}
		if time.Now().After(deadline) {
			t.Fatal("the process outlived den-init")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRefusesToStartWithoutToken(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DEN_INIT_TEST_MAIN=1", guest.EnvToken+"=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), guest.EnvToken) {
		t.Fatalf("exit %v, output %s", err, out)
	}
}
