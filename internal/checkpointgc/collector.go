package checkpointgc

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the collector uses of the core (sandbox.Service).
type Sandboxes interface {
	// Needs names, by checkpoint id, the sandboxes that need it.
	Needs(ctx context.Context) (map[string][]string, error)
	// Pinned reports whether a verb is working with checkpoint id.
	Pinned(id string) bool
	// Movable reports whether sandboxes can move: a fleet with a blob
	// store.
	Movable() bool
	// WithRecord runs f with sandbox id's record under its lifecycle
	// lock.
	WithRecord(ctx context.Context, id string, f func(sb *sandbox.Sandbox) error) error
	// DeleteCheckpointLocked removes ck of owner, whose lifecycle lock
	// the caller holds, record and files.
	DeleteCheckpointLocked(ctx context.Context, owner *sandbox.Sandbox, ck *sandbox.Checkpoint) error
	// DropCheckpointFiles removes ck's files from this host, keeping its
	// record.
	DropCheckpointFiles(ctx context.Context, ck *sandbox.Checkpoint)
	// MemoryDir is where checkpoint id's memory image is kept here.
	MemoryDir(id string) string
	// Now is the Service's clock.
	Now() time.Time
}

// Records are the records the collector reads (sandbox.Store).
type Records interface {
	GetSandbox(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	GetCheckpoint(ctx context.Context, sandboxID, ref string) (*sandbox.Checkpoint, error)
	ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error)
	ListCheckpointsOn(ctx context.Context, node string) ([]*sandbox.Checkpoint, error)
}

// Volumes says where a file snapshot is on this host (sandbox.Volumes).
type Volumes interface {
	Path(key string) string
}

// Config is what a Collector needs.
type Config struct {
	Sandboxes Sandboxes
	Store     Records
	Volumes   Volumes
	// CheckpointDir holds the checkpoints' memory images, one directory
	// each (the core's Config.CheckpointDir).
	CheckpointDir string
	// Node is this host's name.
	Node   string
	Logger *slog.Logger
}

// Collector removes the checkpoints of this node nothing needs.
type Collector struct {
	svc     Sandboxes
	store   Records
	volumes Volumes
	ckDir   string
	node    string
	log     *slog.Logger
}

// New returns a Collector.
func New(cfg Config) *Collector {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{svc: cfg.Sandboxes, store: cfg.Store, volumes: cfg.Volumes, ckDir: cfg.CheckpointDir, node: cfg.Node, log: log}
}

// Collect removes checkpoints nothing references any more: those of
// destroyed sandboxes and the ones den took for its own use (hibernation,
// fork captures) once no sandbox needs them; then memory images left
// without a record by a dend that died while taking them. Manual
// checkpoints of live sandboxes go only by retention or by hand.
func (c *Collector) Collect(ctx context.Context) {
	cks, err := c.store.ListCheckpointsOn(ctx, c.node)
	if err != nil {
		c.log.Error("garbage collection: listing checkpoints", "err", err)
		return
	}
	var needs map[string][]string
	if len(cks) > 0 { // else spare listing every sandbox, every tick
		if needs, err = c.svc.Needs(ctx); err != nil {
			c.log.Error("garbage collection", "err", err)
			return
		}
	}
	kept := c.lastUploads(cks)
	known := map[string]bool{}
	for _, ck := range cks {
		known[ck.ID] = true
		if len(needs[ck.ID]) > 0 || c.svc.Pinned(ck.ID) {
			continue
		}
		c.collectOne(ctx, ck, kept[ck.ID])
	}
	// Memory images and file snapshots a crash left without a record: a
	// record is written last, so they belong to no complete checkpoint.
	for _, id := range c.checkpointFiles() {
		if known[id] || c.svc.Pinned(id) {
			continue
		}
		// The list above may be older than a checkpoint finished since.
		ck, err := c.store.GetCheckpoint(ctx, "", id)
		if err == nil {
			c.dropStaleHandover(ctx, ck)
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		c.log.Warn("removing checkpoint files no checkpoint owns", "checkpoint", id)
		c.svc.DropCheckpointFiles(ctx, &sandbox.Checkpoint{ID: id})
	}
}

// checkpointFiles lists the checkpoint ids that have a memory image or a
// file snapshot on the host.
func (c *Collector) checkpointFiles() []string {
	var ids []string
	seen := map[string]bool{}
	for _, dir := range []string{c.ckDir, filepath.Dir(c.volumes.Path((&sandbox.Checkpoint{ID: "x"}).VolumeKey()))} {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			c.log.Error("garbage collection: reading checkpoint files", "err", err)
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

// Freed removes, at once, those of checkpoints ids that nothing needs
// any more and garbage collection would take: called when what needed
// them (a sandbox made from them, an upload) has just let go.
func (c *Collector) Freed(ctx context.Context, ids ...string) {
	var needs map[string][]string
	for _, id := range ids {
		if id == "" || c.svc.Pinned(id) {
			continue
		}
		ck, err := c.store.GetCheckpoint(ctx, "", id)
		if err != nil {
			continue // removed already, or the next collection tries
		}
		if needs == nil {
			if needs, err = c.svc.Needs(ctx); err != nil {
				c.log.Error("removing checkpoints nothing needs", "err", err)
				return
			}
		}
		if len(needs[id]) == 0 {
			c.collectOne(ctx, ck, c.isLastUpload(ctx, ck))
		}
	}
}

// collectOne removes ck, which nothing needs, unless it is a manual
// checkpoint of a live sandbox, or that sandbox's last upload (lastUpload,
// see lastUploads): then only its copy on this host goes.
func (c *Collector) collectOne(ctx context.Context, ck *sandbox.Checkpoint, lastUpload bool) {
	owner, err := c.store.GetSandbox(ctx, ck.SandboxID)
	if err != nil {
		c.log.Error("garbage collection: finding owner", "checkpoint", ck.ID, "err", err)
		return
	}
	live := owner.State != sandbox.StateDestroyed
	if live && ck.Kind == sandbox.CheckpointManual {
		return
	}
	if owner.Node != c.node {
		return // its files are on its own node, which collects it
	}
	if live && lastUpload && !c.hasAnyLocal(ck) {
		return
	}
	_ = c.svc.WithRecord(ctx, owner.ID, func(owner *sandbox.Sandbox) error {
		// A verb may have started using it while this waited for the
		// lock: a fork pins its new checkpoint before it lets go of the
		// parent.
		if owner.Checkpoint == ck.ID || owner.Pending != "" || c.svc.Pinned(ck.ID) {
			return nil
		}
		if live && lastUpload {
			c.log.Info("keeping a checkpoint as its sandbox's last uploaded state; removing its copy here", "checkpoint", ck.ID, "sandbox", owner.Name, "kind", ck.Kind)
			c.svc.DropCheckpointFiles(ctx, ck)
			return nil
		}
		c.log.Info("removing a checkpoint nothing needs", "checkpoint", ck.ID, "sandbox", owner.Name, "kind", ck.Kind)
		if err := c.svc.DeleteCheckpointLocked(ctx, owner, ck); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Error("garbage collection", "checkpoint", ck.ID, "err", err)
		}
		return nil
	})
}
