package fleetapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// Blobs collects the blob store: *sandbox.Service implements it.
type Blobs interface {
	CollectBlobs(ctx context.Context) (sandbox.BlobCollection, error)
}

// CollectBlobs runs a collection of the blob store now (admins only: the
// route is in no area a token of another scope reaches).
func (s *Handlers) CollectBlobs(w http.ResponseWriter, r *http.Request) error {
	if s.blobs == nil {
		return httpx.NotEnabled("blob stores")
	}
	st, err := s.blobs.CollectBlobs(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.BlobCollection(st))
}
