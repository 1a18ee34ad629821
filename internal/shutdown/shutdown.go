// Package shutdown makes a host's planned shutdown a hibernation. When
// the host goes down (a reboot, a power-off, an upgrade that needs one),
// dend hibernates its running and paused sandboxes before it exits, so
// their processes come back where they were; after the boot they wake on
// their next use, or at once when their policy says wake_on_boot.
//
// It sits above the core: it finds, locks, hibernates and wakes
// sandboxes only through internal/sandbox's exported verbs, and keeps no
// state but the list of sandboxes it hibernated, in one file of dend's
// data directory.
package shutdown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/den-dev/den/internal/atomicfile"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Why is the reason a sandbox hibernated at shutdown gives in its history.
const Why = "hibernated as the host shut down"

// wokeWhy is the reason a sandbox woken at boot gives in its history.
const wokeWhy = "woken as dend started: the host shutdown hibernated it, and its policy says wake_on_boot"

// Sandboxes is what a Host asks of the sandbox core.
type Sandboxes interface {
	LocalSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error)
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	HibernateLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
	ResumeLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
}

// Config is a Host's.
type Config struct {
	Sandboxes Sandboxes
	// File records the sandboxes a shutdown hibernated, for the next
	// dend's WakeAtBoot (DATA_DIR/shutdown.json).
	File string
	// Parallel is how many sandboxes hibernate at once; 0 is 4.
	Parallel int
	Logger   *slog.Logger
}

// Host puts the sandboxes of this node to sleep at shutdown and wakes
// them after.
type Host struct {
	cfg Config
}

// New returns a Host.
func New(cfg Config) *Host {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	return &Host{cfg: cfg}
}

// Report says what a shutdown did: every sandbox that was running or
// paused is in exactly one list.
type Report struct {
	Hibernated []string          // names
	Failed     map[string]string // name → why it could not hibernate
}

// record is File's content.
type record struct {
	At         time.Time `json:"at"`
	Hibernated []string  `json:"hibernated"` // sandbox ids
}

// HibernateAll hibernates every running and paused sandbox of this node,
// Parallel at a time, until ctx ends: what it could not hibernate by then
// is in Failed, with the reason. It records the hibernated ones in File
// (adding to what an earlier shutdown recorded that the boot has not
// woken yet).
func (h *Host) HibernateAll(ctx context.Context) (Report, error) {
	rep := Report{Failed: map[string]string{}}
	sbs, err := h.cfg.Sandboxes.LocalSandboxes(ctx)
	if err != nil {
		return rep, fmt.Errorf("listing sandboxes to hibernate: %w", err)
	}
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	slots := make(chan struct{}, h.cfg.Parallel)
	for _, sb := range sbs {
		if sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := h.hibernate(ctx, slots, sb.ID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed[sb.Name] = err.Error()
				return
			}
			rep.Hibernated = append(rep.Hibernated, sb.Name)
			ids = append(ids, sb.ID)
		}()
	}
	wg.Wait()
	sort.Strings(rep.Hibernated)
	if len(ids) == 0 {
		return rep, nil
	}
	return rep, h.remember(ids)
}

// hibernate hibernates sandbox id once a slot is free, unless ctx ends
// first.
func (h *Host) hibernate(ctx context.Context, slots chan struct{}, id string) error {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return fmt.Errorf("not reached before the shutdown's time was up: %w", context.Cause(ctx))
	}
	return h.cfg.Sandboxes.WithSandbox(ctx, id, func(sb *sandbox.Sandbox) error {
		if sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused {
			return nil // it changed meanwhile: nothing of it is lost
		}
		return h.cfg.Sandboxes.HibernateLocked(ctx, sb, Why)
	})
}

// remember adds ids to File, written whole or not at all.
func (h *Host) remember(ids []string) error {
	rec, err := h.read()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.Contains(rec.Hibernated, id) {
			rec.Hibernated = append(rec.Hibernated, id)
		}
	}
	rec.At = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(h.cfg.File, b, 0o600); err != nil {
		return fmt.Errorf("recording the sandboxes hibernated at shutdown: %w", err)
	}
	return nil
}

// read returns File's record; an empty one when there is none.
func (h *Host) read() (record, error) {
	var rec record
	b, err := os.ReadFile(h.cfg.File)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("reading the sandboxes hibernated at shutdown: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("reading the sandboxes hibernated at shutdown from %s: %w", h.cfg.File, err)
	}
	return rec, nil
}

// WakeAtBoot wakes, one at a time, the sandboxes the last shutdown
// hibernated whose policy says wake_on_boot and that still sleep; the
// others wake on their next use. It then forgets the list. It returns the
// names of those it woke; a sandbox that fails to wake stays as the wake
// left it (in error with the reason, its checkpoint kept) and is logged.
func (h *Host) WakeAtBoot(ctx context.Context) ([]string, error) {
	rec, err := h.read()
	if err != nil || len(rec.Hibernated) == 0 {
		return nil, err
	}
	var woke []string
	for _, id := range rec.Hibernated {
		name := ""
		err := h.cfg.Sandboxes.WithSandbox(ctx, id, func(sb *sandbox.Sandbox) error {
			name = sb.Name
			if sb.State != sandbox.StateHibernated || !wakeOnBoot(sb) {
				return errSkip
			}
			return h.cfg.Sandboxes.ResumeLocked(ctx, sb, wokeWhy)
		})
		switch {
		case err == nil:
			woke = append(woke, name)
		case errors.Is(err, errSkip), errors.Is(err, errdefs.ErrNotFound): // removed since
		case ctx.Err() != nil:
			return woke, ctx.Err() // the list stays for the next start
		default:
			h.cfg.Logger.Warn("could not wake a sandbox the host shutdown hibernated; it wakes on its next use",
				"sandbox", id, "name", name, "err", err)
		}
	}
	if err := os.Remove(h.cfg.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return woke, fmt.Errorf("forgetting the sandboxes hibernated at shutdown: %w", err)
	}
	return woke, nil
}

var errSkip = errors.New("not to wake")

func wakeOnBoot(sb *sandbox.Sandbox) bool {
	return sb.Policy.WakeOnBoot != nil && *sb.Policy.WakeOnBoot
}
