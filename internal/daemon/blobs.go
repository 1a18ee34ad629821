package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/offsite"
	"github.com/den-dev/den/internal/storage"
)

// Blobs is where dend keeps checkpoints' bytes away from its host (issue
// 11); off unless URL is set.
type Blobs struct {
	// URL is s3://BUCKET/PREFIX?endpoint=HOST:PORT[&insecure=1][&region=R].
	URL string
	// AccessKeyID and SecretAccessKey sign its requests: from the
	// environment or a file, never from the command line.
	AccessKeyID     string
	SecretAccessKey string
	// Grace is how old an object nothing names must be before the
	// collector removes it: twice as long as any upload takes.
	Grace time.Duration
	// GCInterval is how often the blob store is collected; 0: only on
	// request (`den admin gc-blobs`).
	GCInterval time.Duration
	// Parallel is how many chunks one transfer sends or fetches at once.
	Parallel int
}

// Default blob store settings.
const (
	DefaultBlobsGrace      = time.Hour
	DefaultBlobsGCInterval = 6 * time.Hour
	DefaultBlobsParallel   = 8
	// blobsRetry is how often checkpoints whose upload failed are tried
	// again.
	blobsRetry = time.Minute
)

func (b *Blobs) validate() error {
	if b.URL == "" {
		return nil
	}
	if _, err := s3.ParseURL(b.URL); err != nil {
		return err
	}
	switch {
	case b.Grace <= 0:
		return errdefs.Invalid("config --blobs-gc-grace: must be above 0, and longer than any upload takes")
	case b.GCInterval < 0:
		return errdefs.Invalid("config --blobs-gc-interval: must not be negative")
	case b.Parallel <= 0:
		return errdefs.Invalid("config --blobs-parallel: must be above 0")
	}
	return nil
}

// openBucket connects to the blob store and checks that dend may use it,
// so that a wrong URL or key stops dend at start; nil when there is none.
func openBucket(ctx context.Context, b Blobs, log *slog.Logger) (*s3.Bucket, error) {
	if b.URL == "" {
		return nil, nil
	}
	loc, err := s3.ParseURL(b.URL)
	if err != nil {
		return nil, err
	}
	bucket, err := s3.Open(ctx, loc, s3.Credentials{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey}, log)
	if err != nil {
		return nil, fmt.Errorf("opening the blob store: %w", err)
	}
	log.Info("blob store open", "url", loc.String())
	return bucket, nil
}

// newOffsite joins the bucket and the pool; nil without a bucket.
func newOffsite(bucket *s3.Bucket, b Blobs, pool storage.Driver, log *slog.Logger) (*offsite.Offsite, error) {
	if bucket == nil {
		return nil, nil
	}
	mover, ok := pool.(offsite.Pool)
	if !ok {
		return nil, errdefs.Unavailable("the %s storage pool cannot send volumes to a blob store", pool.Name())
	}
	store, err := blob.New(blob.Config{Objects: bucket, Logger: log, Parallel: b.Parallel, Grace: b.Grace})
	if err != nil {
		return nil, err
	}
	return offsite.New(store, mover, log), nil
}
