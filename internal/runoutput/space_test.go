package runoutput

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ledger is run records as the core keeps them: ended runs, oldest first.
type ledger struct {
	ended  []string
	pruned map[string]bool
}

func (l *ledger) Prunable(ctx context.Context, sandboxID string) ([]Prunable, error) {
	var out []Prunable
	for _, id := range l.ended {
		out = append(out, Prunable{ID: id, Pruned: l.pruned[id], Record: func(context.Context) error {
			l.pruned[id] = true
			return nil
		}})
	}
	return out, nil
}

func TestAllowancePrunesOldestEndedRuns(t *testing.T) {
	dir := t.TempDir()
	sbDir := filepath.Join(dir, "sb1")
	if err := os.MkdirAll(sbDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"old", "mid", "new"} {
		if err := os.WriteFile(filepath.Join(sbDir, run+".stdout"), make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runs := &ledger{ended: []string{"old", "mid"}, pruned: map[string]bool{}}
	s := NewSpace(context.Background(), dir, Limits{PerStream: 100, PerSandbox: 350}, runs, time.Now, slog.New(slog.DiscardHandler))
	room := s.Room("sb1")
	// 300 used, 50 free: 120 more needs the oldest ended run's 100.
	if ok, why := room.Take(120); !ok {
		t.Fatalf("take 120: refused (%s), want the oldest run pruned", why)
	}
	if !runs.pruned["old"] || runs.pruned["mid"] {
		t.Errorf("pruned %v, want only the oldest run", runs.pruned)
	}
	if _, err := os.Stat(filepath.Join(sbDir, "old.stdout")); !os.IsNotExist(err) {
		t.Errorf("the oldest run's output is still there: %v", err)
	}
	// 320 counted: 200 more needs both ended runs gone, and there is
	// only one left.
	if ok, why := room.Take(200); ok || why != CutAllowance {
		t.Errorf("take 200 = %v, %q; want refused for the allowance", ok, why)
	}
	if used, limit := s.Usage("sb1"); used != 100 || limit != 350 {
		t.Errorf("usage = %d of %d, want the newest run's 100 of 350", used, limit)
	}
	if err := s.CheckReserve("start a command"); err != nil {
		t.Errorf("no reserve: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"Zero", Limits{}, true},
		{"TooSmallCap", Limits{PerStream: MinPerStream - 1}, false},
		{"AllowanceUnderCap", Limits{PerStream: 1 << 20, PerSandbox: 1 << 19}, false},
		{"NegativeReserve", Limits{Reserve: -1}, false},
		{"Fine", Limits{PerStream: MinPerStream, PerSandbox: MinPerStream, Reserve: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.l.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
	var l Limits
	l.SetDefaults()
	if l.PerStream != DefaultPerStream || l.PerSandbox != DefaultPerSandbox || l.Reserve != 0 {
		t.Errorf("defaults = %+v", l)
	}
}
