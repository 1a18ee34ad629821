package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "files", "stat"), c.fileQuery(path), nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// ListFiles lists the directory at path inside a sandbox.
func (c *Client) ListFiles(ctx context.Context, name, path string) ([]api.FileInfo, error) {
	var l api.FileList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "files", "list"), c.fileQuery(path), nil, &l); err != nil {
		return nil, err
	}
	return l.Files, nil
}

// ReadFile streams the contents of the file at path inside a sandbox. The
// caller closes the reader.
func (c *Client) ReadFile(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.download(ctx, name, "reading "+path, sandboxPath(name, "files", "content"), c.fileQuery(path))
}

// WriteFile creates or replaces the file at path inside a sandbox with
// what r yields, streamed as it is read (never held whole in memory).
// mode 0 lets dend choose (0644 for a new file).
func (c *Client) WriteFile(ctx context.Context, name, path string, mode fs.FileMode, r io.Reader) error {
	q := c.fileQuery(path)
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	return c.upload(ctx, http.MethodPut, sandboxPath(name, "files", "content"), q, "application/octet-stream", r)
}

// WriteOptions are how WriteFileWith writes a file.
type WriteOptions struct {
	Mode fs.FileMode // 0 lets dend choose (0644)
	// User owns the file: a name, uid, or either followed by :group.
	// Empty keeps the owner of the file replaced (root for a new one).
	User string
	// Parents creates the missing directories above the file (0755,
	// owned by User), where WriteFile would fail with not found.
	Parents bool
	// ParentsByRoot, with Parents and FilesAs, has the missing
	// directories made by root and given to the user, as E2B's envd
	// does; the file is still written as the user.
	ParentsByRoot bool
	// Xattrs are user extended attributes (user.*, by full name) to set
	// on the file; it keeps those of the file it replaces.
	Xattrs map[string]string
	// DropXattrs, a prefix in user.*, leaves out the attributes of the
	// file replaced whose names start with it.
	DropXattrs string
}

// WriteFileWith is WriteFile with more say over the file: its owner and
// whether its directory is made.
func (c *Client) WriteFileWith(ctx context.Context, name, path string, r io.Reader, o WriteOptions) error {
	q := c.fileQuery(path)
	if o.Mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(o.Mode.Perm()), 8))
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if o.Parents {
		q.Set("parents", "true")
	}
	if o.ParentsByRoot {
		q.Set("parents_by_root", "true")
	}
	for name, v := range o.Xattrs {
		q.Add("xattr", name+"="+v)
	}
	if o.DropXattrs != "" {
		q.Set("xattrs_drop", o.DropXattrs)
	}
	return c.upload(ctx, http.MethodPut, sandboxPath(name, "files", "content"), q, "application/octet-stream", r)
}

// Mkdir creates a directory inside a sandbox.
func (c *Client) Mkdir(ctx context.Context, name string, req api.MkdirRequest) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "files", "mkdir"), c.fileQuery(""), req, nil)
}

// Move renames a file or directory inside a sandbox.
func (c *Client) Move(ctx context.Context, name, from, to string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "files", "move"), c.fileQuery(""), api.MoveRequest{From: from, To: to}, nil)
}

// RemoveFile removes a file, or with recursive a directory tree, inside a
// sandbox.
func (c *Client) RemoveFile(ctx context.Context, name, path string, recursive bool) error {
	q := c.fileQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "files"), q, nil, nil)
}

// ReadArchive streams a tar archive of path inside a sandbox: a
// directory's contents with names relative to it, or a single entry named
// after a file. The caller closes the reader.
func (c *Client) ReadArchive(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.download(ctx, name, "reading an archive of "+path, sandboxPath(name, "files", "archive"), c.fileQuery(path))
}

// WriteArchive extracts the tar stream r into dir inside a sandbox (dir is
// created with its parents), streaming it as it is read.
func (c *Client) WriteArchive(ctx context.Context, name, dir string, r io.Reader) error {
	return c.upload(ctx, http.MethodPut, sandboxPath(name, "files", "archive"), c.fileQuery(dir), "application/x-tar", r)
}

