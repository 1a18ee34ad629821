package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/image"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// ImageService keeps the base images. *image.Manager implements it. The
// long operations report progress through a callback as they go.
type ImageService interface {
	List(ctx context.Context) ([]*sandbox.Image, error)
	Get(ctx context.Context, name string) (*sandbox.Image, error)
	Build(ctx context.Context, name string, force bool, progress func(image.Progress)) (*sandbox.Image, error)
	Import(ctx context.Context, name string, r io.Reader, progress func(image.Progress)) (*sandbox.Image, error)
	Pull(ctx context.Context, ref, name string, insecure bool, progress func(image.Progress)) (*sandbox.Image, error)
	// Remove removes an image, every version (NAME), or one older
	// version (NAME@VERSION); Versions lists the older versions kept of
	// an image, or of all when name is "".
	Remove(ctx context.Context, ref string) error
	Versions(ctx context.Context, name string) ([]*sandbox.Image, error)
}

func (s *server) listImages(w http.ResponseWriter, r *http.Request) error {
	ims, err := s.images.List(r.Context())
	if err != nil {
		return err
	}
	older, err := s.images.Versions(r.Context(), "")
	if err != nil {
		return err
	}
	list := api.ImageList{Images: mapSlice(ims, toImage)}
	pools := s.warmPools(r.Context())
	for i := range list.Images {
		list.Images[i].Warm = pools[list.Images[i].Name]
		for _, o := range older {
			if o.Name == list.Images[i].Name {
				list.Images[i].Older = append(list.Images[i].Older, toImage(o))
			}
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, list)
}

func (s *server) getImage(w http.ResponseWriter, r *http.Request) error {
	im, err := s.images.Get(r.Context(), r.PathValue("image"))
	if err != nil {
		return err
	}
	out := toImage(im)
	out.Warm = s.warmPools(r.Context())[im.Name]
	older, err := s.images.Versions(r.Context(), im.Name)
	if err != nil {
		return err
	}
	out.Older = mapSlice(older, toImage)
	return httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) removeImage(w http.ResponseWriter, r *http.Request) error {
	if err := s.images.Remove(r.Context(), r.PathValue("image")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) buildImage(w http.ResponseWriter, r *http.Request) error {
	var req api.BuildImageRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if req.Name == "" {
		return errdefs.WithHint(errdefs.Invalid("no image name given"), `set "name" to a built-in recipe: "debian" or "busybox"`)
	}
	return s.streamProgress(w, r, func(ctx context.Context, progress func(image.Progress)) (*sandbox.Image, error) {
		return s.images.Build(ctx, req.Name, req.Force, progress)
	})
}

// importImage streams the request body, a docker-save or OCI-layout tar,
// to the image manager.
func (s *server) importImage(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("name")
	if name == "" {
		return errdefs.WithHint(errdefs.Invalid("missing query parameter name"), "name the new image, e.g. ?name=myimage")
	}
	if err := specs.ValidateName("image", name); err != nil {
		return err
	}
	return s.streamProgress(w, r, func(ctx context.Context, progress func(image.Progress)) (*sandbox.Image, error) {
		return s.images.Import(ctx, name, r.Body, progress)
	})
}

func (s *server) pullImage(w http.ResponseWriter, r *http.Request) error {
	var req api.PullImageRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if req.Ref == "" {
		return errdefs.WithHint(errdefs.Invalid("no image reference given"), `set "ref", e.g. "docker.io/library/alpine:3.20"`)
	}
	return s.streamProgress(w, r, func(ctx context.Context, progress func(image.Progress)) (*sandbox.Image, error) {
		return s.images.Pull(ctx, req.Ref, req.Name, req.Insecure, progress)
	})
}

// Phases of the last line of a progress stream.
const (
	phaseDone   = "done"
	phaseFailed = "failed"
)

// streamProgress runs a long image operation and answers with an NDJSON
// stream of api.Progress, one line per report, each flushed. The last line
// has Done set and the Image or the Error: once the 200 went out, that line
// is the only way left to report a failure. An operation that fails before
// reporting anything gets an ordinary error answer instead.
func (s *server) streamProgress(w http.ResponseWriter, r *http.Request, op func(context.Context, func(image.Progress)) (*sandbox.Image, error)) error {
	ps := &progressStream{w: w, rc: http.NewResponseController(w)}
	im, err := op(r.Context(), func(p image.Progress) {
		ps.send(api.Progress{Phase: p.Phase, Message: p.Message, Current: p.Current, Total: p.Total})
	})
	last := api.Progress{Phase: phaseDone, Done: true}
	if err != nil {
		if !ps.end() {
			return err
		}
		_, last.Error = httpx.APIError(s.log, r, err)
		last.Phase = phaseFailed
	} else {
		ps.end()
		out := toImage(im)
		last.Image = &out
	}
	return ps.write(last)
}

// progressStream writes progress lines to a response. The operation may
// report from several goroutines, and even after it returned; the mutex
// keeps lines whole and end stops late reports.
type progressStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	begun  bool  // the status line went out
	ended  bool  // the operation returned; only the last line is left
	broken error // the first failed write; later lines are dropped
}

// send writes one report, unless the stream ended or broke.
func (ps *progressStream) send(p api.Progress) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.ended || ps.broken != nil {
		return
	}
	ps.writeLocked(p)
}

// end stops reports and says whether the status line went out.
func (ps *progressStream) end() (begun bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.ended = true
	return ps.begun
}

// write writes the last line.
func (ps *progressStream) write(p api.Progress) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.broken == nil {
		ps.writeLocked(p)
	}
	return ps.broken
}

func (ps *progressStream) writeLocked(p api.Progress) {
	if !ps.begun {
		ps.w.Header().Set("Content-Type", "application/x-ndjson")
		ps.w.WriteHeader(http.StatusOK)
		ps.begun = true
	}
	b, err := json.Marshal(p)
	if err == nil {
		_, err = ps.w.Write(append(b, '\n'))
	}
	if err == nil {
		err = ps.rc.Flush()
	}
	ps.broken = err
}
