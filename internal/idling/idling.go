// Package idling applies the idle policy to this node's sandboxes: every
// interval it pauses, hibernates, stops or destroys each sandbox whose
// next step is due (Loop.Tick), applies retention by age to their
// checkpoints, and asks checkpoint collection to remove what nothing
// needs; and it changes a sandbox's policy (Loop.SetPolicy). The
// policy's rules and the record of use are internal/idle's.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs and steps (WithSandbox, PauseLocked,
// HibernateLocked, StopLocked, Destroy, Record, ...). It must never be
// imported by internal/sandbox, and never reach into the Service's own
// state (its maps and locks): what the core's verbs need of idle state
// (touch, holds) stays in the core.
package idling

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the idle loop uses of the core (sandbox.Service).
type Sandboxes interface {
	LocalSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error)
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	Every(interval time.Duration, f func(ctx context.Context))
	Now() time.Time

	EffectivePolicy(sb *sandbox.Sandbox) idle.Policy
	CheckPolicy(ctx context.Context, p idle.Policy) error
	Due(sb *sandbox.Sandbox) idle.Due
	Busy(sb *sandbox.Sandbox) bool
	Touch(id string)
	LastActive(id string) time.Time
	GuestFor(sb *sandbox.Sandbox) sandbox.Guest

	PauseLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
	ReadyToSaveLocked(ctx context.Context, sb *sandbox.Sandbox) ([]guest.Process, error)
	HibernateLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
	StopLocked(ctx context.Context, sb *sandbox.Sandbox, why string) error
	Destroy(ctx context.Context, ref, why string) error
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
	RetainLocked(ctx context.Context, sb *sandbox.Sandbox)
	PublishAbout(sb *sandbox.Sandbox, evType, msg string)
}

// Records is what the loop reads and removes of an expired ephemeral
// sandbox's records (sandbox.Store).
type Records interface {
	ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error)
	DeleteSandbox(ctx context.Context, id string) error
}

// Collector removes every checkpoint of this node nothing needs
// (internal/checkpointgc's Collector).
type Collector interface {
	Collect(ctx context.Context)
}

// Config is what a Loop needs. Collector may be nil: checkpoints then go
// only by retention or by hand.
type Config struct {
	Sandboxes Sandboxes
	Records   Records
	Collector Collector
	Logger    *slog.Logger
}

// Loop applies the idle policy to this node's sandboxes.
type Loop struct {
	svc     Sandboxes
	records Records
	gc      Collector
	log     *slog.Logger

	mu sync.Mutex
	// nextRetention is when checkpoints are next checked for age.
	nextRetention time.Time
}

// New returns a Loop that has not ticked yet.
func New(cfg Config) *Loop {
	return &Loop{svc: cfg.Sandboxes, records: cfg.Records, gc: cfg.Collector, log: cfg.Logger}
}

// Run calls Tick every interval, in the background, until the core's
// Close.
func (l *Loop) Run(interval time.Duration) {
	l.svc.Every(interval, l.Tick)
}

// SetPolicy changes a sandbox's idle policy and retention; fields p leaves
// unset keep their value. It applies at once, to a running sandbox too.
func (l *Loop) SetPolicy(ctx context.Context, ref string, p idle.Policy) (*sandbox.Sandbox, error) {
	if err := l.svc.CheckPolicy(ctx, p); err != nil {
		return nil, err
	}
	var changed *sandbox.Sandbox
	err := l.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		sb.Policy = p.Merge(sb.Policy)
		if err := l.svc.Record(ctx, sb, sandbox.EventPolicy, "idle policy changed"); err != nil {
			return err
		}
		l.svc.RetainLocked(ctx, sb)
		changed = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// Tick applies the idle policy to every sandbox whose next step is due,
// then has the Collector remove checkpoints nothing needs any more. dend
// calls it every second; tests call it with their own clock.
func (l *Loop) Tick(ctx context.Context) {
	sbs, err := l.svc.LocalSandboxes(ctx)
	if err != nil {
		l.log.Error("idle policy: listing sandboxes", "err", err)
		return
	}
	now := l.svc.Now()
	for _, sb := range sbs {
		if sb.State == sandbox.StateRunning && l.svc.Busy(sb) {
			l.svc.Touch(sb.ID)
		}
		if due := l.svc.Due(sb); due.Action != "" && !now.Before(due.At) {
			if err := l.applyDue(ctx, sb.ID); err != nil {
				l.log.Error("idle policy", "sandbox", sb.Name, "action", due.Action, "err", err)
			}
		}
	}
	l.expireCheckpoints(ctx, sbs, now)
	if l.gc != nil {
		l.gc.Collect(ctx)
	}
}

// expireCheckpoints applies retention by age to every sandbox that has a
// maximum age, at most every retentionInterval: checkpoints age without
// anything else happening to the sandbox.
func (l *Loop) expireCheckpoints(ctx context.Context, sbs []*sandbox.Sandbox, now time.Time) {
	l.mu.Lock()
	due := !now.Before(l.nextRetention)
	if due {
		l.nextRetention = now.Add(retentionInterval)
	}
	l.mu.Unlock()
	if !due {
		return
	}
	for _, sb := range sbs {
		if p := l.svc.EffectivePolicy(sb); p.MaxAge != nil && *p.MaxAge > 0 {
			// An error is a sandbox destroyed meanwhile.
			_ = l.svc.WithSandbox(ctx, sb.ID, func(fresh *sandbox.Sandbox) error {
				l.svc.RetainLocked(ctx, fresh)
				return nil
			})
		}
	}
}

// retentionInterval is how often checkpoints are checked for age: fine
// enough for ages given in hours, and cheap.
const retentionInterval = time.Second * 10
