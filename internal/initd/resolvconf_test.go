package initd

import (
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// The limits call carries the resolver: den-init writes resolv.conf when
// it differs, replacing a symlink rather than writing through it, and
// leaves it alone when none is sent.
func TestLimitsWriteResolvConf(t *testing.T) {
	serve(t) // starts the test reaper
	etc := filepath.Join(t.TempDir(), "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Token: "tok", Reaper: testReaper, EtcDir: etc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base := serveServer(t, srv)
	path := filepath.Join(etc, "resolv.conf")
	elsewhere := filepath.Join(t.TempDir(), "stub-resolv.conf")
	if err := os.WriteFile(elsewhere, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	set := func(body string) {
		t.Helper()
		if resp, b := request(t, http.MethodPost, base+"/v1/limits", "tok", strings.NewReader(body)); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /v1/limits %s: %d %s", body, resp.StatusCode, b)
		}
	}
	const want = "nameserver 10.9.0.1\n"
	set(`{"resolv_conf": "nameserver 10.9.0.1\n"}`)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("resolv.conf: %v, %v; want a regular file, mode 0644", fi, err)
	}
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("resolv.conf holds %q, want %q", got, want)
	}
	if got, _ := os.ReadFile(elsewhere); string(got) != "nameserver 127.0.0.53\n" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	// The same content again: the file is not replaced.
	before, _ := os.Stat(path)
	set(`{"resolv_conf": "nameserver 10.9.0.1\n"}`)
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("resolv.conf was rewritten with what it held")
	}
	// Limits alone leave it as it is, even as the sandbox changed it.
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set(`{}`)
	if got, _ := os.ReadFile(path); string(got) != "nameserver 192.0.2.9\n" {
		t.Errorf("limits without a resolver changed resolv.conf to %q", got)
	}
	// A directory in its place: the call still succeeds, with a warning.
	os.Remove(path)
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	set(`{"resolv_conf": "nameserver 10.9.0.1\n"}`)
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		t.Errorf("the sandbox's directory at resolv.conf: %v, %v", fi, err)
	}
	if ents, _ := os.ReadDir(etc); len(ents) != 1 {
		t.Errorf("etc holds %v: a temporary file stayed", ents)
	}
}

// A rekey may bring the limits: den-init applies them before it takes
// the token, and answers that it did. Limits it cannot apply leave the
// token as it was.
func TestRekeyWithLimits(t *testing.T) {
	serve(t) // starts the test reaper
	etc := filepath.Join(t.TempDir(), "etc")
	srv, err := New(Config{Token: "tok", Reaper: testReaper, EtcDir: etc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(serveServer(t, srv), "http://")), "tok")
	defer c.Close()
	// Outside a sandbox den-init has no cgroups: a process limit cannot
	// apply.
	if _, err := c.Rekey(t.Context(), "0123456789abcdef-one", &guest.Limits{PIDs: 5}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("rekey with limits that cannot apply: %v, want unavailable", err)
	}
	if _, err := c.Ping(t.Context()); err != nil {
		t.Fatalf("a refused rekey changed the token: %v", err)
	}
	set, err := c.Rekey(t.Context(), "0123456789abcdef-two", &guest.Limits{ResolvConf: "nameserver 10.9.0.1\n"})
	if err != nil || !set {
		t.Fatalf("rekey with limits: set %v, %v; want true", set, err)
	}
	if got, _ := os.ReadFile(filepath.Join(etc, "resolv.conf")); string(got) != "nameserver 10.9.0.1\n" {
		t.Errorf("resolv.conf holds %q after the rekey", got)
	}
	if _, err := c.Ping(t.Context()); err != nil {
		t.Fatalf("client after the rekey: %v", err)
	}
}
