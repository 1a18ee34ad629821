package integration

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// patterned is a deterministic reader of n bytes.
type patterned struct{ n, off int64 }

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n-p.off {
		b = b[:p.n-p.off]
	}
	for i := range b {
		b[i] = byte((p.off + int64(i)) * 7 % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func TestFiles(t *testing.T) {
	d := startDend(t)
	d.create("fs")
	ctx := ctxT(t, 5*time.Minute)

	t.Run("write read stat list move remove", func(t *testing.T) {
		if err := d.c.Mkdir(ctx, "fs", api.MkdirRequest{Path: "/data/sub", Parents: true, Mode: 0o750}); err != nil {
			t.Fatal(err)
		}
		if err := d.c.WriteFile(ctx, "fs", "/data/sub/a.txt", 0o640, strings.NewReader("alpha")); err != nil {
			t.Fatal(err)
		}
		rc, err := d.c.ReadFile(ctx, "fs", "/data/sub/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "alpha" {
			t.Fatalf("read back %q", b)
		}
		fi, err := d.c.Stat(ctx, "fs", "/data/sub/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size != 5 || fi.Type != "file" || fi.Mode != 0o640 {
			t.Fatalf("stat: %+v", fi)
		}
		// The sandbox sees the same file.
		if got := d.mustSh("fs", "cat /data/sub/a.txt; stat -c %a /data/sub"); got != "alpha750\n" {
			t.Fatalf("seen inside: %q", got)
		}
		if err := d.c.Move(ctx, "fs", "/data/sub/a.txt", "/data/b.txt"); err != nil {
			t.Fatal(err)
		}
		list, err := d.c.ListFiles(ctx, "fs", "/data")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range list {
			names = append(names, f.Name+":"+f.Type)
		}
		if got := strings.Join(names, ","); got != "b.txt:file,sub:dir" {
			t.Fatalf("list = %s", got)
		}
		if err := d.c.RemoveFile(ctx, "fs", "/data", true); err != nil {
			t.Fatal(err)
		}
		if _, err := d.c.Stat(ctx, "fs", "/data"); !client.IsNotFound(err) {
			t.Fatalf("stat after remove: %v", err)
		}
	})

	t.Run("large file streams both ways", func(t *testing.T) {
		const size = 1 << 30
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := d.c.WriteFile(ctx, "fs", "/root/big", 0o644, &patterned{n: size}); err != nil {
			t.Fatal(err)
		}
		rc, err := d.c.ReadFile(ctx, "fs", "/root/big")
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != size {
			t.Fatalf("read %d bytes, err %v", n, err)
		}
		want := sha256.New()
		io.Copy(want, &patterned{n: size})
		if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Fatalf("1 GiB file came back different")
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if after.HeapInuse > before.HeapInuse+256<<20 {
			t.Fatalf("client heap grew from %d to %d while streaming", before.HeapInuse, after.HeapInuse)
		}
		// dend streamed it too: its peak resident memory stays far below 1 GiB.
		if peak := d.peakRSS(); peak > 256<<20 {
			t.Fatalf("dend peaked at %d MiB of memory moving a 1 GiB file", peak>>20)
		}
		d.mustSh("fs", "rm /root/big")
	})

	t.Run("directories as tar", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		add := func(name, body string, mode int64) {
			tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg})
			tw.Write([]byte(body))
		}
		tw.WriteHeader(&tar.Header{Name: "proj/", Mode: 0o755, Typeflag: tar.TypeDir})
		add("proj/main.py", "print('hi')\n", 0o644)
		add("proj/run.sh", "#!/bin/sh\necho run\n", 0o755)
		tw.WriteHeader(&tar.Header{Name: "proj/link", Linkname: "main.py", Typeflag: tar.TypeSymlink})
		tw.Close()
		if err := d.c.WriteArchive(ctx, "fs", "/srv", &buf); err != nil {
			t.Fatal(err)
		}
		if got := d.mustSh("fs", "/srv/proj/run.sh; readlink /srv/proj/link"); got != "run\nmain.py\n" {
			t.Fatalf("inside after upload: %q", got)
		}
		rc, err := d.c.ReadArchive(ctx, "fs", "/srv/proj")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		got := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			got[strings.TrimPrefix(h.Name, "./")] = string(body) + h.Linkname
		}
		if got["main.py"] != "print('hi')\n" || got["run.sh"] != "#!/bin/sh\necho run\n" || got["link"] != "main.py" {
			t.Fatalf("downloaded archive: %v", got)
		}
	})
}
