package client

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/den-dev/den/api"
)

// Stat describes the file at path inside a sandbox.
func (c *Client) Stat(ctx context.Context, name, path string) (*api.FileInfo, error) {
	var fi api.FileInfo
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "files", "stat"), pathQuery(path), nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// ListFiles lists the directory at path inside a sandbox.
func (c *Client) ListFiles(ctx context.Context, name, path string) ([]api.FileInfo, error) {
	var l api.FileList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "files", "list"), pathQuery(path), nil, &l); err != nil {
		return nil, err
	}
	return l.Files, nil
}

// ReadFile streams the contents of the file at path inside a sandbox. The
// caller closes the reader.
func (c *Client) ReadFile(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.download(ctx, sandboxPath(name, "files", "content"), pathQuery(path))
}

// WriteFile creates or replaces the file at path inside a sandbox with
// what r yields, streamed as it is read (never held whole in memory).
// mode 0 lets dend choose (0644 for a new file).
func (c *Client) WriteFile(ctx context.Context, name, path string, mode fs.FileMode, r io.Reader) error {
	q := pathQuery(path)
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	return c.upload(ctx, http.MethodPut, sandboxPath(name, "files", "content"), q, "application/octet-stream", r)
}

// Mkdir creates a directory inside a sandbox.
func (c *Client) Mkdir(ctx context.Context, name string, req api.MkdirRequest) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "files", "mkdir"), nil, req, nil)
}

// Move renames a file or directory inside a sandbox.
func (c *Client) Move(ctx context.Context, name, from, to string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "files", "move"), nil, api.MoveRequest{From: from, To: to}, nil)
}

// RemoveFile removes a file, or with recursive a directory tree, inside a
// sandbox.
func (c *Client) RemoveFile(ctx context.Context, name, path string, recursive bool) error {
	q := pathQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "files"), q, nil, nil)
}

// ReadArchive streams a tar archive of path inside a sandbox: a
// directory's contents with names relative to it, or a single entry named
// after a file. The caller closes the reader.
func (c *Client) ReadArchive(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.download(ctx, sandboxPath(name, "files", "archive"), pathQuery(path))
}

// WriteArchive extracts the tar stream r into dir inside a sandbox (dir is
// created with its parents), streaming it as it is read.
func (c *Client) WriteArchive(ctx context.Context, name, dir string, r io.Reader) error {
	return c.upload(ctx, http.MethodPut, sandboxPath(name, "files", "archive"), pathQuery(dir), "application/x-tar", r)
}

func pathQuery(path string) url.Values { return url.Values{"path": {path}} }

func (c *Client) download(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// upload sends r as a streamed body of unknown length and expects an empty
// answer.
func (c *Client) upload(ctx context.Context, method, path string, q url.Values, contentType string, r io.Reader) error {
	resp, err := c.send(ctx, request{method: method, path: path, query: q, body: opaque(r), contentType: contentType})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// opaque hides r's concrete type from net/http, so the body is always sent
// as it is read (chunked), whatever r is.
func opaque(r io.Reader) io.Reader {
	if r == nil {
		return http.NoBody
	}
	return struct{ io.Reader }{r}
}
