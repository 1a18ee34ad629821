package warm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The pools keep two kinds of file in Config.Dir, both this node's
// alone: targets.json, the counts set with `den image warm`, and a note
// per pool instance under instances/, written before anything of it is
// made on the host and removed once it is gone or a sandbox record owns
// it. A dend that starts finds in the notes what an earlier one left.

const targetsFile = "targets.json"

func (p *Pools) notesDir() string { return filepath.Join(p.cfg.Dir, "instances") }

func (p *Pools) notePath(id string) string { return filepath.Join(p.notesDir(), id+".json") }

// Load reads the saved targets.
func (p *Pools) Load() error {
	if err := os.MkdirAll(p.notesDir(), 0o700); err != nil {
		return fmt.Errorf("creating the warm pools' directory: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(p.cfg.Dir, targetsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the warm pools' targets: %w", err)
	}
	var ts []Target
	if err := json.Unmarshal(b, &ts); err != nil {
		return fmt.Errorf("reading the warm pools' targets: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range ts {
		p.targets[t.Image] = t
	}
	return nil
}

// setTarget records t and saves every target.
func (p *Pools) setTarget(t Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.targets[t.Image]
	p.targets[t.Image] = t
	ts := make([]Target, 0, len(p.targets))
	for _, x := range p.targets {
		ts = append(ts, x)
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(p.cfg.Dir, targetsFile), b, 0o600)
	}
	if err != nil {
		if had {
			p.targets[t.Image] = old
		} else {
			delete(p.targets, t.Image)
		}
		return fmt.Errorf("saving the warm pools' targets: %w", err)
	}
	return nil
}

// Note records wi on disk before anything of it is made.
func (p *Pools) Note(wi *Instance) error {
	b, err := json.Marshal(wi)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.notePath(wi.ID), b, 0o600); err != nil {
		return fmt.Errorf("noting warm instance %s: %w", wi.ID, err)
	}
	return nil
}

// Forget removes the note of instance id: it is gone, or a sandbox owns
// it.
func (p *Pools) Forget(id string) error {
	if err := os.Remove(p.notePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the note of warm instance %s: %w", id, err)
	}
	return nil
}

// Notes reads every note left on disk.
func (p *Pools) Notes() ([]*Instance, error) {
	ents, err := os.ReadDir(p.notesDir())
	if err != nil {
		return nil, fmt.Errorf("listing warm instances: %w", err)
	}
	var out []*Instance
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		wi := &Instance{ID: id}
		if b, err := os.ReadFile(filepath.Join(p.notesDir(), e.Name())); err == nil {
			_ = json.Unmarshal(b, wi) // a torn note still names the instance
		}
		wi.ID = id
		out = append(out, wi)
	}
	return out, nil
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

// ClearLeftovers removes the pool instances an earlier dend left,
// whatever state it died in, and their notes. claimed says whether a
// sandbox's record names instance id: a claim was under way, and the
// record owns it now. tearDown removes what exists of any other on the
// host: its engine instance, namespace and volume.
func (p *Pools) ClearLeftovers(ctx context.Context, claimed func(ctx context.Context, id string) (bool, error), tearDown func(ctx context.Context, wi *Instance)) error {
	left, err := p.Notes()
	if err != nil {
		return err
	}
	for _, wi := range left {
		owned, err := claimed(ctx, wi.ID)
		if err != nil {
			return fmt.Errorf("settling warm instance %s: %w", wi.ID, err)
		}
		if owned {
			p.log.Info("a claim was under way when dend stopped; its sandbox's record settles it", "instance", wi.ID)
		} else {
			p.log.Info("removing a warm instance an earlier dend left", "instance", wi.ID, "image", wi.Image)
			tearDown(ctx, wi)
		}
		if err := p.Forget(wi.ID); err != nil {
			return err
		}
	}
	return nil
}
