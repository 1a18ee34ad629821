package images

import (
	"bytes"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderImages(t *testing.T) {
	imgs := []api.Image{
		{Name: "debian", Version: 3, Source: "builtin", SizeBytes: 123_400_000, CreatedAt: now.Add(-24 * time.Hour),
			Older: []api.Image{{Name: "debian", Version: 1, Source: "builtin", SizeBytes: 120_000_000, CreatedAt: now.Add(-72 * time.Hour)}}},
		{Name: "tools", Source: "pulled", Ref: "127.0.0.1:5000/tools:1", SizeBytes: 5_000, CreatedAt: now.Add(-30 * time.Second)},
		{Name: "busybox", Source: "builtin", SizeBytes: 2_000_000, CreatedAt: now.Add(-time.Hour),
			Warm: &api.WarmPool{Target: 4, Ready: 3, Booting: 1, HostMemoryBytes: 240 << 20}},
		{Name: "held", Source: "builtin", SizeBytes: 2_000_000, CreatedAt: now.Add(-time.Hour),
			Warm: &api.WarmPool{Target: 2, Held: "host memory low"}},
	}
	var buf bytes.Buffer
	if err := renderImages(&buf, imgs, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      VERSION     SOURCE    REF                      SIZE      CREATED             WARM         WARM MEMORY\n" +
		"debian    3           builtin   -                        123.4MB   24 hours ago        -            -\n" +
		"debian    1 (older)   builtin   -                        120MB     3 days ago          -            -\n" +
		"tools     1           pulled    127.0.0.1:5000/tools:1   5kB       30 seconds ago      -            -\n" +
		"busybox   1           builtin   -                        2MB       About an hour ago   3/4          240MiB\n" +
		"held      1           builtin   -                        2MB       About an hour ago   0/2 (held)   0B\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
