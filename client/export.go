package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/den-dev/den/api"
)

// ExportOptions are how Export writes an agent's archive.
type ExportOptions struct {
	// FSOnly leaves out its memory and processes: files only.
	FSOnly bool
	// Key seals the archive: 64 hex digits. "" has dend make a fresh
	// one, given back in Export.Key.
	Key string
}

// Export is an agent's archive as it is downloaded: read it to its end,
// then Close. Its bytes are sealed: nothing in it can be read, changed,
// or imported without the key.
type Export struct {
	io.ReadCloser
	// Key is the fresh key dend sealed it with, when none was given.
	Key string
	// Memory says it holds the processes, not only the files.
	Memory bool
	// Secrets are the secrets it needs on the den it goes to, by name.
	Secrets []string
}

// Export writes sandbox name's record and newest checkpoint as a sealed
// archive (see `den export`). A running or paused sandbox is
// checkpointed first; a hibernated one exports the checkpoint it sleeps
// in; a stopped one, a files-only checkpoint of its files.
func (c *Client) Export(ctx context.Context, name string, o ExportOptions) (*Export, error) {
	q := url.Values{}
	if o.FSOnly {
		q.Set("fs_only", "true")
	}
	h := http.Header{}
	if o.Key != "" {
		h.Set(api.HeaderArchiveKey, o.Key)
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: sandboxPath(name, "export"), query: q, header: h})
	if err != nil {
		return nil, err
	}
	x := &Export{Key: resp.Header.Get(api.HeaderArchiveKey), Memory: resp.Header.Get(api.HeaderArchiveMemory) == "true",
		ReadCloser: &downloadBody{ReadCloser: resp.Body, c: c, ctx: ctx, sandbox: name, what: "exporting it"}}
	if s := resp.Header.Get(api.HeaderArchiveSecrets); s != "" {
		x.Secrets = strings.Split(s, ",")
	}
	return x, nil
}

// ImportOptions are how Import makes an agent of an archive.
type ImportOptions struct {
	// Key is the archive's key, as Export gave it.
	Key string
	// Name is the sandbox's name here; "" keeps the archive's.
	Name string
}

// Import makes the agent in the archive r yields a sandbox of the
// caller: hibernated with its processes (it wakes on first use), or
// stopped with its files (it boots on start). A damaged archive, the
// wrong key or a secret not set here is refused and leaves nothing.
func (c *Client) Import(ctx context.Context, r io.Reader, o ImportOptions) (*api.Import, error) {
	q := url.Values{}
	if o.Name != "" {
		q.Set("name", o.Name)
	}
	h := http.Header{}
	h.Set(api.HeaderArchiveKey, o.Key)
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/sandboxes/import", query: q, header: h,
		body: opaque(r), contentType: api.ArchiveContentType})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.Import
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding the answer to an import: %w", err)
	}
	return &out, nil
}
