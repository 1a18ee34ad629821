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
		return fmt.Errorf("recording image %q: %w", rec.Name, err)
	}
	*im = *rec
	return nil
}

func putImageRow(ctx context.Context, tx pgx.Tx, im *sandbox.Image) error {
	values, err := store.ImageValues(im)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO images (`+store.ImageCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (name) DO UPDATE SET
			source = excluded.source, ref = excluded.ref, digest = excluded.digest,
			size_bytes = excluded.size_bytes, env = excluded.env, cwd = excluded.cwd,
			"user" = excluded."user", created_at = excluded.created_at,
			location = excluded.location, blobs = excluded.blobs`, values...)
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

// DeleteImage removes the image record with name.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return execOne(ctx, tx, store.ImageNotFound(name), `DELETE FROM images WHERE name = $1`, name)
	})
	return s.fail(err, "deleting image %q", name)
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
