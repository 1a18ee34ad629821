// Package offsite moves checkpoints' bytes between the storage pool and
// the blob store: a volume as the pool's send stream (btrfs send, or a tar
// for the copy driver), a memory image as a tar of its files, each kept as
// content-addressed chunks by internal/blob. It implements fleet.Offsite;
// what to send and when is internal/fleet's business.
package offsite

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
)

// Pool is the part of the storage pool offsite uses.
type Pool interface {
	storage.Mover
	Remove(ctx context.Context, key string) error
}

// Offsite is a blob store and a pool, joined.
type Offsite struct {
	blobs *blob.Store
	pool  Pool
	log   *slog.Logger
}

// New joins blobs and pool.
func New(blobs *blob.Store, pool Pool, log *slog.Logger) *Offsite {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Offsite{blobs: blobs, pool: pool, log: log}
}

// Format is the pool's stream format.
func (o *Offsite) Format() string { return o.pool.StreamFormat() }

// PushVolume sends read-only volume key, as a diff from base when set. A
// whole volume (an image) is cut fine, so that another version of it
// reuses what did not change; a diff, which nothing else shares, coarse.
func (o *Offsite) PushVolume(ctx context.Context, key, base string) (string, bool, sandbox.BlobStats, error) {
	var diff bool
	cut := blob.CutFine
	if base != "" {
		cut = blob.CutCoarse
	}
	id, st, err := o.push(ctx, cut, func(w io.Writer) error {
		var err error
		diff, err = o.pool.Send(ctx, key, base, w)
		return err
	})
	if err != nil {
		return "", false, st, fmt.Errorf("uploading volume %s: %w", key, err)
	}
	return id, diff, st, nil
}

// PushDir sends the regular files of dir as a tar, in name order.
func (o *Offsite) PushDir(ctx context.Context, dir string) (string, sandbox.BlobStats, error) {
	id, st, err := o.push(ctx, blob.CutCoarse, func(w io.Writer) error { return writeTar(dir, w) })
	if err != nil {
		return "", st, fmt.Errorf("uploading a memory image: %w", err)
	}
	return id, st, nil
}

// push streams what send writes into the blob store.
func (o *Offsite) push(ctx context.Context, cut blob.Cut, send func(io.Writer) error) (string, sandbox.BlobStats, error) {
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := send(pw)
		pw.CloseWithError(err)
		sent <- err
	}()
	id, st, err := o.blobs.Put(ctx, pr, cut)
	// A failed Put stops reading: the sender's writes fail and it ends.
	pr.CloseWithError(cmpErr(err, io.ErrClosedPipe))
	serr := <-sent
	stats := sandbox.BlobStats{StreamBytes: st.Bytes, SentBytes: st.SentBytes}
	if serr != nil && !errors.Is(serr, io.ErrClosedPipe) {
		return "", stats, serr
	}
	if err != nil {
		return "", stats, err
	}
	return id, stats, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// PullVolume makes read-only volume key from the stream manifest names.
// The pool may take a stream cut short for a whole one, so the volume is
// kept only once the blob store has checked every byte of it.
func (o *Offsite) PullVolume(ctx context.Context, key, manifest string) error {
	err := o.pull(ctx, manifest, func(r io.Reader) error { return o.pool.Receive(ctx, key, r) },
		func() {
			if err := o.pool.Remove(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				o.log.Error("removing a volume received from a damaged stream", "volume", key, "err", err)
			}
		})
	if err != nil {
		return fmt.Errorf("downloading volume %s: %w", key, err)
	}
	return nil
}

// PullDir makes dir from a tar of regular files, in a directory beside it
// that is renamed into place once whole.
func (o *Offsite) PullDir(ctx context.Context, dir, manifest string) error {
	err := intoDir(dir, func(tmp string) error {
		return o.pull(ctx, manifest, func(r io.Reader) error { return readTar(r, tmp) }, func() {})
	})
	if err != nil {
		return fmt.Errorf("downloading a memory image: %w", err)
	}
	return nil
}

// SendDir writes the regular files of dir to w as a tar, as PushDir
// sends them.
func (o *Offsite) SendDir(dir string, w io.Writer) error { return writeTar(dir, w) }

