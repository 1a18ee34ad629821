package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/export"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/imagecrypt"
)

// ExportService writes agents as sealed archives and makes them again
// from one. *export.Service implements it.
type ExportService interface {
	Prepare(ctx context.Context, ref string, fsOnly bool) (*export.Export, error)
	Import(ctx context.Context, r io.Reader, key *imagecrypt.Key, p export.ImportParams) (*export.Result, error)
}

// DefaultMaxArchiveBytes bounds an archive an import reads.
const DefaultMaxArchiveBytes = 256 << 30

// exportSandbox streams an archive of a sandbox's record and newest
// checkpoint, sealed under the key the request gives in
// api.HeaderArchiveKey, or a fresh one it answers in that header.
func (s *server) exportSandbox(w http.ResponseWriter, r *http.Request) error {
	if s.export == nil {
		return httpx.NotEnabled("export")
	}
	fsOnly, err := httpx.QueryBool(r, "fs_only")
	if err != nil {
		return err
	}
	key, text, err := archiveKey(r, true)
	if err != nil {
		return err
	}
	x, err := s.export.Prepare(r.Context(), r.PathValue("name"), fsOnly)
	if err != nil {
		return err
	}
	defer x.Close()
	hdr := x.Header()
	if text != "" {
		w.Header().Set(api.HeaderArchiveKey, text)
	}
	w.Header().Set(api.HeaderArchiveMemory, boolText(hdr.Memory))
	w.Header().Set(api.HeaderArchiveSecrets, strings.Join(hdr.SecretNames(), ","))
	w.Header().Set("Content-Type", api.ArchiveContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+hdr.Name+`.den"`)
	return x.WriteTo(r.Context(), newFlushWriter(w), key)
}

// importSandbox makes a sandbox of the caller from the archive in the
// request body, sealed under the key in api.HeaderArchiveKey.
func (s *server) importSandbox(w http.ResponseWriter, r *http.Request) error {
	if s.export == nil {
		return httpx.NotEnabled("import")
	}
	key, _, err := archiveKey(r, false)
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, s.maxArchiveBytes)
	res, err := s.export.Import(r.Context(), body, key, export.ImportParams{Name: r.URL.Query().Get("name"), Owner: httpx.PrincipalOf(r).Owner})
	if err != nil {
		return err
	}
	h := res.Header
	return httpx.WriteJSON(w, http.StatusCreated, api.Import{Sandbox: s.toSandbox(res.Sandbox), From: h.Name, Memory: h.Memory,
		Secrets: h.SecretNames(), Image: h.Spec.Image, ImageDigest: h.ImageDigest, ImageNote: res.ImageNote, ExportedAt: h.ExportedAt})
}

// archiveKey is the key in the request's header; with fresh, a new one
// (and its text) when there is none.
func archiveKey(r *http.Request, fresh bool) (*imagecrypt.Key, string, error) {
	text := r.Header.Get(api.HeaderArchiveKey)
	if text != "" {
		k, err := export.ParseKey(text)
		return k, "", err
	}
	if !fresh {
		return nil, "", errdefs.WithHint(errdefs.Invalid("an import needs the archive's key, in the %s header", api.HeaderArchiveKey),
			"give the key `den export` printed: `den import FILE --key KEY` or --key-file")
	}
	return export.NewKey()
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
