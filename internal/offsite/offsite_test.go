package offsite_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/offsite"
	copydriver "github.com/den-dev/den/internal/storage/copy"
)

// rig is a copy-driver pool and a MinIO bucket, joined.
type rig struct {
	srv  *miniotest.Server
	pool *copydriver.Driver
	off  *offsite.Offsite
}

func newRig(t *testing.T) *rig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts MinIO")
	}
	r := &rig{srv: miniotest.ForTest(t)}
	ctx := t.Context()
	if err := r.srv.CreateBucket(ctx, "den"); err != nil {
		t.Fatal(err)
	}
	loc, err := s3.ParseURL(r.srv.URL("den", "p"))
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := s3.Open(ctx, loc, s3.Credentials{AccessKeyID: r.srv.AccessKey, SecretAccessKey: r.srv.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.New(blob.Config{Objects: bucket})
	if err != nil {
		t.Fatal(err)
	}
	r.pool, err = copydriver.Open(filepath.Join(t.TempDir(), "pool"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.off = offsite.New(store, r.pool, nil)
	return r
}

// volume makes a read-only volume holding files.
func (r *rig) volume(t *testing.T, key string, files map[string]string) {
	t.Helper()
	p, err := r.pool.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(p, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.pool.Seal(t.Context(), key); err != nil {
		t.Fatal(err)
	}
}

func TestVolumeRoundTrip(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	big := strings.Repeat("den ", 1<<20)
	r.volume(t, "checkpoints/c1", map[string]string{"a": "1", "big": big})
	id, diff, st, err := r.off.PushVolume(ctx, "checkpoints/c1", "")
	if err != nil || diff {
		t.Fatalf("PushVolume = %s, %v, %v", id, diff, err)
	}
	if st.StreamBytes < int64(len(big)) || st.SentBytes >= st.StreamBytes {
		t.Fatalf("a compressible stream of %d bytes sent %d", st.StreamBytes, st.SentBytes)
	}
	if err := r.pool.Remove(ctx, "checkpoints/c1"); err != nil {
		t.Fatal(err)
	}
	if err := r.off.PullVolume(ctx, "checkpoints/c1", id); err != nil {
		t.Fatal(err)
	}
	info, err := r.pool.Stat(ctx, "checkpoints/c1")
	if err != nil || !info.ReadOnly {
		t.Fatalf("pulled volume: %+v, %v", info, err)
	}
	if b, err := os.ReadFile(filepath.Join(info.Path, "big")); err != nil || string(b) != big {
		t.Fatalf("pulled file: %d bytes, %v", len(b), err)
	}
}

// TestDamagedStreamLeavesNothing damages the end of a stream: whatever the
// pool made of the part it got is removed, and the error names the object.
func TestDamagedStreamLeavesNothing(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.volume(t, "checkpoints/c1", map[string]string{"a": strings.Repeat("x", 3<<20), "b": "tail"})
	id, _, _, err := r.off.PushVolume(ctx, "checkpoints/c1", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pool.Remove(ctx, "checkpoints/c1"); err != nil {
		t.Fatal(err)
	}
	c, err := r.srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for o := range c.ListObjects(ctx, "den", minio.ListObjectsOptions{Prefix: "p/chunks/", Recursive: true}) {
		last = o.Key
	}
	if err := c.RemoveObject(ctx, "den", last, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	err = r.off.PullVolume(ctx, "checkpoints/c1", id)
	var dmg *blob.DamagedError
	if !errors.As(err, &dmg) || !strings.Contains(err.Error(), filepath.Base(last)) {
		t.Fatalf("PullVolume of a damaged stream = %v; want a DamagedError naming %s", err, last)
	}
	if _, err := r.pool.Stat(ctx, "checkpoints/c1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a damaged stream left a volume: %v", err)
	}
}

func TestDirRoundTrip(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	src := t.TempDir()
	files := map[string][]byte{"checkpoint.img": bytes.Repeat([]byte{7}, 5<<20), "pages_meta.img": []byte("meta"), "empty": nil}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	id, _, err := r.off.PushDir(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ck")
	if err := r.off.PullDir(ctx, dst, id); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	// A directory that exists is not overwritten, and nothing is left
	// beside it.
	if err := r.off.PullDir(ctx, dst, id); err == nil {
		t.Fatal("PullDir over an existing directory succeeded")
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	if len(ents) != 1 {
		t.Fatalf("PullDir left %d entries beside the directory", len(ents)-1)
	}
}

// A volume sent straight to another node is kept only when the stream
// came whole: a cut-short one, or one whose sender's check does not
// match, leaves nothing.
func TestSendVolumeStraight(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.volume(t, "checkpoints/c1", map[string]string{"a": strings.Repeat("x", 1<<20), "b": "tail"})
	var stream bytes.Buffer
	if err := r.off.SendVolume(ctx, "checkpoints/c1", "", &stream); err != nil {
		t.Fatal(err)
	}
	whole := func() error { return nil }
	notWhole := func() error { return errors.New("the sender's CRC differs") }
	for _, tc := range []struct {
		name  string
		bytes []byte
		whole func() error
	}{
		{"cut short", stream.Bytes()[:stream.Len()/2], whole},
		{"check fails", stream.Bytes(), notWhole},
	} {
		err := r.off.ReceiveVolume(ctx, "checkpoints/c2", bytes.NewReader(tc.bytes), tc.whole)
		if err == nil {
			t.Errorf("%s: ReceiveVolume succeeded", tc.name)
		}
		if _, err := r.pool.Stat(ctx, "checkpoints/c2"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: left a volume (%v)", tc.name, err)
		}
	}
	if err := r.off.ReceiveVolume(ctx, "checkpoints/c2", bytes.NewReader(stream.Bytes()), whole); err != nil {
		t.Fatal(err)
	}
	info, err := r.pool.Stat(ctx, "checkpoints/c2")
	if err != nil || !info.ReadOnly {
		t.Fatalf("received volume: %+v, %v", info, err)
	}
	if b, err := os.ReadFile(filepath.Join(info.Path, "b")); err != nil || string(b) != "tail" {
		t.Fatalf("received file: %q, %v", b, err)
	}

	// A memory image's directory likewise: whole, or nothing.
	dir := filepath.Join(t.TempDir(), "img")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.img"), bytes.Repeat([]byte{7}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	var tarred bytes.Buffer
	if err := r.off.SendDir(dir, &tarred); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "ck", "mem")
	if err := r.off.ReceiveDir(to, bytes.NewReader(tarred.Bytes()[:tarred.Len()/2])); err == nil {
		t.Error("ReceiveDir of a cut-short stream succeeded")
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("a cut-short stream left %s (%v)", to, err)
	}
	if err := r.off.ReceiveDir(to, bytes.NewReader(tarred.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "pages.img")); err != nil || len(b) != 1<<20 {
		t.Fatalf("received image: %d bytes, %v", len(b), err)
	}
}
