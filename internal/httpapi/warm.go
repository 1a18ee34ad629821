package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/warm"
)

// WarmService keeps this node's warm pools. *warming.Service implements
// it.
type WarmService interface {
	SetWarm(ctx context.Context, image string, count int, memoryBytes int64) (warm.Pool, error)
	WarmPools(ctx context.Context) []warm.Pool
}

// setWarm sets how many instances of an image this node keeps warm.
func (s *server) setWarm(w http.ResponseWriter, r *http.Request) error {
	if s.warm == nil {
		return httpx.NotEnabled("warm pools")
	}
	var req api.SetWarmRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p, err := s.warm.SetWarm(r.Context(), r.PathValue("image"), req.Count, req.MemoryBytes)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toWarmPool(p))
}

// warmPools are this node's pools by image, for the image list.
func (s *server) warmPools(ctx context.Context) map[string]*api.WarmPool {
	if s.warm == nil {
		return nil
	}
	out := map[string]*api.WarmPool{}
	for _, p := range s.warm.WarmPools(ctx) {
		out[p.Image] = toWarmPool(p)
	}
	return out
}

func toWarmPool(p warm.Pool) *api.WarmPool {
	return &api.WarmPool{
		Target: p.Count, MemoryBytes: p.MemoryBytes, Ready: p.Ready, Booting: p.Booting,
		HostMemoryBytes: p.HostMemoryBytes, Held: p.Held,
	}
}
