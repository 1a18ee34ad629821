package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

// PutImage records im as the newest version of its name: the record of
// another version moves to image_versions, one of the same version is
// replaced. CreatedAt is set to now when zero, Version to 1.
func (s *Store) PutImage(ctx context.Context, im *sandbox.Image) error {
	rec, err := store.NewImage(im, now())
	if err != nil {
		return err
	}
	values, err := store.ImageValues(rec)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO image_versions (`+store.ImageCols+`)
			SELECT `+store.ImageCols+` FROM images WHERE name = ? AND version <> ?`, rec.Name, rec.Version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM image_versions WHERE name = ? AND version = ?`, rec.Name, rec.Version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO images (`+store.ImageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET
				source = excluded.source, ref = excluded.ref, digest = excluded.digest,
				size_bytes = excluded.size_bytes, env = excluded.env, cwd = excluded.cwd,
				"user" = excluded."user", created_at = excluded.created_at,
				location = excluded.location, blobs = excluded.blobs, version = excluded.version`, values...)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording image %q: %w", rec.Name, err)
	}
	*im = *rec
	return nil
}

// GetImage returns the image with name.
func (s *Store) GetImage(ctx context.Context, name string) (*sandbox.Image, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.ImageCols+` FROM images WHERE name = ?`, name)
	im, err := store.ScanImage(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ImageNotFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading image %q: %w", name, err)
	}
	return im, nil
}

// ListImages returns every image, by name.
func (s *Store) ListImages(ctx context.Context) ([]*sandbox.Image, error) {
	return queryAll(ctx, s.r, store.ScanImage, "listing images", `SELECT `+store.ImageCols+` FROM images ORDER BY name`)
}

// DeleteImage removes every version of image name.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := execOne(ctx, tx, store.ImageNotFound(name), `DELETE FROM images WHERE name = ?`, name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM image_versions WHERE name = ?`, name)
		return err
	})
	return wrap(err, "deleting image %q", name)
}

// GetImageVersion returns version of image name, the newest or an older
// one.
func (s *Store) GetImageVersion(ctx context.Context, name string, version int) (*sandbox.Image, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+store.ImageCols+` FROM images WHERE name = ? AND version = ?
		UNION ALL SELECT `+store.ImageCols+` FROM image_versions WHERE name = ? AND version = ?`, name, version, name, version)
	im, err := store.ScanImage(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ImageVersionNotFound(name, version)
	}
	if err != nil {
		return nil, fmt.Errorf("reading image %q version %d: %w", name, version, err)
	}
	return im, nil
}

// ListImageVersions returns the older versions of image name, or of
// every image when name is "", by name then version.
func (s *Store) ListImageVersions(ctx context.Context, name string) ([]*sandbox.Image, error) {
	return queryAll(ctx, s.r, store.ScanImage, "listing image versions",
		`SELECT `+store.ImageCols+` FROM image_versions WHERE ? = '' OR name = ? ORDER BY name, version`, name, name)
}

// DeleteImageVersion removes an older version's record.
func (s *Store) DeleteImageVersion(ctx context.Context, name string, version int) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.ImageVersionNotFound(name, version),
			`DELETE FROM image_versions WHERE name = ? AND version = ?`, name, version)
	})
	return wrap(err, "deleting image %q version %d", name, version)
}

// SetImageLocation records where an image's root filesystem is, leaving
// the rest of its record as it is.
func (s *Store) SetImageLocation(ctx context.Context, name, location string, b sandbox.Blobs) error {
	if err := store.ValidLocation(location); err != nil {
		return err
	}
	blobs, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding blobs of image %q: %w", name, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.ImageNotFound(name),
			`UPDATE images SET location = ?, blobs = ? WHERE name = ?`, location, string(blobs), name)
	})
	return wrap(err, "recording where image %q is", name)
}
