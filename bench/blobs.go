package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
)

// blobsBytes is the size of the stream moved through the blob store.
const blobsBytes = 1 << 30

// blobStore measures the blob store against a MinIO started here on
// loopback: 1 GiB up and down through den's chunker (content-defined
// chunks, SHA-256, zstd, parallel) against minio-go alone moving the same
// bytes as one object, and the bytes a dend with --blobs uploads for a
// second checkpoint after a 1 MiB change.
func (b *bench) blobStore() error {
	srv, err := miniotest.Start(b.ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.CreateBucket(b.ctx, "den"); err != nil {
		return err
	}
	s := section{title: "blob store (MinIO on loopback)"}
	if err := b.blobTransfer(srv, &s); err != nil {
		return err
	}
	if err := b.blobCheckpoints(srv, &s); err != nil {
		return err
	}
	b.add(s)
	return nil
}

// blobTransfer moves the same GiB through den's chunk store and through
// minio-go alone.
func (b *bench) blobTransfer(srv *miniotest.Server, s *section) error {
	file := filepath.Join(b.work, "blob-1g")
	if err := writeStream(file, blobsBytes); err != nil {
		return err
	}
	defer os.Remove(file)
	loc, err := s3.ParseURL(srv.URL("den", "bench"))
	if err != nil {
		return err
	}
	bucket, err := s3.Open(b.ctx, loc, s3.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}, nil)
	if err != nil {
		return err
	}
	store, err := blob.New(blob.Config{Objects: bucket})
	if err != nil {
		return err
	}
	var id string
	var put blob.PutStats
	denUp, err := timed(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		id, put, err = store.Put(b.ctx, bufio.NewReaderSize(f, 1<<20), blob.CutFine)
		return err
	})
	if err != nil {
		return fmt.Errorf("den up: %w", err)
	}
	denDown, err := timed(func() error { _, err := store.Get(b.ctx, id, io.Discard); return err })
	if err != nil {
		return fmt.Errorf("den down: %w", err)
	}
	var again blob.PutStats
	denAgain, err := timed(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, again, err = store.Put(b.ctx, bufio.NewReaderSize(f, 1<<20), blob.CutFine)
		return err
	})
	if err != nil {
		return fmt.Errorf("den up again: %w", err)
	}

	mc, err := srv.Client()
	if err != nil {
		return err
	}
	rawUp, err := timed(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = mc.PutObject(b.ctx, "den", "raw/blob-1g", f, blobsBytes, minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("minio-go up: %w", err)
	}
	rawDown, err := timed(func() error {
		o, err := mc.GetObject(b.ctx, "den", "raw/blob-1g", minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		_, err = io.Copy(io.Discard, o)
		return err
	})
	if err != nil {
		return fmt.Errorf("minio-go down: %w", err)
	}
	s.rows = append(s.rows,
		row{op: "1 GiB up", den: samples{denUp}, raw: samples{rawUp}, note: joinNotes(fmt.Sprintf("%.2f× minio-go", float64(denUp)/float64(rawUp)),
			fmt.Sprintf("%d chunks, %s sent", put.Chunks, mib(put.SentBytes)))},
		row{op: "1 GiB down", den: samples{denDown}, raw: samples{rawDown}, note: fmt.Sprintf("%.2f× minio-go, every chunk checked", float64(denDown)/float64(rawDown))},
		row{op: "1 GiB up + down", den: samples{denUp + denDown}, raw: samples{rawUp + rawDown}, goal: "≤ 1.5× minio-go",
			note: fmt.Sprintf("%.2f× minio-go", float64(denUp+denDown)/float64(rawUp+rawDown))},
		row{op: "the same GiB up again", den: samples{denAgain}, note: fmt.Sprintf("%s sent: every chunk was there", mib(again.SentBytes))},
	)
	s.lines = append(s.lines, "raw: minio-go alone, the same bytes as one object (multipart); den: the stream cut into 1-8 MiB content-defined chunks, SHA-256 named, zstd, 8 at once, each checked on the way down")
	return nil
}

// writeStream writes n bytes like a memory image's: pages of random bytes
// among runs of zeros, so compression has something to do but not all.
func writeStream(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(11, 13))
	page := make([]byte, 4096)
	zero := make([]byte, 4096)
	for off := int64(0); off < n; off += 4096 {
		if r.IntN(4) == 0 {
			if _, err := w.Write(zero); err != nil {
				f.Close()
				return err
			}
			continue
		}
		for i := 0; i < len(page); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				page[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := w.Write(page); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// blobCheckpoints runs a dend with --blobs and reports what its second
// checkpoint of a sandbox sends after a 1 MiB change.
func (b *bench) blobCheckpoints(srv *miniotest.Server, s *section) error {
	creds := filepath.Join(b.work, "blobs-credentials")
	if err := srv.WriteCredentials(creds); err != nil {
		return err
	}
	d, err := startDendWith(b.bin, filepath.Join(b.work, "blobs"), b.blobsSubnet, nil,
		"--blobs", srv.URL("den", "fleet"), "--blobs-credentials", creds)
	if err != nil {
		return fmt.Errorf("starting a dend with a blob store: %w", err)
	}
	defer d.close()
	ctx := b.ctx
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "blobs", Image: "busybox", Memory: "256M"}); err != nil {
		return err
	}
	if _, err := d.c.ExecDetached(ctx, "blobs", api.ExecRequest{Argv: []string{"sh", "-c", "while true; do sleep 1; done"}}); err != nil {
		return err
	}
	uploaded := func(ck *api.Checkpoint) (*api.Checkpoint, error) {
		var got *api.Checkpoint
		err := poll(5*time.Minute, "checkpoint "+ck.ID+" to be uploaded", func() (bool, error) {
			c, err := d.c.GetCheckpoint(ctx, "blobs", ck.ID)
			got = c
			return err == nil && c.Location == api.LocationUploaded, err
		})
		return got, err
	}
	first, err := d.c.Checkpoint(ctx, "blobs", client.CheckpointOptions{})
	if err != nil {
		return err
	}
	if first, err = uploaded(first); err != nil {
		return err
	}
	change := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(5, 7))
	for i := range change {
		change[i] = byte(r.Uint32())
	}
	if err := d.c.WriteFile(ctx, "blobs", "/root/change", 0o644, bytes.NewReader(change)); err != nil {
		return err
	}
	second, err := d.c.Checkpoint(ctx, "blobs", client.CheckpointOptions{})
	if err != nil {
		return err
	}
	if second, err = uploaded(second); err != nil {
		return err
	}
	s.lines = append(s.lines,
		fmt.Sprintf("first checkpoint of a busybox sandbox (memory %s, files %s): %s uploaded",
			mib(first.MemoryBytes), mib(first.FilesBytes), mib(first.UploadedBytes)),
		fmt.Sprintf("second checkpoint after a 1 MiB change: %s uploaded (goal ≤ 2 MiB + memory image = %s)",
			mib(second.UploadedBytes), mib(2<<20+second.MemoryBytes)))
	return nil
}
