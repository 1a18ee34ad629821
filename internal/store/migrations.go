package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one change of a store's schema, from a file named
// NNNN_what.sql: applied in order of NNNN, recorded with its version and
// name, and never edited once released.
type Migration struct {
	Version int
	Name    string // the file's name without .sql
	SQL     string
}

// LoadMigrations reads the migrations/*.sql files of fsys, ordered by
// version.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and an underscore", base)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s have the same version", other, base)
		}
		seen[version] = base
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: version, Name: strings.TrimSuffix(base, ".sql"), SQL: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// CheckRecorded refuses a database that records a schema version (one
// of recorded) that ms does not have: a newer den wrote it, and an older
// one must not guess at its schema.
func CheckRecorded(recorded []int, ms []Migration) error {
	known := map[int]bool{}
	latest := 0
	for _, m := range ms {
		known[m.Version] = true
		latest = max(latest, m.Version)
	}
	for _, v := range recorded {
		if !known[v] {
			return fmt.Errorf("the database records schema version %d, which this den does not know (it knows up to %d): "+
				"a newer den wrote it; upgrade den, or restore a backup made by this version", v, latest)
		}
	}
	return nil
}
