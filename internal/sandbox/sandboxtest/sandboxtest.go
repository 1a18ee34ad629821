// Package sandboxtest builds a real sandbox core on a SQLite store for
// the tests of the packages above it: the verbs run through the core's
// own locks, records and events, and every port a test does not give is
// left empty, so a call the verb must not make panics on the nil
// interface rather than passing unseen.
//
// It is for tests only; no package's own code may import it.
package sandboxtest

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/sqlite"
)

// Ports a test does not give: each embeds the port's interface, nil.
type (
	noRuntime struct{ sandbox.Runtime }
	noVolumes struct{ sandbox.Volumes }
	noNetwork struct{ sandbox.Network }
	noImages  struct{ sandbox.Images }
)

// Store opens a SQLite store in a directory of the test's, closed when
// the test ends.
func Store(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Core returns a core made of cfg, closed when the test ends: a new
// Store when cfg has none, the ports cfg leaves nil empty, no guest to
// dial, and its run output and checkpoints in a directory of the test's.
func Core(t testing.TB, cfg sandbox.Config) *sandbox.Service {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = Store(t)
	}
	if cfg.Runtime == nil {
		cfg.Runtime = noRuntime{}
	}
	if cfg.Volumes == nil {
		cfg.Volumes = noVolumes{}
	}
	if cfg.Network == nil {
		cfg.Network = noNetwork{}
	}
	if cfg.Images == nil {
		cfg.Images = noImages{}
	}
	if cfg.Dial == nil {
		cfg.Dial = func(netip.AddrPort, string) sandbox.Guest { return nil }
	}
	dir := t.TempDir()
	cfg.RunsDir, cfg.CheckpointDir = filepath.Join(dir, "runs"), filepath.Join(dir, "checkpoints")
	svc, err := sandbox.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// Creator is the one method of a store Add uses.
type Creator interface {
	CreateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error
}

// Add records sb in st as created in its state, first filling what it
// leaves empty: its id ("id-" and its name), generation 1, the times,
// and a busybox spec with 1 CPU, 256 MiB and 512 processes.
func Add(t testing.TB, st Creator, sb *sandbox.Sandbox) *sandbox.Sandbox {
	t.Helper()
	now := time.Now().UTC()
	if sb.ID == "" {
		sb.ID = "id-" + sb.Name
	}
	if sb.Generation == 0 {
		sb.Generation = 1
	}
	if sb.Spec.Image == "" {
		sb.Spec.Image, sb.Spec.CPUs, sb.Spec.MemoryBytes, sb.Spec.PIDs = "busybox", 1, 256<<20, 512
	}
	sb.CreatedAt, sb.UpdatedAt = now, now
	if err := st.CreateSandbox(t.Context(), sb, sandbox.Event{SandboxID: sb.ID, Time: now, Type: sandbox.EventCreated, To: sb.State}); err != nil {
		t.Fatal(err)
	}
	return sb
}
