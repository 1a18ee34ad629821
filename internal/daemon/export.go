package daemon

import (
	"log/slog"

	"github.com/den-dev/den/internal/export"
	"github.com/den-dev/den/internal/httpapi"
	"github.com/den-dev/den/internal/offsite"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
)

var (
	_ export.Sandboxes      = (*sandbox.Service)(nil)
	_ export.Mover          = (*offsite.Offsite)(nil)
	_ httpapi.ExportService = (*export.Service)(nil)
)

// exporter writes and reads agents' archives with the pool's streams,
// as offsite sends them for the fleet; nil (the routes answer 503) when
// the pool cannot send volumes.
func exporter(svc *sandbox.Service, pool storage.Driver, log *slog.Logger) httpapi.ExportService {
	mover, ok := pool.(offsite.Pool)
	if !ok {
		return nil
	}
	return export.New(export.Config{Sandboxes: svc, Mover: offsite.New(nil, mover, log), Logger: log.With("component", "export")})
}
