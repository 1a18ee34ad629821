package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
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
// A store that does not answer at all does not: a node restarted during
// its outage serves everything else meanwhile (see watchBucket).
func openBucket(ctx context.Context, b Blobs, log *slog.Logger) (*s3.Bucket, error) {
	if b.URL == "" {
		return nil, nil
	}
	loc, err := s3.ParseURL(b.URL)
	if err != nil {
		return nil, err
	}
	bucket, err := s3.Dial(loc, s3.Credentials{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey}, log)
	if err != nil {
		return nil, fmt.Errorf("opening the blob store: %w", err)
	}
	err = bucket.Probe(ctx)
	switch {
	case errors.Is(err, s3.ErrUnreachable):
		log.Warn("starting without the blob store: it cannot be reached; uploads wait and retry, and verbs that need it answer 503 until it answers",
			"url", loc.String(), "err", err)
	case err != nil:
		return nil, fmt.Errorf("opening the blob store: %w", err)
	default:
		log.Info("blob store open", "url", loc.String())
	}
	return bucket, nil
}

// bucketProbeInterval is how often a blob store that stopped answering
// is asked again.
const bucketProbeInterval = 5 * time.Second

// watchBucket asks a blob store that stopped answering again every
// bucketProbeInterval until ctx ends, and calls back when it answers:
// uploads waiting for it then go at once.
func watchBucket(ctx context.Context, bucket *s3.Bucket, back func(), log *slog.Logger) {
	t := time.NewTicker(bucketProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		down, since := bucket.Reachable()
		if down == nil {
			continue
		}
		if err := bucket.Probe(ctx); err != nil {
			if !errors.Is(err, s3.ErrUnreachable) && ctx.Err() == nil {
				log.Error("the blob store answers, but dend cannot use it", "err", err)
			}
			continue
		}
		log.Info("the blob store answers again", "url", bucket.Location().String(), "down_for", time.Since(since).Round(time.Second))
		back()
	}
}

// blobsHealth is what health says of the blob store; nil without one.
func blobsHealth(bucket *s3.Bucket) *api.BlobsHealth {
	if bucket == nil {
		return nil
	}
	down, since := bucket.Reachable()
	if down == nil {
		return &api.BlobsHealth{Reachable: true}
	}
	return &api.BlobsHealth{Reachable: false, Error: down.Error(), Since: &since}
}

// The fleet keeps checkpoints in the blob store through offsite.
var _ fleet.Offsite = (*offsite.Offsite)(nil)

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
