package e2b

import (
	"bufio"
	"compress/gzip"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// /files: downloads stream a file out of den; uploads stream into it,
// each file made for the user with its missing directories.

// writeInfo is what an upload answers, per file.
type writeInfo struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// File metadata: X-Metadata-KEY: VALUE headers on an upload become the
// file's user attribute user.e2b.key (the key lowercased, as envd keeps
// it), which EntryInfo.metadata shows again.
const (
	headerMetadataPrefix = "X-Metadata-"
	metadataXattrPrefix  = "user.e2b."
)

// uploadMetadata is the metadata an upload's headers give its files.
func uploadMetadata(h http.Header) map[string]string {
	var out map[string]string
	for k, vs := range h {
		key, ok := strings.CutPrefix(http.CanonicalHeaderKey(k), headerMetadataPrefix)
		if !ok || key == "" || len(vs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(key)] = vs[0]
	}
	return out
}

// xattrsOf is metadata as the file's user attributes.
func xattrsOf(metadata map[string]string) map[string]string {
	if len(metadata) == 0 {
		return nil
	}
	out := make(map[string]string, len(metadata))
	for k, v := range metadata {
		out[metadataXattrPrefix+k] = v
	}
	return out
}

// metadataOf is the E2B metadata among a file's user attributes.
func metadataOf(xattrs map[string]string) map[string]string {
	var out map[string]string
	for name, v := range xattrs {
		if k, ok := strings.CutPrefix(name, metadataXattrPrefix); ok && k != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// smallFile is how much of a download is read ahead to tell its length,
// so that small and empty files go with a Content-Length, as envd sends.
const smallFile = 64 << 10

func (d *Door) download(w http.ResponseWriter, r *http.Request) {
	t := targetOf(r.Context())
	if r.URL.Query().Get("path") == "" {
		d.writeError(w, r, invalid("no path: give ?path=FILE"))
		return
	}
	p := t.abs(r.URL.Query().Get("path"))
	if err := d.checkUser(r, t); err != nil {
		d.writeError(w, r, err)
		return
	}
	fi, err := t.files().Stat(r.Context(), t.sb.ID, p)
	if err == nil && fi.Type == "dir" {
		err = invalid("%s is a directory", p)
	}
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	rc, err := t.files().ReadFile(r.Context(), t.sb.ID, p)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, smallFile)
	head, peekErr := br.Peek(smallFile)
	if peekErr != nil && peekErr != io.EOF && peekErr != bufio.ErrBufferFull {
		d.writeError(w, r, peekErr)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	var out io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	} else if peekErr == io.EOF {
		w.Header().Set("Content-Length", strconv.Itoa(len(head)))
	}
	if _, err := io.Copy(out, br); err != nil {
		// The status went out; a cut body is all that tells the client.
		d.log.Debug("e2b: download broke off", "sandbox", t.sb.ID, "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); enc == "gzip" {
			return true
		}
	}
	return false
}

// upload writes the body's files: each part named "file" of a multipart
// body, at ?path= or its own file name (directories kept); or the whole
// body, maybe gzipped, at ?path=.
func (d *Door) upload(w http.ResponseWriter, r *http.Request) {
	t := targetOf(r.Context())
	out, err := d.uploadFiles(r, t)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Door) uploadFiles(r *http.Request, t *target) ([]writeInfo, error) {
	query := r.URL.Query().Get("path")
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ctype != "multipart/form-data" {
		if query == "" {
			return nil, invalid("no path: an upload that is not multipart needs ?path=FILE")
		}
		body := io.Reader(r.Body)
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				return nil, invalid("the body is not gzip: %v", err)
			}
			defer gz.Close()
			body = gz
		}
		info, err := d.writeFile(r, t, query, body)
		if err != nil {
			return nil, err
		}
		return []writeInfo{info}, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, invalid("reading the multipart body: %v", err)
	}
	var out []writeInfo
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, invalid("reading the multipart body: %v", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		name := query
		if name == "" {
			name = partFileName(part)
		}
		if name == "" {
			return nil, invalid("a file part has no file name, and there is no ?path=")
		}
		info, err := d.writeFile(r, t, name, part)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	if len(out) == 0 {
		return nil, invalid("no file in the upload: send parts named \"file\"")
	}
	return out, nil
}

// partFileName is a part's file name as sent, directories included
// (Part.FileName keeps only the last element).
func partFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

func (d *Door) writeFile(r *http.Request, t *target, name string, body io.Reader) (writeInfo, error) {
	p := t.abs(name)
	metadata := uploadMetadata(r.Header)
	err := t.files().WriteFileWith(r.Context(), t.sb.ID, p, body, client.WriteOptions{User: t.userOf(), Parents: true, ParentsByRoot: true,
		// E2B replaces a file's metadata with each write's: none given
		// clears what the file had.
		Xattrs: xattrsOf(metadata), DropXattrs: metadataXattrPrefix})
	if err != nil {
		return writeInfo{}, err
	}
	return writeInfo{Name: path.Base(p), Type: "file", Path: p, Metadata: metadata}, nil
}

// checkUser refuses a user the sandbox does not have, as envd does, before
// anything is read.
func (d *Door) checkUser(r *http.Request, t *target) error {
	if t.user == "" || t.user == "root" {
		return nil
	}
	rc, err := t.c.ReadFile(r.Context(), t.sb.ID, "/etc/passwd")
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		if name, _, _ := strings.Cut(sc.Text(), ":"); name == t.user {
			return nil
		}
	}
	return &client.Error{API: &api.Error{Code: api.CodeInvalid, Message: "no user " + strconv.Quote(t.user) + " in the sandbox"}}
}
