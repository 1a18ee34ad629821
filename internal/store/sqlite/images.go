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

// PutImage inserts an image record or replaces the one with its name.
// CreatedAt is set to now when zero.
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
		_, err := tx.ExecContext(ctx, `INSERT INTO images (`+store.ImageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET
				source = excluded.source, ref = excluded.ref, digest = excluded.digest,
				size_bytes = excluded.size_bytes, env = excluded.env, cwd = excluded.cwd,
				"user" = excluded."user", created_at = excluded.created_at,
				location = excluded.location, blobs = excluded.blobs`, values...)
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

// DeleteImage removes the image record with name.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return execOne(ctx, tx, store.ImageNotFound(name), `DELETE FROM images WHERE name = ?`, name)
	})
	return wrap(err, "deleting image %q", name)
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
