package networking_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/networking"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sandbox/sandboxtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// Changing a sandbox's policy goes through a real core and store, with
// the host network faked: it records the policies it is told to
// enforce, and refuses them while refuse is set. Nothing stands behind
// the core's other ports, which the verb must not touch (a call would
// panic on the nil interface).

type hostNetwork struct {
	sandbox.Network
	mu       sync.Mutex
	enforced []string // each policy enforced, as its summary
	refuse   bool
}

func (n *hostNetwork) Enforce(_ context.Context, _ string, _ int, p netpolicy.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refuse {
		return errors.New("nftables refused")
	}
	n.enforced = append(n.enforced, p.Summary())
	return nil
}

func (n *hostNetwork) Slots() int { return 8 }

// store fails every update while failing is set.
type store struct {
	*sqlite.Store
	failing bool
}

func (s *store) UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error {
	if s.failing {
		return errors.New("the disk is full")
	}
	return s.Store.UpdateSandbox(ctx, sb, ev)
}

func newNetworking(t *testing.T) (*networking.Service, *store, *hostNetwork) {
	t.Helper()
	st, n := &store{Store: sandboxtest.Store(t)}, &hostNetwork{}
	svc := sandboxtest.Core(t, sandbox.Config{Store: st, Network: n, Reach: netpolicy.Reach{Private: netpolicy.PrivateRanges()}})
	return networking.New(networking.Config{Sandboxes: svc}), st, n
}

func addSandbox(t *testing.T, st *store, name string, state sandbox.State, slot int) *sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Add(t, st, &sandbox.Sandbox{Name: name, Owner: "alice", State: state, Slot: slot,
		Spec: sandbox.Spec{Image: "busybox", CPUs: 1, MemoryBytes: 256 << 20, PIDs: 512, Network: netpolicy.Policy{Mode: netpolicy.ModeOpen}}})
}

func allow(t *testing.T, rules ...string) netpolicy.Policy {
	t.Helper()
	p := netpolicy.Policy{Mode: netpolicy.ModeAllow}
	for _, s := range rules {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Allow = append(p.Allow, r)
	}
	return p
}

// lastEvent is the newest event of sandbox id.
func lastEvent(t *testing.T, st *store, id string) sandbox.Event {
	t.Helper()
	evs, err := st.Events(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1]
}

// A stopped sandbox gets its new policy in its record, for its next
// boot; a paused one at once as well.
func TestSetNetwork(t *testing.T) {
	for _, tc := range []struct {
		state    sandbox.State
		enforced []string
	}{
		{sandbox.StateStopped, nil},
		{sandbox.StatePaused, []string{"allow 198.51.100.0/24 pypi.org:443"}},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			nw, st, n := newNetworking(t)
			made := addSandbox(t, st, "web", tc.state, 1)
			sb, err := nw.SetNetwork(t.Context(), "web", allow(t, "pypi.org:443", "198.51.100.0/24"))
			if err != nil {
				t.Fatal(err)
			}
			want := "allow 198.51.100.0/24 pypi.org:443"
			if got := sb.Spec.Network.Summary(); got != want {
				t.Fatalf("policy %q, want %q", got, want)
			}
			rec, err := st.GetSandbox(t.Context(), made.ID)
			if err != nil || rec.Spec.Network.Summary() != want {
				t.Fatalf("record %+v, %v; want policy %q", rec, err, want)
			}
			if ev := lastEvent(t, st, made.ID); ev.Type != sandbox.EventNetwork || ev.Message != "network policy: "+want {
				t.Fatalf("last event %s %q, want %s %q", ev.Type, ev.Message, sandbox.EventNetwork, "network policy: "+want)
			}
			if strings.Join(n.enforced, "|") != strings.Join(tc.enforced, "|") {
				t.Fatalf("enforced %q, want %q", n.enforced, tc.enforced)
			}
		})
	}
}

func TestSetNetworkRefuses(t *testing.T) {
	nw, st, n := newNetworking(t)
	addSandbox(t, st, "web", sandbox.StatePaused, 1)
	addSandbox(t, st, "gone", sandbox.StateCreating, 2)
	for _, tc := range []struct {
		name, ref string
		p         netpolicy.Policy
		class     error
		msg       string
	}{
		{"an unknown mode", "web", netpolicy.Policy{Mode: "some"}, errdefs.ErrInvalid, `unknown network mode "some"`},
		{"a private range not opened", "web", allow(t, "10.1.2.3:80"), errdefs.ErrInvalid, "not opened to this sandbox's owner"},
		{"a sandbox being made", "gone", allow(t, "pypi.org:443"), errdefs.ErrConflict, "change the network policy of"},
		{"no such sandbox", "nope", allow(t, "pypi.org:443"), errdefs.ErrNotFound, `sandbox "nope" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := nw.SetNetwork(t.Context(), tc.ref, tc.p)
			if sb != nil || !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, err %v; want %v saying %q", sb, err, tc.class, tc.msg)
			}
		})
	}
	if len(n.enforced) != 0 {
		t.Fatalf("enforced after refusals: %q", n.enforced)
	}
}

// When the host refuses the policy, the record keeps the old one; when
// the record cannot be written, the host gets the old one back.
func TestSetNetworkKeepsHostAndRecordTogether(t *testing.T) {
	nw, st, n := newNetworking(t)
	made := addSandbox(t, st, "web", sandbox.StateRunning, 1)

	n.refuse = true
	_, err := nw.SetNetwork(t.Context(), "web", allow(t, "pypi.org:443"))
	if err == nil || !strings.Contains(err.Error(), `applying network policy to sandbox "web"`) || !strings.Contains(err.Error(), "nftables refused") {
		t.Fatalf("err %v, want the host's refusal", err)
	}
	rec, err := st.GetSandbox(t.Context(), made.ID)
	if err != nil || rec.Spec.Network.Mode != netpolicy.ModeOpen {
		t.Fatalf("record %+v, %v; want the old policy kept", rec, err)
	}

	n.refuse, st.failing = false, true
	if _, err := nw.SetNetwork(t.Context(), "web", allow(t, "pypi.org:443")); err == nil || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("err %v, want the store's failure", err)
	}
	if want := []string{"allow pypi.org:443", "open"}; strings.Join(n.enforced, "|") != strings.Join(want, "|") {
		t.Fatalf("enforced %q, want the new policy then the old one back %q", n.enforced, want)
	}
}
