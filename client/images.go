package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// ListImages returns the images sandboxes can be created from.
func (c *Client) ListImages(ctx context.Context) ([]api.Image, error) {
	var l api.ImageList
	if err := c.do(ctx, http.MethodGet, "/images", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Images, nil
}

// GetImage returns one image.
func (c *Client) GetImage(ctx context.Context, name string) (*api.Image, error) {
	var img api.Image
	if err := c.do(ctx, http.MethodGet, "/images/"+url.PathEscape(name), nil, nil, &img); err != nil {
		return nil, err
	}
	return &img, nil
}

// RemoveImage deletes an image.
func (c *Client) RemoveImage(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/images/"+url.PathEscape(name), nil, nil, nil)
}

// SetWarm sets how many instances of an image the node that answers
// keeps booted ahead of demand, for sandboxes of req.MemoryBytes (0: the
// default size); a create that fits claims one instead of booting.
// Count 0 empties the pool. It returns the pool as set.
func (c *Client) SetWarm(ctx context.Context, image string, req api.SetWarmRequest) (*api.WarmPool, error) {
	var p api.WarmPool
	if err := c.do(ctx, http.MethodPut, "/images/"+url.PathEscape(image)+"/warm", nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// BuildImage builds one of the built-in images ("debian", "busybox").
// progress, when not nil, is called with every progress line dend sends,
// the last one included. The result is the image, or the error dend
// reported in the stream as an *Error.
func (c *Client) BuildImage(ctx context.Context, req api.BuildImageRequest, progress func(api.Progress)) (*api.Image, error) {
	return c.imageJobJSON(ctx, "/images/build", req, progress)
}

// ImportImage imports a tar stream (a docker save archive or an OCI
// layout) as image name, streaming r as it is read.
func (c *Client) ImportImage(ctx context.Context, name string, r io.Reader, progress func(api.Progress)) (*api.Image, error) {
	return c.imageJob(ctx, "/images/import", url.Values{"name": {name}}, opaque(r), "application/x-tar", progress)
}

// PullImage pulls an image from a registry.
func (c *Client) PullImage(ctx context.Context, req api.PullImageRequest, progress func(api.Progress)) (*api.Image, error) {
	return c.imageJobJSON(ctx, "/images/pull", req, progress)
}

func (c *Client) imageJobJSON(ctx context.Context, path string, in any, progress func(api.Progress)) (*api.Image, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding POST %s: %w", path, err)
	}
	return c.imageJob(ctx, path, nil, bytes.NewReader(b), "application/json", progress)
}

func (c *Client) imageJob(ctx context.Context, path string, q url.Values, body io.Reader, contentType string, progress func(api.Progress)) (*api.Image, error) {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: path, query: q, body: body, contentType: contentType})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	img, err := readProgress(resp.Body, progress)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("POST %s: %w", path, ctx.Err())
	}
	return img, err
}

// readProgress reads an NDJSON stream of api.Progress to its last line.
func readProgress(r io.Reader, progress func(api.Progress)) (*api.Image, error) {
	dec := json.NewDecoder(r)
	for {
		var p api.Progress
		if err := dec.Decode(&p); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, &Error{API: &api.Error{
					Code:    api.CodeUnavailable,
					Message: "the progress stream from dend ended before the job finished",
					Hint:    "check dend's log; the job may have been interrupted by a restart",
				}, err: err}
			}
			return nil, fmt.Errorf("reading the progress stream: %w", err)
		}
		if progress != nil {
			progress(p)
		}
		if !p.Done {
			continue
		}
		if p.Error != nil {
			return nil, fromAPI(p.Error)
		}
		if p.Image == nil {
			return nil, errors.New("the progress stream finished without an image or an error")
		}
		return p.Image, nil
	}
}
