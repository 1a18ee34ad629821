package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/errdefs"
)

// env is a chunk store over a fresh bucket of a MinIO started for the test.
type env struct {
	srv    *miniotest.Server
	bucket *s3.Bucket
	store  *blob.Store
	skew   atomic.Int64 // added to the store's clock
	calls  *counting
}

// counting counts the requests that reuse chunks.
type counting struct {
	blob.Objects
	stats, touches atomic.Int64
}

func (c *counting) Stat(ctx context.Context, key string) (blob.ObjectInfo, error) {
	c.stats.Add(1)
	return c.Objects.Stat(ctx, key)
}

func (c *counting) Touch(ctx context.Context, key string) error {
	c.touches.Add(1)
	return c.Objects.Touch(ctx, key)
}

// newStore is another store over the env's bucket, with nothing known.
func (e *env) newStore(t testing.TB) *blob.Store {
	t.Helper()
	e.calls = &counting{Objects: e.bucket}
	st, err := blob.New(blob.Config{Objects: e.calls, Parallel: 8, Grace: time.Hour,
		Now: func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newEnv(t testing.TB) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts MinIO")
	}
	e := &env{srv: miniotest.ForTest(t)}
	ctx := t.Context()
	if err := e.srv.CreateBucket(ctx, "den"); err != nil {
		t.Fatal(err)
	}
	loc, err := s3.ParseURL(e.srv.URL("den", "test"))
	if err != nil {
		t.Fatal(err)
	}
	e.bucket, err = s3.Open(ctx, loc, s3.Credentials{AccessKeyID: e.srv.AccessKey, SecretAccessKey: e.srv.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.store = e.newStore(t)
	return e
}

// data is n pseudo-random bytes from seed.
func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func (e *env) put(t *testing.T, b []byte) (string, blob.PutStats) {
	t.Helper()
	id, st, err := e.store.Put(t.Context(), bytes.NewReader(b), blob.CutFine)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return id, st
}

func (e *env) get(t *testing.T, id string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	_, err := e.store.Get(t.Context(), id, &buf)
	return buf.Bytes(), err
}

func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	for _, n := range []int{0, 1, 100 << 10, 20 << 20} {
		in := data(uint64(n), n)
		id, st := e.put(t, in)
		if st.Bytes != int64(n) {
			t.Fatalf("Put of %d bytes counted %d", n, st.Bytes)
		}
		out, err := e.get(t, id)
		if err != nil {
			t.Fatalf("Get of %d bytes: %v", n, err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("Get of %d bytes gave %d different bytes", n, len(out))
		}
	}
}

// TestDedup sends two streams that share most of their bytes, shifted: the
// second sends only the chunks around what differs.
func TestDedup(t *testing.T) {
	e := newEnv(t)
	common := data(1, 64<<20)
	a := append(data(2, 3000), common...)
	b := append(append(data(3, 7777), common[:32<<20]...), append(data(4, 1<<20), common[32<<20:]...)...)
	_, sa := e.put(t, a)
	idb, sb := e.put(t, b)
	t.Logf("first: %d bytes, sent %d; second: %d bytes, sent %d in %d of %d chunks, reused %d",
		sa.Bytes, sa.SentBytes, sb.Bytes, sb.SentBytes, sb.NewChunks, sb.Chunks, sb.ReusedBytes)
	// Each change costs the chunks around it: a few, of 1 to 8 MiB.
	if sb.SentBytes > sb.Bytes/4 {
		t.Fatalf("the second stream sent %d of its %d bytes; want only the chunks around its 2 changes", sb.SentBytes, sb.Bytes)
	}
	out, err := e.get(t, idb)
	if err != nil || !bytes.Equal(out, b) {
		t.Fatalf("Get of the second stream: %v (equal %v)", err, bytes.Equal(out, b))
	}
	// The same stream again sends nothing but its manifest.
	_, again := e.put(t, b)
	if again.NewChunks != 0 || again.SentBytes > 64<<10 {
		t.Fatalf("a stream sent twice sent %d chunks, %d bytes the second time", again.NewChunks, again.SentBytes)
	}
}

// TestDamage overwrites and removes stored objects: Get fails naming the
// object, and never returns bytes it did not check.
func TestDamage(t *testing.T) {
	e := newEnv(t)
	in := data(9, 6<<20)
	id, _ := e.put(t, in)
	m, err := e.store.Manifest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	victim := "test/chunks/" + m.Chunks[1].SHA256[:2] + "/" + m.Chunks[1].SHA256
	// Valid zstd of other bytes, then garbage, then nothing.
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	other := enc.EncodeAll(bytes.Repeat([]byte("x"), int(m.Chunks[1].Size)), nil)
	for _, tc := range []struct {
		name   string
		damage func() error
		reason string
	}{
		{"other bytes", func() error {
			_, err := c.PutObject(t.Context(), "den", victim, bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{})
			return err
		}, "corrupt"},
		{"garbage", func() error {
			_, err := c.PutObject(t.Context(), "den", victim, strings.NewReader("garbage"), 7, minio.PutObjectOptions{})
			return err
		}, "corrupt"},
		{"missing", func() error {
			return c.RemoveObject(t.Context(), "den", victim, minio.RemoveObjectOptions{})
		}, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.damage(); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			_, err := e.store.Get(t.Context(), id, &got)
			var dmg *blob.DamagedError
			if !errors.As(err, &dmg) || !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("Get of a damaged stream = %v; want a DamagedError", err)
			}
			if !strings.Contains(err.Error(), m.Chunks[1].SHA256) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not name the chunk and say %q", err, tc.reason)
			}
			if !bytes.Equal(got.Bytes(), in[:got.Len()]) || int64(got.Len()) > m.Chunks[0].Size {
				t.Fatalf("Get wrote %d bytes past the last good chunk", got.Len())
			}
		})
	}
	// A manifest that is not what its name says is refused too.
	if _, err := c.PutObject(t.Context(), "den", "test/manifests/"+id, strings.NewReader("{}"), 2, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.get(t, id); err == nil || !strings.Contains(err.Error(), "manifests/"+id) {
		t.Fatalf("Get with a damaged manifest = %v; want an error naming it", err)
	}
}

// TestCollect keeps what referenced manifests use and removes the rest,
// but only past the grace period.
func TestCollect(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	shared := data(20, 8<<20)
	keep, _ := e.put(t, append(data(21, 4<<20), shared...))
	drop, _ := e.put(t, append(data(22, 4<<20), shared...))
	count := func() (chunks, manifests int) {
		for _, p := range []string{"chunks/", "manifests/"} {
			e.bucket.List(ctx, p, func(blob.ObjectInfo) error {
				if p == "chunks/" {
					chunks++
				} else {
					manifests++
				}
				return nil
			})
		}
		return chunks, manifests
	}
	c0, m0 := count()
	// Within grace: nothing goes.
	st, err := e.store.Collect(ctx, []string{keep})
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksRemoved+st.ManifestsRemoved != 0 {
		t.Fatalf("a collection within grace removed %+v", st)
	}
	// Past grace: drop's manifest and its own chunks go.
	e.skew.Store(int64(2 * time.Hour))
	st, err = e.store.Collect(ctx, []string{keep})
	if err != nil {
		t.Fatal(err)
	}
	c1, m1 := count()
	t.Logf("before: %d chunks, %d manifests; collected %+v; after: %d chunks, %d manifests", c0, m0, st, c1, m1)
	if st.ManifestsRemoved != 1 || m1 != m0-1 || st.ChunksRemoved == 0 || c1 != c0-st.ChunksRemoved {
		t.Fatalf("collection past grace: %+v", st)
	}
	if _, err := e.get(t, keep); err != nil {
		t.Fatalf("the kept stream after a collection: %v", err)
	}
	if _, err := e.get(t, drop); err == nil {
		t.Fatal("the dropped stream is still readable after a collection")
	}
	// A Put that reuses chunks spares them from a collection that comes
	// after it, although nothing refers to them yet: young ones are left
	// as they are (a store that knows them asks nothing), and ones past
	// half the grace period are touched.
	e.skew.Store(0)
	fresh := e.newStore(t)
	again, _, err := fresh.Put(ctx, bytes.NewReader(append(data(21, 4<<20), shared...)), blob.CutFine)
	if err != nil || again != keep {
		t.Fatalf("the same stream again: %s, %v; want %s", again, err, keep)
	}
	if e.calls.touches.Load() != 0 || e.calls.stats.Load() == 0 {
		t.Fatalf("reusing young chunks made %d stats and %d touches; want stats only", e.calls.stats.Load(), e.calls.touches.Load())
	}
	stats := e.calls.stats.Load()
	if _, _, err := fresh.Put(ctx, bytes.NewReader(append(data(21, 4<<20), shared...)), blob.CutFine); err != nil || e.calls.stats.Load() != stats {
		t.Fatalf("a store reusing chunks it just saw asked %d more times (%v)", e.calls.stats.Load()-stats, err)
	}
	e.skew.Store(int64(45 * time.Minute))
	if _, _, err := fresh.Put(ctx, bytes.NewReader(append(data(21, 4<<20), shared...)), blob.CutFine); err != nil || e.calls.touches.Load() == 0 {
		t.Fatalf("reusing chunks past half the grace period touched %d (%v)", e.calls.touches.Load(), err)
	}
	e.skew.Store(0)
	st, err = e.store.Collect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksRemoved != 0 {
		t.Fatalf("a collection removed %d chunks a Put had just touched", st.ChunksRemoved)
	}
	// With no references and past grace, everything goes.
	e.skew.Store(int64(2 * time.Hour))
	if _, err := e.store.Collect(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if c, m := count(); c+m != 0 {
		t.Fatalf("%d chunks and %d manifests left with nothing referenced", c, m)
	}
}

func TestGetChecksWholeStream(t *testing.T) {
	e := newEnv(t)
	in := data(30, 3<<20)
	id, _ := e.put(t, in)
	out, err := e.get(t, id)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(out) != sha256.Sum256(in) {
		t.Fatal("different bytes")
	}
	if _, err := e.store.Get(t.Context(), "nothex", io.Discard); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("Get of a bad id = %v", err)
	}
}
