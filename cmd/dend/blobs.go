package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/errdefs"
)

// blobsFlags adds the flags of the blob store; the returned func sets
// cfg.Blobs once fs is parsed.
//
// Its keys never come from the command line, which every user of the host
// can read: --blobs-credentials names a file, else DEN_BLOBS_ACCESS_KEY_ID
// and DEN_BLOBS_SECRET_ACCESS_KEY, else AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY.
func blobsFlags(fs *flag.FlagSet, cfg *daemon.Config, getenv func(string) string) func() error {
	b := &cfg.Blobs
	fs.StringVar(&b.URL, "blobs", getenv("DEN_BLOBS"), "blob store for checkpoints, so they survive this host: s3://BUCKET/PREFIX?endpoint=HOST:PORT[&insecure=1][&region=R] "+
		"(keys from --blobs-credentials, DEN_BLOBS_ACCESS_KEY_ID/DEN_BLOBS_SECRET_ACCESS_KEY or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY); default none")
	file := fs.String("blobs-credentials", getenv("DEN_BLOBS_CREDENTIALS"), "a file (mode 0600) of lines AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... for --blobs")
	fs.DurationVar(&b.Grace, "blobs-gc-grace", b.Grace, "how old an object of the blob store no record names must be before it is collected; twice as long as any upload takes")
	fs.DurationVar(&b.GCInterval, "blobs-gc-interval", b.GCInterval, "how often the blob store is collected (0: only with `den admin gc-blobs`)")
	fs.IntVar(&b.Parallel, "blobs-parallel", b.Parallel, "chunks one upload or download moves at once")
	return func() error {
		if b.URL == "" {
			return nil
		}
		id, secret, err := blobsKeys(*file, getenv)
		if err != nil {
			return err
		}
		b.AccessKeyID, b.SecretAccessKey = id, secret
		return nil
	}
}

// blobsKeys picks the blob store's keys from the file, or the environment.
func blobsKeys(file string, getenv func(string) string) (string, string, error) {
	if file != "" {
		return readBlobsKeys(file)
	}
	if id, secret := getenv("DEN_BLOBS_ACCESS_KEY_ID"), getenv("DEN_BLOBS_SECRET_ACCESS_KEY"); id != "" || secret != "" {
		return id, secret, nil
	}
	return getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), nil
}

// readBlobsKeys reads KEY=VALUE lines (blank lines and # comments
// skipped), warning when others may read the file.
func readBlobsKeys(file string) (string, string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", fmt.Errorf("--blobs-credentials: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(os.Stderr, "dend: warning: %s holds the blob store's secret and is readable by others (mode %s); chmod 600 it\n", file, fi.Mode().Perm())
	}
	var id, secret string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return "", "", errdefs.Invalid("--blobs-credentials: %s line %d is not KEY=VALUE", file, n)
		}
		switch strings.TrimSpace(strings.TrimPrefix(k, "export ")) {
		case "AWS_ACCESS_KEY_ID", "DEN_BLOBS_ACCESS_KEY_ID", "access_key_id":
			id = strings.Trim(strings.TrimSpace(v), `"'`)
		case "AWS_SECRET_ACCESS_KEY", "DEN_BLOBS_SECRET_ACCESS_KEY", "secret_access_key":
			secret = strings.Trim(strings.TrimSpace(v), `"'`)
		default:
			return "", "", errdefs.Invalid("--blobs-credentials: %s line %d sets %q; want AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", file, n, strings.TrimSpace(k))
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("--blobs-credentials: %w", err)
	}
	if id == "" || secret == "" {
		return "", "", errdefs.Invalid("--blobs-credentials: %s must set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", file)
	}
	return id, secret, nil
}
