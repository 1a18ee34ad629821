package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// BlobService collects the blob store: *sandbox.Service implements it.
type BlobService interface {
	CollectBlobs(ctx context.Context) (sandbox.BlobCollection, error)
}

// collectBlobs runs a collection of the blob store now (admins only: the
// route is in no area a token of another scope reaches).
func (s *server) collectBlobs(w http.ResponseWriter, r *http.Request) error {
	if s.blobs == nil {
		return notEnabled("blob stores")
	}
	st, err := s.blobs.CollectBlobs(r.Context())
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.BlobCollection(st))
}
