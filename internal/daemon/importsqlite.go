package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/store"
	"github.com/den-dev/den/internal/store/sqlite"
)

// ImportSQLite copies every record of the SQLite store cfg.ImportSQLite
// names into the PostgreSQL store of cfg.Store, once (see
// postgres.Store.Import), and returns a report of what it copied for the
// operator. The dend that used the SQLite store must be stopped first,
// and no dend may run on the database meanwhile.
func ImportSQLite(ctx context.Context, cfg Config, log *slog.Logger) (string, error) {
	if err := cfg.validateStore(); err != nil {
		return "", err
	}
	if cfg.Store == "" || cfg.ImportSQLite == "" {
		return "", errdefs.Invalid("an import needs a PostgreSQL store and a SQLite store to copy")
	}
	if c, err := net.DialTimeout("unix", cfg.Socket, time.Second); err == nil {
		c.Close()
		return "", errdefs.WithHint(errdefs.Conflict("a dend is serving %s: its store would change under the import", cfg.Socket),
			"stop that dend first (its sandboxes keep running), then import")
	}
	recs, err := sqlite.Export(ctx, cfg.ImportSQLite, log)
	if err != nil {
		return "", fmt.Errorf("reading the SQLite store: %w", err)
	}
	pg, claim, err := openPostgres(ctx, cfg, log)
	if err != nil {
		return "", err
	}
	defer pg.Close()
	defer claim.Release()
	imp, err := pg.Import(ctx, recs, cfg.ImportSQLite, cfg.Node)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`imported the SQLite store %s into %s at %s:
  %s
The SQLite file is left as it was; dend no longer reads it once started with this store.
From now on start dend with the same store (DEN_STORE or --store-file) and the same --data-dir:
the storage pool, checkpoints, run output and den-init versions stay in the data directory, and
the secrets key (%s) must go with the records to every dend that uses this database.
`, cfg.ImportSQLite, RedactDSN(cfg.Store), imp.ImportedAt.Format(time.RFC3339), store.Summary(imp.Counts), cfg.SecretsKeyFile()), nil
}
