package limiting_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/limiting"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sandbox/sandboxtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// Changing a stopped sandbox's limits changes its record and its
// volume's cap: a real store, the volumes' caps faked, and nothing
// behind the core's other ports, which the verb must not touch on a
// stopped sandbox (a call would panic on the nil interface).

// caps records the disk caps volumes are given.
type caps struct {
	sandbox.Volumes
	mu     sync.Mutex
	cap    map[string]int64
	refuse func(bytes int64) bool // which caps SetLimit refuses; nil: none
}

func (c *caps) SetLimit(_ context.Context, key string, bytes int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != nil && c.refuse(bytes) {
		return errors.New("btrfs refused the cap")
	}
	c.cap[key] = bytes
	return nil
}

// refusingEngine refuses every change of a live instance's limits.
type refusingEngine struct{ sandbox.Runtime }

func (refusingEngine) Update(context.Context, string, sandbox.Limits) error {
	return errors.New("the engine refused")
}

func newLimiting(t *testing.T, q quota.Quotas) (*limiting.Service, *sqlite.Store, *caps) {
	t.Helper()
	return newLimitingWith(t, q, nil)
}

func newLimitingWith(t *testing.T, q quota.Quotas, rt sandbox.Runtime) (*limiting.Service, *sqlite.Store, *caps) {
	t.Helper()
	return newLimitingOn(t, q, rt, func(st *sqlite.Store) sandbox.Store { return st })
}

// newLimitingOn is newLimitingWith with the core's store made by wrap.
func newLimitingOn(t *testing.T, q quota.Quotas, rt sandbox.Runtime, wrap func(*sqlite.Store) sandbox.Store) (*limiting.Service, *sqlite.Store, *caps) {
	t.Helper()
	st, v := sandboxtest.Store(t), &caps{cap: map[string]int64{}}
	svc := sandboxtest.Core(t, sandbox.Config{Store: wrap(st), Volumes: v, Runtime: rt, Quotas: q})
	return limiting.New(svc), st, v
}

func addSandbox(t *testing.T, st *sqlite.Store, name, owner string, state sandbox.State, slot int) *sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Add(t, st, &sandbox.Sandbox{Name: name, Owner: owner, State: state, Slot: slot})
}

func TestSetLimitsOfAStoppedSandbox(t *testing.T) {
	l, st, v := newLimiting(t, quota.Quotas{})
	made := addSandbox(t, st, "web", "", sandbox.StateStopped, 1)
	ctx := t.Context()
	cpus, disk := 2.0, int64(1<<30)
	sb, err := l.SetLimits(ctx, "web", limiting.Change{CPUs: &cpus, DiskBytes: &disk})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Spec.CPUs != 2 || sb.Spec.DiskBytes != 1<<30 || sb.Spec.MemoryBytes != 256<<20 || sb.Spec.PIDs != 512 {
		t.Fatalf("limits after the change: %+v", sb.Spec.Limits())
	}
	if got := v.cap[made.VolumeKey()]; got != 1<<30 {
		t.Fatalf("volume capped at %d, want 1GiB", got)
	}
	rec, err := st.GetSandbox(ctx, made.ID)
	if err != nil || rec.Spec.CPUs != 2 {
		t.Fatalf("record %+v, %v; want 2 CPUs", rec, err)
	}
	evs, err := st.Events(ctx, made.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if want := "limits: 2 CPUs, 256MiB memory, 512 processes, 1GiB disk"; last.Type != sandbox.EventLimits || last.Message != want {
		t.Fatalf("last event %s %q, want %s %q", last.Type, last.Message, sandbox.EventLimits, want)
	}
}

func TestSetLimitsRefuses(t *testing.T) {
	l, st, v := newLimiting(t, quota.Quotas{MaxPIDs: 1024})
	addSandbox(t, st, "web", "alice", sandbox.StateStopped, 1)
	addSandbox(t, st, "gone", "alice", sandbox.StateCreating, 2)
	none, bad, many := 0, 0.001, 4096
	for _, tc := range []struct {
		name, ref string
		c         limiting.Change
		class     error
		msg       string
	}{
		{"an invalid limit", "web", limiting.Change{CPUs: &bad}, errdefs.ErrInvalid, "invalid cpus 0.001"},
		{"an owner lifting the process limit", "web", limiting.Change{PIDs: &none}, errdefs.ErrInvalid, "an owner cannot lift the process limit"},
		{"over the process maximum", "web", limiting.Change{PIDs: &many}, errdefs.ErrInvalid, "over this dend's maximum of 1024"},
		{"a sandbox being made", "gone", limiting.Change{PIDs: &many}, errdefs.ErrConflict, "change the limits of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.SetLimits(t.Context(), tc.ref, tc.c)
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v saying %q", err, tc.class, tc.msg)
			}
		})
	}
	if len(v.cap) != 0 {
		t.Fatalf("volumes capped after refusals: %v", v.cap)
	}
}

