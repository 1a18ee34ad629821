package blob_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/internal/blob"
)

// BenchmarkPutGet puts 256 MiB of fresh random bytes and gets them back,
// for profiling the store's own work beside MinIO's:
// go test -run NONE -bench PutGet -benchtime 3x -cpuprofile cpu.out ./internal/blob/
func BenchmarkPutGet(b *testing.B) {
	b.Run("fine", func(b *testing.B) { benchPutGet(b, blob.CutFine) })
	b.Run("coarse", func(b *testing.B) { benchPutGet(b, blob.CutCoarse) })
}

func benchPutGet(b *testing.B, cut blob.Cut) {
	e := newEnv(b)
	b.SetBytes(256 << 20)
	var put, get time.Duration
	seed := uint64(0)
	for b.Loop() {
		b.StopTimer()
		seed++
		src := data(seed, 256<<20)
		b.StartTimer()
		t0 := time.Now()
		id, _, err := e.store.Put(b.Context(), bytes.NewReader(src), cut)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.store.Get(b.Context(), id, io.Discard); err != nil {
			b.Fatal(err)
		}
		put += t1.Sub(t0)
		get += time.Since(t1)
	}
	b.ReportMetric(float64(put.Milliseconds())/float64(b.N), "put-ms/op")
	b.ReportMetric(float64(get.Milliseconds())/float64(b.N), "get-ms/op")
}

// BenchmarkRawPuts puts 256 MiB to MinIO as objects of each size, 8 at a
// time, to see what an object costs the server.
func BenchmarkRawPuts(b *testing.B) {
	e := newEnv(b)
	src := data(1, 256<<20)
	for _, size := range []int{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			n := 0
			for b.Loop() {
				g, ctx := errgroup.WithContext(b.Context())
				g.SetLimit(8)
				for off := 0; off < len(src); off += size {
					n++
					key := fmt.Sprintf("raw/%d/%d", size, n)
					part := src[off : off+size]
					g.Go(func() error { return e.bucket.Put(ctx, key, bytes.NewReader(part), int64(len(part))) })
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
