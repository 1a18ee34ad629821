package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// The pools keep two kinds of file in WarmConfig.Dir, both this node's
// alone: targets.json, the counts set with `den image warm`, and a note
// per pool instance under instances/, written before anything of it is
// made on the host and removed once it is gone or a sandbox record owns
// it. A dend that starts finds in the notes what an earlier one left.

const warmTargetsFile = "targets.json"

func (w *warmPools) notesDir() string { return filepath.Join(w.cfg.Dir, "instances") }

func (w *warmPools) notePath(id string) string { return filepath.Join(w.notesDir(), id+".json") }

// load reads the saved targets.
func (w *warmPools) load() error {
	if err := os.MkdirAll(w.notesDir(), 0o700); err != nil {
		return fmt.Errorf("creating the warm pools' directory: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(w.cfg.Dir, warmTargetsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the warm pools' targets: %w", err)
	}
	var ts []WarmTarget
	if err := json.Unmarshal(b, &ts); err != nil {
		return fmt.Errorf("reading the warm pools' targets: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range ts {
		w.targets[t.Image] = t
	}
	return nil
}

// setTarget records t and saves every target.
func (w *warmPools) setTarget(t WarmTarget) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.targets[t.Image]
	w.targets[t.Image] = t
	ts := make([]WarmTarget, 0, len(w.targets))
	for _, x := range w.targets {
		ts = append(ts, x)
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(w.cfg.Dir, warmTargetsFile), b, 0o600)
	}
	if err != nil {
		if had {
			w.targets[t.Image] = old
		} else {
			delete(w.targets, t.Image)
		}
		return fmt.Errorf("saving the warm pools' targets: %w", err)
	}
	return nil
}

// note records wi on disk before anything of it is made.
func (w *warmPools) note(wi *warmInstance) error {
	b, err := json.Marshal(wi)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(w.notePath(wi.ID), b, 0o600); err != nil {
		return fmt.Errorf("noting warm instance %s: %w", wi.ID, err)
	}
	return nil
}

// forget removes wi's note: it is gone, or a sandbox owns it.
func (w *warmPools) forget(id string) error {
	if err := os.Remove(w.notePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the note of warm instance %s: %w", id, err)
	}
	return nil
}

// notes reads every note left on disk.
func (w *warmPools) notes() ([]*warmInstance, error) {
	ents, err := os.ReadDir(w.notesDir())
	if err != nil {
		return nil, fmt.Errorf("listing warm instances: %w", err)
	}
	var out []*warmInstance
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		wi := &warmInstance{ID: id}
		if b, err := os.ReadFile(filepath.Join(w.notesDir(), e.Name())); err == nil {
			_ = json.Unmarshal(b, wi) // a torn note still names the instance
		}
		wi.ID = id
		out = append(out, wi)
	}
	return out, nil
}

// clearWarmLeftovers removes the pool instances an earlier dend left,
// whatever state it died in: their engine instance, namespace, volume
// and note. An instance a sandbox record names was being claimed: the
// record owns it now, and Recover settles it with the record.
func (s *Service) clearWarmLeftovers(ctx context.Context) error {
	if s.warm == nil {
		return nil
	}
	left, err := s.warm.notes()
	if err != nil {
		return err
	}
	for _, wi := range left {
		if _, err := s.cfg.Store.GetSandbox(ctx, wi.ID); err == nil {
			s.log.Info("a claim was under way when dend stopped; its sandbox's record settles it", "instance", wi.ID)
		} else if errors.Is(err, errdefs.ErrNotFound) {
			s.log.Info("removing a warm instance an earlier dend left", "instance", wi.ID, "image", wi.Image)
			s.tearDownWarm(ctx, wi)
		} else {
			return fmt.Errorf("settling warm instance %s: %w", wi.ID, err)
		}
		if err := s.warm.forget(wi.ID); err != nil {
			return err
		}
	}
	return nil
}

// tearDownWarm removes what exists of wi on the host: its engine
// instance, namespace and volume. Errors are logged: it must not stop
// half-way.
func (s *Service) tearDownWarm(ctx context.Context, wi *warmInstance) {
	if wi.stopWatch != nil {
		wi.stopWatch()
	}
	sb := wi.sandbox()
	s.halt(ctx, sb, 0)
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("removing a warm instance's files", "instance", wi.ID, "err", err)
	}
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// synced, so a crash leaves the old content or the new.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
