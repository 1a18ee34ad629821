package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// Default permission bits for files and directories the API creates.
const (
	defaultFileMode = 0o644
	defaultDirMode  = 0o755
)

// Every file route checks its paths before it asks for the sandbox's file
// system, so a bad path never reaches the sandbox.

func (s *server) statFile(w http.ResponseWriter, r *http.Request) error {
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	fi, err := fsys.Stat(ctx, p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toFileInfo(fi))
}

func (s *server) listFiles(w http.ResponseWriter, r *http.Request) error {
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	infos, err := fsys.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.FileList{Files: mapSlice(infos, toFileInfo)})
}

func (s *server) readFile(w http.ResponseWriter, r *http.Request) error {
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	rc, fi, err := fsys.ReadFile(ctx, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A file that claims no size (those of /proc and /sys) may still have
	// content: it goes without a length, read to its end.
	if fi.Type == "file" && fi.Size > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	_, err = io.Copy(newFlushWriter(w), rc)
	return err
}

// writeFile streams the request body into a file, creating or replacing it.
func (s *server) writeFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	mode, err := httpx.QueryMode(r, "mode", defaultFileMode)
	if err != nil {
		return err
	}
	parents, err := httpx.QueryBool(r, "parents")
	if err != nil {
		return err
	}
	byRoot, err := httpx.QueryBool(r, "parents_by_root")
	if err != nil {
		return err
	}
	xattrs, err := queryXattrs(r)
	if err != nil {
		return err
	}
	drop := r.URL.Query().Get("xattrs_drop")
	if err := guest.ValidateXattrPrefix(drop); err != nil {
		return err
	}
	ctx, fsys, err := s.filesOf(r)
	if err != nil {
		return err
	}
	o := guest.WriteOptions{Mode: mode, User: r.URL.Query().Get("user"), Parents: parents, ParentsByRoot: byRoot, Xattrs: xattrs, DropXattrs: drop}
	if err := fsys.WriteFile(ctx, p, r.Body, o); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) mkdir(w http.ResponseWriter, r *http.Request) error {
	var req api.MkdirRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p, err := cleanPath("path", req.Path)
	if err != nil {
		return err
	}
	mode := req.Mode
	if mode == 0 {
		mode = defaultDirMode
	}
	if mode > 0o7777 {
		return errdefs.WithHint(errdefs.Invalid("invalid mode %#o", mode), "mode holds permission bits only, at most 0o7777 (4095 as a JSON number)")
	}
	ctx, fsys, err := s.filesOf(r)
	if err != nil {
		return err
	}
	if err := fsys.Mkdir(ctx, guest.MkdirRequest{Path: p, Parents: req.Parents, ParentsByRoot: req.ParentsByRoot, Mode: mode, User: req.User}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) moveFile(w http.ResponseWriter, r *http.Request) error {
	var req api.MoveRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	from, err := cleanPath("from", req.From)
	if err != nil {
		return err
	}
	to, err := cleanPath("to", req.To)
	if err != nil {
		return err
	}
	ctx, fsys, err := s.filesOf(r)
	if err != nil {
		return err
	}
	if err := fsys.Move(ctx, from, to); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) removeFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r, "path")
	if err != nil {
		return err
	}
	recursive, err := httpx.QueryBool(r, "recursive")
	if err != nil {
		return err
	}
	if p == "/" {
		return errdefs.WithHint(errdefs.Invalid("refusing to remove the root directory"), "remove the files under it instead, or remove the sandbox")
	}
	ctx, fsys, err := s.filesOf(r)
	if err != nil {
		return err
	}
	if err := fsys.Remove(ctx, p, recursive); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readArchive streams a tar of a directory's contents, or of one file.
func (s *server) readArchive(w http.ResponseWriter, r *http.Request) error {
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	rc, err := fsys.ReadTar(ctx, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	_, err = io.Copy(newFlushWriter(w), rc)
	return err
}

// writeArchive extracts the tar in the request body into a directory.
func (s *server) writeArchive(w http.ResponseWriter, r *http.Request) error {
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	if err := fsys.WriteTar(ctx, p, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// fileTarget checks ?path= and then finds the sandbox's file system.
// watchFiles streams the changes under a directory as NDJSON
// api.WatchEvent lines, once the watch is in place. The stream ends when
// the directory goes away, or, with a last line holding the error, when
// the watch stopped (the sandbox went to sleep).
func (s *server) watchFiles(w http.ResponseWriter, r *http.Request) error {
	recursive, err := httpx.QueryBool(r, "recursive")
	if err != nil {
		return err
	}
	p, ctx, fsys, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	fw := newFlushWriter(w)
	enc := json.NewEncoder(fw)
	started := false
	err = fsys.Watch(ctx, p, recursive, func() {
		started = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		_ = fw.Flush()
	}, func(ev guest.WatchEvent) error {
		return enc.Encode(api.WatchEvent{Name: ev.Name, Op: ev.Op})
	})
	if err == nil || !started {
		return err
	}
	if r.Context().Err() != nil {
		return nil // the client left
	}
	_, body := httpx.APIError(s.log, r, err)
	return enc.Encode(api.WatchEvent{Error: body})
}

func (s *server) fileTarget(r *http.Request) (string, context.Context, sandbox.Files, error) {
	p, err := queryPath(r, "path")
	if err != nil {
		return "", nil, nil, err
	}
	ctx, fsys, err := s.filesOf(r)
	if err != nil {
		return "", nil, nil, err
	}
	return p, ctx, fsys, nil
}

// maxUserLen bounds ?as=, far above any user name.
const maxUserLen = 256

// filesOf checks ?as= and then finds the sandbox's file system. Calls to
// it under the context returned are done as the user ?as= names (a name,
// a uid, or either with :group), with that user's permissions inside the
// sandbox; without it, as root.
func (s *server) filesOf(r *http.Request) (context.Context, sandbox.Files, error) {
	as := r.URL.Query().Get("as")
	if len(as) > maxUserLen || strings.ContainsAny(as, "/\x00") {
		return nil, nil, errdefs.WithHint(errdefs.Invalid("invalid as=%.40q", as),
			"give the user to act as inside the sandbox: a name or uid, or either followed by :group")
	}
	fsys, err := s.sandboxes.Files(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, nil, err
	}
	return guest.AsUser(r.Context(), as), fsys, nil
}

// queryPath reads a required path inside the sandbox from the query.
func queryPath(r *http.Request, name string) (string, error) {
	return cleanPath(name, r.URL.Query().Get(name))
}

// cleanPath checks a path inside the sandbox: present, absolute, no "..".
func cleanPath(field, p string) (string, error) {
	if p == "" {
		return "", errdefs.WithHint(errdefs.Invalid("missing %s", field), "give an absolute path inside the sandbox, e.g. /root/notes.txt")
	}
	return fspath.Clean(p)
}

// queryXattrs reads the user attributes a write sets: xattr=NAME=VALUE,
// repeated.
func queryXattrs(r *http.Request) (map[string]string, error) {
	vs := r.URL.Query()["xattr"]
	if len(vs) > guest.MaxXattrs {
		return nil, errdefs.Invalid("%d extended attributes: at most %d", len(vs), guest.MaxXattrs)
	}
	var out map[string]string
	for _, kv := range vs {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, errdefs.WithHint(errdefs.Invalid("invalid xattr %q", kv), "give xattr=NAME=VALUE, NAME in user.*")
		}
		if err := guest.ValidateXattr(name, value); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = value
	}
	return out, nil
}
