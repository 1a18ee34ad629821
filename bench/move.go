package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// moveRounds is how many times the small sandbox crosses between the two
// nodes.
const moveRounds = 8

// moveSandboxes measures den move between two dends on one PostgreSQL
// with one MinIO, all on this machine: an idle small sandbox from running
// on one node to its first exec done on the other, and one holding 1 GiB
// in memory, beside minio-go alone uploading and downloading as many
// bytes in the same run.
func (b *bench) moveSandboxes() error {
	srv, err := miniotest.Start(b.ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.CreateBucket(b.ctx, "den"); err != nil {
		return err
	}
	pg, err := pgtest.Start(b.ctx, pgtest.Options{Durable: true})
	if err != nil {
		return err
	}
	defer pg.Stop()
	db, err := pg.CreateDatabase(b.ctx)
	if err != nil {
		return err
	}
	creds := filepath.Join(b.work, "move-credentials")
	text := fmt.Sprintf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", srv.AccessKey, srv.SecretKey)
	if err := os.WriteFile(creds, []byte(text), 0o600); err != nil {
		return err
	}
	var nodes []*benchDend
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].close()
		}
	}()
	for i, sub := range []string{b.moveSubnet, nextSubnet(b.moveSubnet, 1)} {
		d, err := startDendWith(b.bin, filepath.Join(b.work, fmt.Sprintf("move%d", i)), sub, []string{"DEN_STORE=" + pg.DSN(db)},
			"--node", fmt.Sprintf("move-%d", i), "--blobs", srv.URL("den", "move"), "--blobs-credentials", creds)
		if err != nil {
			return fmt.Errorf("starting node %d: %w", i, err)
		}
		nodes = append(nodes, d)
	}
	if _, err := nodes[0].c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return err
	}
	s := section{title: "den move between two nodes on one machine (PostgreSQL and MinIO on loopback)"}

	small, err := b.moveRoundTrips(nodes, "mv-small", "128M", "")
	if err != nil {
		return err
	}
	s.rows = append(s.rows, row{op: "move an idle small sandbox: running → first exec done on the other node", den: small, goal: "≤ 1 s"})

	big, err := b.moveRoundTrips(nodes[:2], "mv-big", "1280M", "head -c 1073741824 /dev/urandom > /tmp/held")
	if err != nil {
		return err
	}
	raw, err := minioRoundTrip(b.ctx, srv, filepath.Join(b.work, "move-1g"), 1<<30)
	if err != nil {
		return err
	}
	s.rows = append(s.rows, row{op: "move a sandbox holding 1 GiB in memory", den: big, raw: samples{raw}, goal: "≤ 1.5× minio-go",
		note: fmt.Sprintf("%.2f× minio-go up + down of 1 GiB", float64(big.pct(0.5))/float64(raw))})
	s.lines = append(s.lines, "den: hibernate, upload (chunked, deduplicated: moving back sends only what changed), hand over, download, restore, exec `true`; raw: minio-go alone putting and getting 1 GiB of random bytes as one object")
	b.add(s)
	return nil
}

// moveRoundTrips creates sandbox name on the first node, runs setup in
// it, and moves it back and forth, timing each move to the first exec
// done; it removes it after.
func (b *bench) moveRoundTrips(nodes []*benchDend, name, memory, setup string) (samples, error) {
	c := nodes[0].c
	off := "0"
	if _, err := c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: memory,
		Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}}); err != nil {
		return nil, err
	}
	defer c.RemoveSandbox(context.WithoutCancel(b.ctx), name, true)
	if setup != "" {
		run, err := c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"sh", "-c", setup}}, client.ExecIO{})
		if err != nil || run.ExitCode == nil || *run.ExitCode != 0 {
			return nil, fmt.Errorf("setting up %s: %+v, %v", name, run, err)
		}
	}
	rounds := moveRounds
	if setup != "" {
		rounds = 4
	}
	var took samples
	for i := range rounds {
		to := nodes[(i+1)%len(nodes)]
		target := fmt.Sprintf("move-%d", (i+1)%len(nodes))
		d, err := timed(func() error {
			if _, err := to.c.MoveSandbox(b.ctx, name, target, false); err != nil {
				return err
			}
			_, err := to.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("moving %s to %s: %w", name, target, err)
		}
		took = append(took, d)
	}
	return took, nil
}

// minioRoundTrip puts n random bytes as one object and gets them back
// with minio-go alone, and returns how long both took.
func minioRoundTrip(ctx context.Context, srv *miniotest.Server, file string, n int64) (time.Duration, error) {
	if err := writeStream(file, n); err != nil {
		return 0, err
	}
	defer os.Remove(file)
	mc, err := srv.Client()
	if err != nil {
		return 0, err
	}
	return timed(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := mc.PutObject(ctx, "den", "raw/move-1g", f, n, minio.PutObjectOptions{}); err != nil {
			return err
		}
		o, err := mc.GetObject(ctx, "den", "raw/move-1g", minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		_, err = io.Copy(io.Discard, o)
		return err
	})
}
