package exposing_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/exposing"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sandbox/sandboxtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// Exposing ports changes only records: a real store, and nothing behind
// the other ports, which these verbs must not touch (a call would panic on
// the nil interface).

// addrs is the one part of the network port PortTarget uses: pure
// arithmetic on the slot.
type addrs struct{ sandbox.Network }

func (addrs) Addr(slot int) (netip.Addr, netip.Addr) {
	return netip.AddrFrom4([4]byte{10, 9, 0, byte(2 * slot)}), netip.AddrFrom4([4]byte{10, 9, 0, byte(2*slot + 1)})
}

// service is the core and the ports' verbs over it.
type service struct {
	*sandbox.Service
	*exposing.Ports
}

func newExposeService(t *testing.T) (service, *sqlite.Store) {
	t.Helper()
	st := sandboxtest.Store(t)
	svc := sandboxtest.Core(t, sandbox.Config{Store: st, Network: addrs{}})
	return service{svc, exposing.New(exposing.Config{Sandboxes: svc})}, st
}

func addSandbox(t *testing.T, st *sqlite.Store, name string, state sandbox.State, slot int) {
	t.Helper()
	sandboxtest.Add(t, st, &sandbox.Sandbox{Name: name, State: state, Slot: slot})
}

// ports is what a sandbox exposes, without the link keys.
func ports(sb *sandbox.Sandbox) []expose.Port {
	var out []expose.Port
	for _, p := range sb.Spec.Ports {
		out = append(out, expose.Port{Port: p.Port, Public: p.Public})
	}
	return out
}

