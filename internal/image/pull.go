package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// Pull makes an image from ref in a registry, anonymously. imageName
// defaults to the last part of the ref's repository ("python" for
// docker.io/library/python:3.12). From a multi-platform index it takes the
// image for den's platform. insecure allows plain HTTP. ErrConflict when
// the name exists.
func (m *Manager) Pull(ctx context.Context, ref, imageName string, insecure bool, progress func(Progress)) (*sandbox.Image, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, errdefs.WithHint(errdefs.Invalid("invalid image reference %q", ref),
			"use a reference like docker.io/library/python:3.12 or registry.example.com/team/app@sha256:...")
	}
	if imageName == "" {
		if imageName = nameFromRef(r); imageName == "" {
			return nil, errdefs.WithHint(errdefs.Invalid("cannot derive an image name from %q", ref), "give the image a name")
		}
	}
	if err := specs.ValidateName("image", imageName); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	unlock, err := m.locks.lock(ctx, imageName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	im, err := m.pull(ctx, r, imageName, progress)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r.Name(), err)
	}
	return im, nil
}

func (m *Manager) pull(ctx context.Context, r name.Reference, imageName string, progress func(Progress)) (*sandbox.Image, error) {
	counter := &downloadCounter{progress: progress}
	classify := registryError
	desc, err := remote.Get(r,
		remote.WithContext(ctx),
		remote.WithUserAgent("den"),
		remote.WithTransport(counter.wrap(remote.DefaultTransport)))
	if err != nil {
		return nil, classify(err)
	}
	img, err := imageOf(desc, r)
	if err != nil {
		return nil, classify(err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, classify(err)
	}
	mf, err := img.Manifest()
	if err != nil {
		return nil, classify(err)
	}
	total := mf.Config.Size
	for _, l := range mf.Layers {
		total += l.Size
	}
	counter.start(total)
	return m.install(ctx, imageName, func(ctx context.Context, root string) (*sandbox.Image, error) {
		im, err := m.applyImage(ctx, img, root, func(Progress) {}, classify)
		if err != nil {
			return nil, err
		}
		im.Source, im.Ref, im.Digest = SourcePulled, r.Name(), digest.String()
		return im, nil
	})
}

// imageOf is the image desc names, or the one for den's platform when it
// names an index.
func imageOf(desc *remote.Descriptor, r name.Reference) (v1.Image, error) {
	if !desc.MediaType.IsIndex() {
		return desc.Image()
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	return pickImage(idx, r.Name())
}

// nameFromRef derives an image name from the last part of ref's
// repository, or "".
func nameFromRef(r name.Reference) string {
	repo := r.Context().RepositoryStr()
	return sanitizeName(repo[strings.LastIndex(repo, "/")+1:])
}

// sanitizeName maps s onto a valid image name: lowercase letters, digits
// and single inner dashes, at most 63 characters.
func sanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(c)
			dash = false
		} else {
			dash = true
		}
		if b.Len() >= 63 {
			break
		}
	}
	return strings.TrimRight(b.String()[:min(b.Len(), 63)], "-")
}

// registryError classifies an error talking to a registry.
func registryError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errdefs.Class(err) != nil {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return errdefs.NotFound("the registry has no such image")
			}
		}
		switch te.StatusCode {
		case http.StatusNotFound:
			return errdefs.NotFound("the registry has no such image")
		case http.StatusUnauthorized, http.StatusForbidden:
			return errdefs.WithHint(errdefs.NotFound("the registry has no such image, or requires a login"),
				"den pulls anonymously: only public images can be pulled")
		}
		return errdefs.Unavailable("the registry failed: %v", err)
	}
	return errdefs.WithHint(errdefs.Unavailable("cannot reach the registry: %v", err),
		"check the registry address; a registry served over plain HTTP needs --insecure")
}

// downloadCounter reports the bytes of blobs read from the registry as
// Progress{Phase: "download"}, against the sizes in the manifest.
type downloadCounter struct {
	progress func(Progress)

	mu          sync.Mutex
	total, n    int64
	lastReport  int64
	reportEvery int64
}

func (c *downloadCounter) start(total int64) {
	c.mu.Lock()
	c.total, c.reportEvery = total, max(total/100, 1<<20)
	c.mu.Unlock()
	c.progress(Progress{Phase: "download", Total: total})
}

func (c *downloadCounter) add(n int) {
	c.mu.Lock()
	if c.total == 0 { // manifests and such, before the blobs
		c.mu.Unlock()
		return
	}
	c.n += int64(n)
	p := Progress{Phase: "download", Current: min(c.n, c.total), Total: c.total}
	report := c.n-c.lastReport >= c.reportEvery || c.n >= c.total
	if report {
		c.lastReport = c.n
	}
	c.mu.Unlock()
	if report {
		c.progress(p)
	}
}

func (c *downloadCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		// Once the manifest is in, what is read is blobs (wherever the
		// registry redirects for them).
		if err == nil && req.Method == http.MethodGet && !strings.Contains(req.URL.Path, "/manifests/") {
			resp.Body = &countingBody{ReadCloser: resp.Body, add: c.add}
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type countingBody struct {
	io.ReadCloser
	add func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.add(n)
	return n, err
}
