package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/errdefs"
)

// storeFlags adds the flags choosing where dend keeps its records; the
// returned func sets cfg.Store and cfg.ImportSQLite once fs is parsed.
//
// The DSN of a PostgreSQL store comes from --store, --store-file or
// DEN_STORE, in that order. A password is never taken from the command
// line, which every user of the host can read (ps, /proc): a DSN with
// one belongs in DEN_STORE or in a file only root can read. libpq's
// PGPASSWORD and ~/.pgpass work too.
func storeFlags(fs *flag.FlagSet, cfg *daemon.Config) func() error {
	dsn := fs.String("store", "", "where dend keeps its records: sqlite (the default: DATA_DIR/den.db) or a PostgreSQL DSN, postgres://USER@HOST:PORT/DATABASE; "+
		"a DSN with a password goes in DEN_STORE or --store-file, never here")
	file := fs.String("store-file", env("DEN_STORE_FILE", ""), "a file (mode 0600) holding the PostgreSQL DSN of the store, password and all")
	imp := fs.String("import-sqlite", "", "with a PostgreSQL store: copy every record of this SQLite store (e.g. /var/lib/den/den.db) into it once, report, and exit")
	return func() error {
		v, err := storeDSN(*dsn, *file)
		if err != nil {
			return err
		}
		if v == "sqlite" {
			v = ""
		}
		cfg.Store = v
		if *imp != "" {
			if cfg.ImportSQLite, err = filepath.Abs(*imp); err != nil {
				return fmt.Errorf("--import-sqlite: %w", err)
			}
		}
		return nil
	}
}

// storeDSN picks the store's DSN from the flag, the file or DEN_STORE.
func storeDSN(flagValue, file string) (string, error) {
	switch {
	case flagValue != "" && file != "":
		return "", errdefs.Invalid("--store and --store-file both name the store: give one")
	case flagValue != "":
		if daemon.DSNHasPassword(flagValue) {
			return "", errdefs.WithHint(errdefs.Invalid("--store: the DSN holds a password, which every user of this host could read on dend's command line"),
				"put the DSN in the environment (DEN_STORE=postgres://...) or in a file only root reads (--store-file PATH), or the password in PGPASSWORD or ~/.pgpass")
		}
		return flagValue, nil
	case file != "":
		return readStoreFile(file)
	}
	return strings.TrimSpace(os.Getenv("DEN_STORE")), nil
}

// readStoreFile reads a DSN from file, warning when others can read it.
func readStoreFile(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--store-file: %w", err)
	}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 && daemon.DSNHasPassword(string(b)) {
		fmt.Fprintf(os.Stderr, "dend: warning: %s holds a password and is readable by others (mode %s); chmod 600 it\n", file, fi.Mode().Perm())
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", errdefs.Invalid("--store-file: %s is empty", file)
	}
	return v, nil
}