func TestExposePort(t *testing.T) {
	svc, st := newExposeService(t)
	addSandbox(t, st, "web", sandbox.StateStopped, 3)
	ctx := t.Context()

	sb, err := svc.ExposePort(ctx, "web", 8080, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ExposePort(ctx, "web", 3000, true); err != nil {
		t.Fatal(err)
	}
	// Again, the same: nothing changes, nothing is recorded.
	if sb, err = svc.ExposePort(ctx, "id-web", 3000, true); err != nil {
		t.Fatal(err)
	}
	want := []expose.Port{{Port: 3000, Public: true}, {Port: 8080}}
	if got := ports(sb); !slices.Equal(got, want) {
		t.Fatalf("ports %+v, want %+v", got, want)
	}
	key3000, _ := sb.Exposed(3000)
	key8080, _ := sb.Exposed(8080)
	if key3000.LinkKey == "" || key8080.LinkKey == "" || key3000.LinkKey == key8080.LinkKey {
		t.Fatalf("link keys %q and %q: want two, different", key3000.LinkKey, key8080.LinkKey)
	}
	// Again, private: only the flag changes, the link key stays.
	if sb, err = svc.ExposePort(ctx, "web", 3000, false); err != nil {
		t.Fatal(err)
	}
	if p, ok := sb.Exposed(3000); !ok || p.Public || p.LinkKey != key3000.LinkKey {
		t.Fatalf("port 3000 after making it private: %+v %v", p, ok)
	}
	stored, err := svc.Get(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got := ports(stored); !slices.Equal(got, []expose.Port{{Port: 3000}, {Port: 8080}}) {
		t.Fatalf("stored ports %+v", got)
	}
	if p, _ := stored.Exposed(3000); p.LinkKey != key3000.LinkKey {
		t.Fatalf("stored link key %q, want %q", p.LinkKey, key3000.LinkKey)
	}

	// Revoking its links gives the port a new key; the other keeps its.
	if sb, err = svc.RevokePortLinks(ctx, "web", 3000); err != nil {
		t.Fatal(err)
	}
	if p, _ := sb.Exposed(3000); p.LinkKey == "" || p.LinkKey == key3000.LinkKey {
		t.Fatalf("link key after revoking: %q, was %q", p.LinkKey, key3000.LinkKey)
	}
	if p, _ := sb.Exposed(8080); p.LinkKey != key8080.LinkKey {
		t.Fatalf("the other port's key changed: %q, was %q", p.LinkKey, key8080.LinkKey)
	}
	if _, err := svc.RevokePortLinks(ctx, "web", 9999); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("revoking the links of a port not exposed: %v, want not found", err)
	}

	if sb, err = svc.UnexposePort(ctx, "web", 3000); err != nil {
		t.Fatal(err)
	}
	if got := ports(sb); !slices.Equal(got, []expose.Port{{Port: 8080}}) {
		t.Fatalf("ports after unexposing 3000: %+v", got)
	}
	if _, err := svc.UnexposePort(ctx, "web", 3000); !errors.Is(err, errdefs.ErrNotFound) || errdefs.Hint(err) == "" {
		t.Errorf("unexposing a port not exposed: %v (hint %q), want not found with a hint", err, errdefs.Hint(err))
	}

	evs, err := svc.Events(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Type == sandbox.EventPorts {
			got = append(got, ev.Message)
		}
	}
	wantEvs := []string{"exposed port 8080 (private)", "exposed port 3000 (public)", "port 3000 made private", "signed links to port 3000 revoked", "unexposed port 3000"}
	if !slices.Equal(got, wantEvs) {
		t.Errorf("events %q, want %q", got, wantEvs)
	}
}

func TestExposePortBadInput(t *testing.T) {
	svc, st := newExposeService(t)
	addSandbox(t, st, "web", sandbox.StateStopped, 0)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		ref   string
		port  uint16
		class error
	}{
		{"port 0", "web", 0, errdefs.ErrInvalid},
		{"den-init's port", "web", 49900, errdefs.ErrInvalid},
		{"unknown sandbox", "nope", 8080, errdefs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.ExposePort(ctx, tc.ref, tc.port, true)
			if !errors.Is(err, tc.class) || errdefs.Hint(err) == "" {
				t.Errorf("expose: %v (hint %q), want %v with a hint", err, errdefs.Hint(err), tc.class)
			}
			if _, err := svc.UnexposePort(ctx, tc.ref, tc.port); !errors.Is(err, tc.class) {
				t.Errorf("unexpose: %v, want %v", err, tc.class)
			}
			if _, err := svc.PortTarget(ctx, tc.ref, tc.port); !errors.Is(err, tc.class) {
				t.Errorf("target: %v, want %v", err, tc.class)
			}
		})
	}
	for i := range expose.Max {
		if _, err := svc.ExposePort(ctx, "web", uint16(1000+i), false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.ExposePort(ctx, "web", 9999, false); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("port %d: %v, want too large", expose.Max+1, err)
	}
	// Changing one already exposed is still allowed at the limit.
	if _, err := svc.ExposePort(ctx, "web", 1000, true); err != nil {
		t.Errorf("making an exposed port public at the limit: %v", err)
	}
	sb, _ := svc.Get(ctx, "web")
	if len(sb.Spec.Ports) != expose.Max {
		t.Errorf("%d ports exposed, want %d", len(sb.Spec.Ports), expose.Max)
	}
}

func TestPortTarget(t *testing.T) {
	svc, st := newExposeService(t)
	addSandbox(t, st, "web", sandbox.StateRunning, 5)
	addSandbox(t, st, "off", sandbox.StateStopped, 6)
	ctx := t.Context()
	if _, err := svc.PortTarget(ctx, "web", 8080); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("target of a port not exposed: %v, want not found", err)
	}
	for _, name := range []string{"web", "off"} {
		if _, err := svc.ExposePort(ctx, name, 8080, false); err != nil {
			t.Fatal(err)
		}
	}
	got, err := svc.PortTarget(ctx, "web", 8080)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddrPort("10.9.0.11:8080"); got != want {
		t.Errorf("target %v, want %v (the guest end of slot 5)", got, want)
	}
	_, err = svc.PortTarget(ctx, "off", 8080)
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("target of a stopped sandbox: %v, want conflict", err)
	}
	if msg := fmt.Sprint(err); msg != `cannot serve port 8080 of sandbox "off": it is stopped` {
		t.Errorf("message %q", msg)
	}
}