// fileQuery is the query of a file call on path ("" for none), with the
// user the client's file calls act as (FilesAs).
func (c *Client) fileQuery(path string) url.Values {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if c.filesAs != "" {
		q.Set("as", c.filesAs)
	}
	return q
}

// FilesAs returns a client like c whose calls to a sandbox's files (Stat,
// ListFiles, ReadFile, WriteFile, Mkdir, Move, RemoveFile, the archives,
// WatchFiles) are done as user inside the sandbox: a name, a uid, or
// either followed by :group, with that user's permissions (uid, gid and
// groups from the sandbox's /etc/passwd and /etc/group). What the user
// may not do is refused, and what is made belongs to them. "" is root,
// as for c. Other calls are c's.
func (c *Client) FilesAs(user string) *Client {
	cc := *c
	cc.filesAs = user
	return &cc
}

// download streams a body from sandbox name; what says what it reads
// ("reading /etc/hosts"), for errors.
func (c *Client) download(ctx context.Context, name, what, path string, q url.Values) (io.ReadCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, query: q})
	if err != nil {
		return nil, err
	}
	return &downloadBody{ReadCloser: resp.Body, c: c, ctx: ctx, sandbox: name, what: what}, nil
}

// downloadBody is a download that says why it broke off, when it does.
// dend ends a transfer when its sandbox goes to sleep (or dend stops),
// and once the bytes have begun it can only stop sending them: the
// sandbox's state then tells why.
type downloadBody struct {
	io.ReadCloser
	c       *Client
	ctx     context.Context
	sandbox string
	what    string
	n       int64
	broken  error
}

func (b *downloadBody) Read(p []byte) (int, error) {
	if b.broken != nil {
		return 0, b.broken
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil && err != io.EOF && b.ctx.Err() == nil {
		b.broken = b.c.brokeOff(b.ctx, b.sandbox, b.what, b.n, err)
		return n, b.broken
	}
	return n, err
}

// brokeOff is the error of a download from sandbox name that stopped
// after n bytes with cause.
func (c *Client) brokeOff(ctx context.Context, name, what string, n int64, cause error) *Error {
	e := &api.Error{Code: api.CodeUnavailable,
		Message: fmt.Sprintf("%s from sandbox %s broke off after %d bytes (%s)", what, name, n, rootCause(cause)),
		Hint:    "read it again; if it keeps failing, check that dend is running"}
	sb, err := c.GetSandbox(ctx, name)
	switch {
	case err != nil:
	case sb.Pending != "":
		e.Message = fmt.Sprintf("%s from sandbox %s broke off after %d bytes: the sandbox is in the middle of a %s", what, name, n, sb.Pending)
		e.Hint = "read it again: a sleeping sandbox wakes for it"
	case sb.State != api.StateRunning:
		e.Message = fmt.Sprintf("%s from sandbox %s broke off after %d bytes: the sandbox is %s", what, name, n, sb.State)
		e.Hint = "read it again: a sleeping sandbox wakes for it"
	}
	return &Error{API: e, err: cause}
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

// FileWatch is a watch of a directory's changes; see WatchFiles.
type FileWatch struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// WatchFiles watches the directory at path inside a sandbox (with
// recursive, its subdirectories too) and returns once the watch is in
// place: any change made after it is seen. Read the changes with Next;
// Close ends the watch.
func (c *Client) WatchFiles(ctx context.Context, name, path string, recursive bool) (*FileWatch, error) {
	q := c.fileQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: sandboxPath(name, "files", "watch"), query: q})
	if err != nil {
		return nil, err
	}
	return &FileWatch{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Next returns the next change. It returns io.EOF once the directory went
// away, dend's *Error when the watch stopped (the sandbox was put to
// sleep), or the connection's error.
func (w *FileWatch) Next() (api.WatchEvent, error) {
	var ev api.WatchEvent
	if err := w.dec.Decode(&ev); err != nil {
		if errors.Is(err, io.EOF) {
			return ev, io.EOF
		}
		return ev, fmt.Errorf("reading the watch: %w", err)
	}
	if ev.Error != nil {
		return ev, fromAPI(ev.Error)
	}
	return ev, nil
}

// Close ends the watch.
func (w *FileWatch) Close() error { return w.body.Close() }
