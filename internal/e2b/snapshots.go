package e2b

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Snapshots and templates: E2B's snapshot of a sandbox is a den
// checkpoint of it, and its templates are den's images.
//
//	POST   /sandboxes/{id}/snapshots   createSnapshot   POST /v1/sandboxes/{id}/checkpoints
//	GET    /snapshots                  listSnapshots    GET  .../checkpoints of each sandbox
//	DELETE /templates/{snapshot}       deleteSnapshot   DELETE .../checkpoints/{ckpt}
//	POST   /v2/sandboxes {templateID: snapshot}         POST /v1/sandboxes {from}
//	GET    /templates                  template list    GET  /v1/images
//	GET    /templates/aliases/{alias}  Template.exists  GET  /v1/images/{name}
//
// A snapshot's id is SANDBOX-ID:CHECKPOINT-ID: ids are unique everywhere,
// so it names one checkpoint whoever asks, and it is den's own way of
// naming a sandbox's checkpoint, which dend looks up among the caller's
// sandboxes only: another owner's snapshot is not found, as one that
// does not exist. Image names hold no ':', so a template id with one is a
// snapshot. A snapshot holds the sandbox's files and memory, as E2B's
// does: a sandbox created from it carries on its processes. It lives as
// long as its sandbox, or as long as a sandbox created from it needs it.

// snapshotJSON is E2B's SnapshotInfo.
type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// snapshotID is the E2B id of checkpoint ck.
func snapshotID(ck *api.Checkpoint) string { return ck.Sandbox + ":" + ck.ID }

// isSnapshot reports whether a template id names a snapshot.
func isSnapshot(template string) bool { return strings.Contains(template, ":") }

func snapshotOf(ck *api.Checkpoint) snapshotJSON {
	out := snapshotJSON{SnapshotID: snapshotID(ck), Names: []string{}}
	if ck.Name != "" {
		out.Names = append(out.Names, ck.Name)
	}
	return out
}

// createSnapshot checkpoints a sandbox, files and memory, named as asked
// (a name is unique among the sandbox's checkpoints).
func (d *Door) createSnapshot(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	sb, err := lookup(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	ck, err := c.Checkpoint(r.Context(), sb.ID, client.CheckpointOptions{Name: req.Name})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshotOf(ck))
	return nil
}

// listSnapshots lists the manual checkpoints of the caller's sandboxes
// (of one, with sandboxID), newest first; name keeps those whose name,
// id or snapshot id it is.
func (d *Door) listSnapshots(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	v := r.URL.Query()
	limit, after, err := parsePage(v)
	if err != nil {
		return err
	}
	cks, err := d.checkpointsOf(r.Context(), c, v.Get("sandboxID"))
	if err != nil {
		return err
	}
	name := v.Get("name")
	var kept []api.Checkpoint
	for _, ck := range cks {
		if ck.Kind == "manual" && (name == "" || name == ck.Name || name == ck.ID || name == snapshotID(&ck)) {
			kept = append(kept, ck)
		}
	}
	page, next := pageOf(kept, func(ck *api.Checkpoint) cursor { return cursor{at: ck.CreatedAt, id: ck.ID} }, false, after, limit)
	out := make([]snapshotJSON, 0, len(page))
	for i := range page {
		out = append(out, snapshotOf(&page[i]))
	}
	if next != nil {
		w.Header().Set(headerNextToken, next.token())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkpointsOf lists the checkpoints of sandbox id, or with id "" of
// every sandbox the caller sees.
func (d *Door) checkpointsOf(ctx context.Context, c *client.Client, id string) ([]api.Checkpoint, error) {
	if id != "" {
		sb, err := lookup(ctx, c, id)
		if client.IsNotFound(err) {
			return nil, nil // E2B lists nothing for a sandbox it does not know
		}
		if err != nil {
			return nil, err
		}
		return c.Checkpoints(ctx, sb.ID)
	}
	sbs, err := c.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.Checkpoint
	for _, sb := range sbs {
		cks, err := c.Checkpoints(ctx, sb.ID)
		if client.IsNotFound(err) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cks...)
	}
	return out, nil
}

// deleteTemplate deletes a snapshot. den's images are built and removed
// with den's own verbs, not through E2B's API.
func (d *Door) deleteTemplate(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	id := r.PathValue("id")
	if !isSnapshot(id) {
		return invalidHint("`den image rm "+id+"` removes a den image",
			"template %q is a den image, which E2B's API does not remove; only snapshots (SANDBOX-ID:CHECKPOINT-ID) are deleted here", id)
	}
	sbID, ckID, _ := strings.Cut(id, ":")
	if err := c.RemoveCheckpoint(r.Context(), sbID, ckID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// templateJSON is E2B's Template, for a den image.
type templateJSON struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	BuildStatus   string     `json:"buildStatus"`
	BuildCount    int        `json:"buildCount"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	Public        bool       `json:"public"`
	CPUCount      int        `json:"cpuCount"`
	MemoryMB      int        `json:"memoryMB"`
	DiskSizeMB    int64      `json:"diskSizeMB"`
	EnvdVersion   string     `json:"envdVersion"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *string    `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int        `json:"spawnCount"`
}

// What den gives a sandbox made without limits (its defaults), which
// E2B's template list shows.
const (
	templateCPUs     = 1
	templateMemoryMB = 1024
)

func templateOfImage(im *api.Image) templateJSON {
	t := templateOf(im.Name)
	names := []string{t}
	if t != im.Name {
		names = append(names, im.Name)
	}
	return templateJSON{
		TemplateID: t, BuildID: im.Name + "@" + strconv.Itoa(im.Version), BuildStatus: "ready", BuildCount: im.Version,
		Aliases: names, Names: names, CPUCount: templateCPUs, MemoryMB: templateMemoryMB, DiskSizeMB: im.SizeBytes >> 20,
		EnvdVersion: envdVersion, CreatedAt: im.CreatedAt.UTC(), UpdatedAt: im.CreatedAt.UTC(),
	}
}

// listTemplates lists den's images as E2B's templates; base is e2b-base.
func (d *Door) listTemplates(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	ims, err := c.ListImages(r.Context())
	if err != nil {
		return err
	}
	out := make([]templateJSON, 0, len(ims))
	for i := range ims {
		out = append(out, templateOfImage(&ims[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// templateAlias answers whether a template exists (Template.exists).
func (d *Door) templateAlias(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	alias := r.PathValue("alias")
	image, err := templateImage(alias)
	if err != nil {
		return err
	}
	im, err := c.GetImage(r.Context(), image)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": templateOf(im.Name), "public": false})
	return nil
}
