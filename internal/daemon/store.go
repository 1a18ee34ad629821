package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/postgres"
	"github.com/den-dev/den/internal/store/sqlite"
)

// records is what dend keeps in its store. Both stores keep all of it.
type records interface {
	sandbox.Store
	quota.OwnerStore
	auth.Store
	auth.KeyStore
	audit.Log
	secret.Store
	idempotency.Store
	idempotency.Pruner
	Close() error
}

var (
	_ records = (*sqlite.Store)(nil)
	_ records = (*postgres.Store)(nil)
)

// openStore opens the store cfg names: SQLite in the data directory, or
// the PostgreSQL database of cfg.Store, with this dend's node name
// claimed (see postgres.Claim; nil on SQLite). close closes the store and
// lets the claim go.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (st records, fleet fleetStore, claim *postgres.Claim, close func(), err error) {
	if cfg.Store == "" {
		st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "den.db"), log)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("opening the store: %w", err)
		}
		return st, nil, nil, func() { st.Close() }, nil
	}
	pg, claim, err := openPostgres(ctx, cfg, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return pg, pg, claim, func() { claim.Release(); pg.Close() }, nil
}

// openPostgres opens the PostgreSQL store and claims this dend's node
// name in it. The claim rides out a cut in its connection (a database
// restart) no longer than the node's lease.
func openPostgres(ctx context.Context, cfg Config, log *slog.Logger) (*postgres.Store, *postgres.Claim, error) {
	pg, err := postgres.Open(ctx, cfg.Store, log)
	if err != nil {
		return nil, nil, err
	}
	lease := cfg.NodeLease
	if lease == 0 {
		lease = cluster.DefaultLease
	}
	claim, err := pg.Claim(ctx, cfg.Node, lease)
	if err != nil {
		pg.Close()
		return nil, nil, err
	}
	log.Info("store: PostgreSQL", "database", RedactDSN(cfg.Store))
	return pg, claim, nil
}

// fleetStore is where the nodes of a fleet are recorded: the PostgreSQL
// store. A SQLite store serves one host, and no fleet.
type fleetStore interface {
	cluster.Registry
	ClusterKey(ctx context.Context, fresh []byte) ([]byte, error)
}

var _ fleetStore = (*postgres.Store)(nil)

// validateStore checks that Store is empty (SQLite) or a PostgreSQL DSN.
func (c *Config) validateStore() error {
	if c.Store == "" {
		if c.ImportSQLite != "" {
			return errdefs.WithHint(errdefs.Invalid("config import-sqlite: the import copies into a PostgreSQL store, and none is given"),
				"give the database with DEN_STORE=postgres://... or --store-file")
		}
		return nil
	}
	if !IsPostgresDSN(c.Store) {
		return errdefs.WithHint(errdefs.Invalid("config store: not a PostgreSQL DSN"),
			"give postgres://USER@HOST:PORT/DATABASE, or leave it out for SQLite in the data directory")
	}
	if c.ImportSQLite != "" && !filepath.IsAbs(c.ImportSQLite) {
		return errdefs.Invalid("config import-sqlite: %q is not an absolute path", c.ImportSQLite)
	}
	return nil
}

// IsPostgresDSN reports whether dsn looks like a PostgreSQL DSN: a
// postgres:// or postgresql:// URL, or libpq's key=value form.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || kvDSN.MatchString(dsn)
}

var (
	kvDSN       = regexp.MustCompile(`^\s*[a-z_]+\s*=`)
	kvPassword  = regexp.MustCompile(`(^|\s)password\s*=\s*('(\\.|[^'])*'|\S*)`)
	urlPassword = regexp.MustCompile(`(?i)([?&]password=)[^&]*`)
)

// DSNHasPassword reports whether dsn carries a password of its own.
func DSNHasPassword(dsn string) bool {
	if kvDSN.MatchString(dsn) && !strings.Contains(dsn, "://") {
		return kvPassword.MatchString(dsn)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return strings.Contains(dsn, "@") // unparsable: assume the worst
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}

// RedactDSN returns dsn with any password replaced, for logs and errors.
func RedactDSN(dsn string) string {
	if kvDSN.MatchString(dsn) && !strings.Contains(dsn, "://") {
		return kvPassword.ReplaceAllString(dsn, "${1}password=xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	return urlPassword.ReplaceAllString(u.Redacted(), "${1}xxxxx")
}
