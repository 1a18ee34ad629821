package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store"
)

// PutImage inserts an image record or replaces the one with its name, in
// one statement. CreatedAt is set to now when zero.
func (s *Store) PutImage(ctx context.Context, im *sandbox.Image) error {
	rec, err := store.NewImage(im, now())
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error { return putImageRow(ctx, tx, rec) })
	if err != nil {
		return s.fail(err, "recording image %q", rec.Name)
	}
	*im = *rec
	return nil
}

func putImageRow(ctx context.Context, tx pgx.Tx, im *sandbox.Image) error {
	values, err := store.ImageValues(im)
	if err != nil {
		return err
	}
	// Another version of the name becomes an older one; a record of this
	// same version is replaced.
	if _, err := tx.Exec(ctx, `DELETE FROM image_versions WHERE name = $1 AND version IN
		(SELECT version FROM images WHERE name = $1 AND version <> $2)`, im.Name, im.Version); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO image_versions (`+store.ImageCols+`)
		SELECT `+store.ImageCols+` FROM images WHERE name = $1 AND version <> $2`, im.Name, im.Version); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM image_versions WHERE name = $1 AND version = $2`, im.Name, im.Version); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO images (`+store.ImageCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (name) DO UPDATE SET
			source = excluded.source, ref = excluded.ref, digest = excluded.digest,
			size_bytes = excluded.size_bytes, env = excluded.env, cwd = excluded.cwd,
			"user" = excluded."user", created_at = excluded.created_at,
			location = excluded.location, blobs = excluded.blobs, version = excluded.version`, values...)
	return err
}

// GetImage returns the image with name.
func (s *Store) GetImage(ctx context.Context, name string) (*sandbox.Image, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.ImageCols+` FROM images WHERE name = $1`, name)
	im, err := store.ScanImage(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ImageNotFound(name)
	}
	if err != nil {
		return nil, s.fail(err, "reading image %q", name)
	}
	return im, nil
}

// ListImages returns every image, by name.
func (s *Store) ListImages(ctx context.Context) ([]*sandbox.Image, error) {
	return queryAll(ctx, s, store.ScanImage, "listing images", `SELECT `+store.ImageCols+` FROM images ORDER BY name COLLATE "C"`)
}

// DeleteImage removes every version of image name.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := execOne(ctx, tx, store.ImageNotFound(name), `DELETE FROM images WHERE name = $1`, name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM image_versions WHERE name = $1`, name)
		return err
	})
	return s.fail(err, "deleting image %q", name)
}

// GetImageVersion returns version of image name, the newest or an older
// one.
func (s *Store) GetImageVersion(ctx context.Context, name string, version int) (*sandbox.Image, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+store.ImageCols+` FROM images WHERE name = $1 AND version = $2
		UNION ALL SELECT `+store.ImageCols+` FROM image_versions WHERE name = $1 AND version = $2`, name, version)
	im, err := store.ScanImage(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ImageVersionNotFound(name, version)
	}
	if err != nil {
		return nil, s.fail(err, "reading image %q version %d", name, version)
	}
	return im, nil
}

// ListImageVersions returns the older versions of image name, or of
// every image when name is "", by name then version.
func (s *Store) ListImageVersions(ctx context.Context, name string) ([]*sandbox.Image, error) {
	return queryAll(ctx, s, store.ScanImage, "listing image versions",
		`SELECT `+store.ImageCols+` FROM image_versions WHERE $1 = '' OR name = $1 ORDER BY name COLLATE "C", version`, name)
}

// DeleteImageVersion removes an older version's record.
func (s *Store) DeleteImageVersion(ctx context.Context, name string, version int) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.ImageVersionNotFound(name, version),
			`DELETE FROM image_versions WHERE name = $1 AND version = $2`, name, version)
	})
	return s.fail(err, "deleting image %q version %d", name, version)
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
	err = s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.ImageNotFound(name),
			`UPDATE images SET location = $1, blobs = $2 WHERE name = $3`, location, string(blobs), name)
	})
	return s.fail(err, "recording where image %q is", name)
}
