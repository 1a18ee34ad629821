package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// The file system inside the sandbox. Paths are absolute in-sandbox paths;
// den-init validates them (internal/fspath) and answers invalid otherwise.
// A call whose context names a user (AsUser) is done by den-init with
// that user's permissions; else as root.

// actingUserKey is the context key of the user file calls act as.
type actingUserKey struct{}

// AsUser returns ctx for file calls that den-init does as user (a name,
// a uid, or either followed by :group), with the user's uid, gid and
// groups in the sandbox: what the user may not do is refused, and what
// is made belongs to them. "" is root, as without it.
func AsUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, actingUserKey{}, user)
}

// ActingUser is the user ctx's file calls act as; "" is root.
func ActingUser(ctx context.Context) string {
	user, _ := ctx.Value(actingUserKey{}).(string)
	return user
}

// filesRoute is den-init's path for the file route sub (under
// /v1/files), done as ctx's user when it names one.
func (c *Client) filesRoute(ctx context.Context, sub string) string {
	if user := ActingUser(ctx); user != "" {
		return "/v1/as/" + url.PathEscape(user) + "/files" + sub
	}
	return "/v1/files" + sub
}

// asErr is err of a file call under ctx, said plainly when the call was
// to be done as a user and den-init is from before that: it has no such
// route, and did nothing.
func asErr(ctx context.Context, err error) error {
	if err == nil || ActingUser(ctx) == "" || !errors.Is(err, errdefs.ErrNotFound) ||
		!strings.HasPrefix(err.Error(), "no route ") {
		return err
	}
	return errdefs.WithHint(errdefs.Unavailable("this sandbox's den-init is too old to act on files as user %q: nothing was done", ActingUser(ctx)),
		"stop and start the sandbox to give it the current den-init")
}

// Stat describes path without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	err := c.call(ctx, http.MethodGet, c.filesRoute(ctx, "/stat"), pathQuery(path), nil, &fi)
	return fi, asErr(ctx, err)
}

// ReadDir lists a directory, sorted by name.
func (c *Client) ReadDir(ctx context.Context, path string) ([]FileInfo, error) {
	var out []FileInfo
	err := c.call(ctx, http.MethodGet, c.filesRoute(ctx, "/list"), pathQuery(path), nil, &out)
	return out, asErr(ctx, err)
}

// ReadFile streams a regular file (following symlinks). The caller closes
// the reader; a transfer cut short reads as io.ErrUnexpectedEOF.
func (c *Client) ReadFile(ctx context.Context, path string) (io.ReadCloser, FileInfo, error) {
	resp, err := c.do(ctx, http.MethodGet, c.filesRoute(ctx, "/content"), pathQuery(path), nil, "")
	if err != nil {
		return nil, FileInfo{}, asErr(ctx, err)
	}
	var fi FileInfo
	if err := json.Unmarshal([]byte(resp.Header.Get(HeaderFileInfo)), &fi); err != nil {
		resp.Body.Close()
		return nil, FileInfo{}, fmt.Errorf("decoding description of %q: %w", path, err)
	}
	return resp.Body, fi, nil
}

// WriteFile replaces path with r's content, as o says. It returns once
// the file is durable. The directory must exist, unless o.Parents.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, o WriteOptions) error {
	q := pathQuery(path)
	if o.Mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(o.Mode), 8))
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if o.Parents {
		q.Set("parents", "1")
	}
	if o.ParentsByRoot {
		q.Set("parents_by_root", "1")
	}
	for name, v := range o.Xattrs {
		q.Add("xattr", name+"="+v)
	}
	if o.DropXattrs != "" {
		q.Set("xattrs_drop", o.DropXattrs)
	}
	resp, err := c.do(ctx, http.MethodPut, c.filesRoute(ctx, "/content"), q, nonNil(r), "application/octet-stream")
	if err != nil {
		return asErr(ctx, err)
	}
	if len(o.Xattrs) > 0 && resp.Header.Get(HeaderXattrsSet) == "" {
		drain(resp)
		return errdefs.WithHint(errdefs.Unavailable("this sandbox's den-init is too old to set extended attributes: %q was written without them", path),
			"stop and start the sandbox to give it the current den-init")
	}
	return drain(resp)
}

// Mkdir creates a directory (and its parents, if asked); mode 0 is 0755.
func (c *Client) Mkdir(ctx context.Context, req MkdirRequest) error {
	return asErr(ctx, c.call(ctx, http.MethodPost, c.filesRoute(ctx, "/mkdir"), nil, req, nil))
}

// Remove deletes path; a non-empty directory only when recursive.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	q := pathQuery(path)
	if recursive {
		q.Set("recursive", "1")
	}
	return asErr(ctx, c.call(ctx, http.MethodDelete, c.filesRoute(ctx, ""), q, nil, nil))
}

// Move renames from to to.
func (c *Client) Move(ctx context.Context, from, to string) error {
	return asErr(ctx, c.call(ctx, http.MethodPost, c.filesRoute(ctx, "/move"), nil, MoveRequest{From: from, To: to}, nil))
}

// ReadTar streams path as a tar: a directory's contents with names
// relative to it, or a file under its base name.
func (c *Client) ReadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, c.filesRoute(ctx, "/archive"), pathQuery(path), nil, "")
	if err != nil {
		return nil, asErr(ctx, err)
	}
	return resp.Body, nil
}

// WriteTar extracts the tar r into dir, creating dir if needed. It returns
// once the files are durable.
func (c *Client) WriteTar(ctx context.Context, dir string, r io.Reader) error {
	resp, err := c.do(ctx, http.MethodPut, c.filesRoute(ctx, "/archive"), pathQuery(dir), nonNil(r), "application/x-tar")
	if err != nil {
		return asErr(ctx, err)
	}
	return drain(resp)
}

// Watch streams the changes under dir (with recursive, in its
// subdirectories too) to each, having called ready once the watch is in
// place. It returns nil when dir went away, each's error, or why the
// stream stopped.
func (c *Client) Watch(ctx context.Context, dir string, recursive bool, ready func(), each func(WatchEvent) error) error {
	q := pathQuery(dir)
	if recursive {
		q.Set("recursive", "1")
	}
	resp, err := c.do(ctx, http.MethodGet, c.filesRoute(ctx, "/watch"), q, nil, "")
	if err != nil {
		return asErr(ctx, err)
	}
	defer resp.Body.Close()
	ready()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev WatchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return c.broken(ctx, "watching "+dir, err)
		}
		if err := each(ev); err != nil {
			return err
		}
	}
}

func pathQuery(p string) url.Values { return url.Values{"path": {p}} }

// nonNil keeps an empty upload a PUT with an empty body.
func nonNil(r io.Reader) io.Reader {
	if r == nil {
		return http.NoBody
	}
	return r
}