// When the live instance refuses a change, the disk cap goes back to what
// the record says; when that fails too, the error says so, since the
// volume and the record then disagree.
func TestSetLimitsSaysWhenTheCapCannotGoBack(t *testing.T) {
	l, st, v := newLimitingWith(t, quota.Quotas{}, refusingEngine{})
	made := addSandbox(t, st, "web", "", sandbox.StatePaused, 1)
	disk := int64(2 << 30)
	_, err := l.SetLimits(t.Context(), "web", limiting.Change{DiskBytes: &disk})
	if err == nil || !strings.Contains(err.Error(), "the engine refused") {
		t.Fatalf("err %v, want the engine's refusal", err)
	}
	rec, gerr := st.GetSandbox(t.Context(), made.ID)
	if gerr != nil || rec.Spec.DiskBytes != made.Spec.DiskBytes {
		t.Fatalf("record %+v, %v; want the old disk cap kept", rec, gerr)
	}

	// Now the put-back fails as well.
	v.refuse = func(bytes int64) bool { return bytes != disk }
	_, err = l.SetLimits(t.Context(), "web", limiting.Change{DiskBytes: &disk})
	if err == nil || !strings.Contains(err.Error(), "putting its disk cap back") || !strings.Contains(err.Error(), "btrfs refused the cap") {
		t.Fatalf("err %v, want it to say the cap could not go back", err)
	}
}

// unrecordable is a store that cannot write a sandbox's record.
type unrecordable struct{ *sqlite.Store }

func (unrecordable) UpdateSandbox(context.Context, *sandbox.Sandbox, sandbox.Event) error {
	return errors.New("database is locked")
}

// updates records the limits the engine is given.
type updates struct {
	sandbox.Runtime
	mu  sync.Mutex
	got []sandbox.Limits
}

func (u *updates) Update(_ context.Context, _ string, l sandbox.Limits) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, l)
	return nil
}

// A change the record cannot keep is undone: the volume and the live
// instance get the old limits back, so they match the record.
func TestSetLimitsPutsBackWhatTheRecordCannotKeep(t *testing.T) {
	rt := &updates{}
	l, st, v := newLimitingOn(t, quota.Quotas{}, rt, func(st *sqlite.Store) sandbox.Store { return unrecordable{st} })
	made := addSandbox(t, st, "web", "", sandbox.StatePaused, 1)
	v.cap[made.VolumeKey()] = 4 << 30
	mem, disk := int64(512<<20), int64(1<<30)
	_, err := l.SetLimits(t.Context(), "web", limiting.Change{MemoryBytes: &mem, DiskBytes: &disk})
	if err == nil || !strings.Contains(err.Error(), "database is locked") || !strings.Contains(err.Error(), "its old limits are back") {
		t.Fatalf("err %v, want the record's failure and the limits put back", err)
	}
	if got := v.cap[made.VolumeKey()]; got != made.Spec.DiskBytes {
		t.Fatalf("volume capped at %d after the failure, want the old cap %d", got, made.Spec.DiskBytes)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.got) != 2 || rt.got[0].MemoryBytes != mem || rt.got[1].MemoryBytes != made.Spec.MemoryBytes {
		t.Fatalf("engine given %+v, want the new memory then the old %d", rt.got, made.Spec.MemoryBytes)
	}
	rec, gerr := st.GetSandbox(t.Context(), made.ID)
	if gerr != nil || rec.Spec.MemoryBytes != made.Spec.MemoryBytes {
		t.Fatalf("record %+v, %v; want the old memory kept", rec, gerr)
	}
}
