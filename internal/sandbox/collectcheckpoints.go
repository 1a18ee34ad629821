package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Checkpoint collection: the idle policy's tick removes, after applying
// the policy, the checkpoints nothing needs any more (collectGarbage);
// verbs that let go of one remove it at once (collectFreed); a verb
// working with one pins it meanwhile.

// pin keeps a checkpoint from garbage collection while a verb works with
// it; unpin releases it.
func (s *Service) pin(id string) func() {
	s.mu.Lock()
	s.pinned[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.pinned[id]--; s.pinned[id] <= 0 {
			delete(s.pinned, id)
		}
		s.mu.Unlock()
	}
}

func (s *Service) isPinned(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pinned[id] > 0
}

// collectGarbage removes checkpoints nothing references any more: those of
// destroyed sandboxes and the ones den took for its own use (hibernation,
// fork captures) once no sandbox needs them; then memory images left
// without a record by a dend that died while taking them. Manual
// checkpoints of live sandboxes go only by retention or by hand.
func (s *Service) collectGarbage(ctx context.Context) {
	cks, err := s.cfg.Store.ListCheckpointsOn(ctx, s.cfg.Node)
	if err != nil {
		s.log.Error("garbage collection: listing checkpoints", "err", err)
		return
	}
	var needs map[string][]string
	if len(cks) > 0 { // else spare listing every sandbox, every tick
		if needs, err = s.needs(ctx); err != nil {
			s.log.Error("garbage collection", "err", err)
			return
		}
	}
	kept := s.lastUploads(cks)
	known := map[string]bool{}
	for _, ck := range cks {
		known[ck.ID] = true
		if len(needs[ck.ID]) > 0 || s.isPinned(ck.ID) {
			continue
		}
		s.collectOne(ctx, ck, kept[ck.ID])
	}
	// Memory images and file snapshots a crash left without a record: a
	// record is written last, so they belong to no complete checkpoint.
	for _, id := range s.checkpointFiles() {
		if known[id] || s.isPinned(id) {
			continue
		}
		// The list above may be older than a checkpoint finished since.
		ck, err := s.cfg.Store.GetCheckpoint(ctx, "", id)
		if err == nil {
			s.dropStaleHandover(ctx, ck)
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		s.log.Warn("removing checkpoint files no checkpoint owns", "checkpoint", id)
		s.dropCheckpointFiles(ctx, &Checkpoint{ID: id})
	}
}

// checkpointFiles lists the checkpoint ids that have a memory image or a
// file snapshot on the host.
func (s *Service) checkpointFiles() []string {
	var ids []string
	seen := map[string]bool{}
	for _, dir := range []string{s.cfg.CheckpointDir, filepath.Dir(s.cfg.Volumes.Path((&Checkpoint{ID: "x"}).VolumeKey()))} {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			s.log.Error("garbage collection: reading checkpoint files", "err", err)
		}
		for _, e := range ents {
			if id := e.Name(); e.IsDir() && !strings.HasPrefix(id, ".") && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// collectFreed removes, at once, those of checkpoints ids that nothing
// needs any more and garbage collection would take: called when what
// needed them (a sandbox made from them, an upload) has just let go.
func (s *Service) collectFreed(ctx context.Context, ids ...string) {
	var needs map[string][]string
	for _, id := range ids {
		if id == "" || s.isPinned(id) {
			continue
		}
		ck, err := s.cfg.Store.GetCheckpoint(ctx, "", id)
		if err != nil {
			continue // removed already, or the next collection tries
		}
		if needs == nil {
			if needs, err = s.needs(ctx); err != nil {
				s.log.Error("removing checkpoints nothing needs", "err", err)
				return
			}
		}
		if len(needs[id]) == 0 {
			s.collectOne(ctx, ck, s.isLastUpload(ctx, ck))
		}
	}
}

// CollectGarbage removes checkpoints nothing needs, as the idle policy's
// tick does: dend calls it once more when it stops cleanly, so that
// what sandboxes removed just before freed, on this node or another, is
// not left behind.
func (s *Service) CollectGarbage(ctx context.Context) { s.collectGarbage(ctx) }

// isLastUpload reports whether ck is its sandbox's newest uploaded
// checkpoint (see lastUploads).
func (s *Service) isLastUpload(ctx context.Context, ck *Checkpoint) bool {
	if ck.Location != LocationUploaded {
		return false
	}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, ck.SandboxID)
	if err != nil {
		return true // keep it: the next collection looks again
	}
	return s.lastUploads(cks)[ck.ID]
}

// collectOne removes ck, which nothing needs, unless it is a manual
// checkpoint of a live sandbox, or that sandbox's last upload (lastUpload,
// see lastUploads): then only its copy on this host goes.
func (s *Service) collectOne(ctx context.Context, ck *Checkpoint, lastUpload bool) {
	owner, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID)
	if err != nil {
		s.log.Error("garbage collection: finding owner", "checkpoint", ck.ID, "err", err)
		return
	}
	live := owner.State != StateDestroyed
	if live && ck.Kind == CheckpointManual {
		return
	}
	if owner.Node != s.cfg.Node {
		return // its files are on its own node, which collects it
	}
	if live && lastUpload && !s.hasAnyLocal(ck) {
		return
	}
	l := s.lock(owner.ID)
	l.Lock()
	defer l.Unlock()
	if owner, err = s.cfg.Store.GetSandbox(ctx, owner.ID); err != nil {
		return
	}
	// A verb may have started using it while this waited for the lock: a
	// fork pins its new checkpoint before it lets go of the parent.
	if owner.Checkpoint == ck.ID || owner.Pending != "" || s.isPinned(ck.ID) {
		return
	}
	if live && lastUpload {
		s.log.Info("keeping a checkpoint as its sandbox's last uploaded state; removing its copy here", "checkpoint", ck.ID, "sandbox", owner.Name, "kind", ck.Kind)
		s.dropCheckpointFiles(ctx, ck)
		return
	}
	s.log.Info("removing a checkpoint nothing needs", "checkpoint", ck.ID, "sandbox", owner.Name, "kind", ck.Kind)
	if err := s.deleteCheckpoint(ctx, owner, ck); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("garbage collection", "checkpoint", ck.ID, "err", err)
	}
}

// handoverGrace is how long a memory image another node sent ahead of a
// hand-over waits for it (see ReceiveMemory).
const handoverGrace = 10 * time.Minute

// dropStaleHandover removes the memory image of ck, a checkpoint of a
// sandbox on another node, that was sent here for a hand-over that did
// not happen: the sandbox stayed where it was, or went elsewhere. Only an
// uploaded checkpoint's: this node's copy of one not yet uploaded, of a
// sandbox that moved away, waits for its upload.
func (s *Service) dropStaleHandover(ctx context.Context, ck *Checkpoint) {
	if ck.Location != LocationUploaded || s.isPinned(ck.ID) {
		return
	}
	owner, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID)
	if err != nil || owner.Node == s.cfg.Node {
		return
	}
	fi, err := os.Stat(s.memDir(ck.ID))
	if err != nil || s.cfg.Now().Sub(fi.ModTime()) < handoverGrace {
		return
	}
	s.log.Info("removing a memory image sent for a hand-over that did not happen", "checkpoint", ck.ID, "sandbox", owner.Name, "node", owner.Node)
	if err := os.RemoveAll(s.memDir(ck.ID)); err != nil {
		s.log.Error("removing a memory image", "checkpoint", ck.ID, "err", err)
	}
}