// ReceiveDir makes dir, which must not exist, from a tar SendDir wrote:
// whole, or not at all.
func (o *Offsite) ReceiveDir(dir string, r io.Reader) error {
	if err := intoDir(dir, func(tmp string) error { return readTar(r, tmp) }); err != nil {
		return fmt.Errorf("receiving a memory image: %w", err)
	}
	return nil
}

// SendVolume writes read-only volume key to w as PushVolume sends it: a
// diff from base when set and the pool can.
func (o *Offsite) SendVolume(ctx context.Context, key, base string, w io.Writer) error {
	_, err := o.pool.Send(ctx, key, base, w)
	return err
}

// ReceiveVolume makes read-only volume key from what SendVolume wrote. A
// pool may take a stream cut short for a whole one, so the volume is
// kept only when whole, asked once r is read to its end, says the stream
// came whole.
func (o *Offsite) ReceiveVolume(ctx context.Context, key string, r io.Reader, whole func() error) error {
	if err := o.pool.Receive(ctx, key, r); err != nil {
		return fmt.Errorf("receiving volume %s: %w", key, err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return o.undoReceive(ctx, key, err)
	}
	if err := whole(); err != nil {
		return o.undoReceive(ctx, key, err)
	}
	return nil
}

func (o *Offsite) undoReceive(ctx context.Context, key string, cause error) error {
	if err := o.pool.Remove(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		o.log.Error("removing a volume received from a stream not whole", "volume", key, "err", err)
	}
	return fmt.Errorf("receiving volume %s: %w", key, cause)
}

// intoDir fills a directory beside dir and renames it into place once
// fill is done.
func intoDir(dir string, fill func(tmp string) error) error {
	tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".pull")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// pull streams manifest's bytes to receive. When the blob store finds a
// damaged object, undo runs and its error is the one returned: it says
// what is wrong better than the receiver's complaint about a cut stream.
func (o *Offsite) pull(ctx context.Context, manifest string, receive func(io.Reader) error, undo func()) error {
	pr, pw := io.Pipe()
	got := make(chan error, 1)
	go func() {
		_, err := o.blobs.Get(ctx, manifest, pw)
		pw.CloseWithError(err)
		got <- err
	}()
	rerr := receive(pr)
	pr.CloseWithError(cmpErr(rerr, io.ErrClosedPipe))
	gerr := <-got
	if gerr != nil && !errors.Is(gerr, io.ErrClosedPipe) {
		if rerr == nil {
			undo()
		}
		return gerr
	}
	return rerr
}

// Collect runs the blob store's collector.
func (o *Offsite) Collect(ctx context.Context, keep []string) (sandbox.BlobCollection, error) {
	st, err := o.blobs.Collect(ctx, keep)
	return sandbox.BlobCollection{Manifests: st.Manifests, ManifestsRemoved: st.ManifestsRemoved,
		MissingManifests: st.MissingManifests, Chunks: st.Chunks, ChunksRemoved: st.ChunksRemoved,
		BytesRemoved: st.BytesRemoved}, err
}

// writeTar writes the regular files of dir (a memory image: flat) to w.
func writeTar(dir string, w io.Writer) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	tw := tar.NewWriter(w)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := addFile(tw, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fi.Name(), Size: fi.Size(), Mode: int64(fi.Mode().Perm()),
		ModTime: fi.ModTime().UTC().Truncate(time.Second), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("reading %s: %w", fi.Name(), err)
	}
	return nil
}

// readTar writes the regular files of a tar from writeTar into dir, and
// syncs them.
func readTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Name != filepath.Base(hdr.Name) || strings.HasPrefix(hdr.Name, ".") {
			return fmt.Errorf("unexpected entry %q in a memory image", hdr.Name)
		}
		if err := writeFile(filepath.Join(dir, hdr.Name), tr, os.FileMode(hdr.Mode).Perm()); err != nil {
			return err
		}
	}
	// Whatever follows the tar's end is read too, so the stream is
	// checked to its last byte.
	_, err := io.Copy(io.Discard, r)
	return err
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
