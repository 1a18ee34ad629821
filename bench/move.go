package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// of random bytes in its files, beside minio-go alone uploading and downloading as many
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
	if err := srv.WriteCredentials(creds); err != nil {
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
	var logs strings.Builder
	for _, n := range nodes {
		logs.WriteString(n.log.String())
	}
	phases := movePhases(logs.String(), "mv-big")
	raw, err := minioRoundTrip(b.ctx, srv, filepath.Join(b.work, "move-1g"), 1<<30)
	if err != nil {
		return err
	}
	s.rows = append(s.rows, row{op: "move a sandbox holding 1 GiB (random bytes in its files)", den: big, raw: samples{raw}, goal: "≤ 1.5× minio-go",
		note: fmt.Sprintf("%.2f× minio-go up + down of 1 GiB", float64(big.pct(0.5))/float64(raw))})
	s.lines = append(s.lines, "where a 1 GiB move's time goes (p50 of each phase, from the nodes' logs): "+phases)
	s.lines = append(s.lines, "den: hibernate, upload (chunked, deduplicated) while sending the checkpoint straight to the target, hand over, download what did not arrive, restore, exec `true`; raw: minio-go alone putting and getting 1 GiB of random bytes as one object")
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

// movePhases sums up, from the nodes' logs, the p50 of each phase of the
// moves of sandbox name: hibernating, uploading, the download and the
// restore on the target (in the adopt, with the rest of the hand-over).
func movePhases(logs, name string) string {
	phase := map[string]samples{}
	id := ""
	for _, line := range strings.Split(logs, "\n") {
		f := logFields(line)
		switch {
		case f["msg"] == "hibernated to move" && f["sandbox"] == name:
			phase["hibernate"] = append(phase["hibernate"], f.duration("took"))
		case f["msg"] == "sandbox handed over" && f["sandbox"] == name:
			phase["upload"] = append(phase["upload"], f.duration("upload"))
			phase["adopt"] = append(phase["adopt"], f.duration("adopt"))
		case f["msg"] == "sandbox transition" && f["sandbox"] == name:
			id = f["id"]
		case f["msg"] == "checkpoint downloaded from the blob store" && id != "" && f["sandbox_id"] == id:
			phase["  download"] = append(phase["  download"], f.duration("took"))
		case f["msg"] == "checkpoint received from the node handing a sandbox over" && f["sandbox"] == name:
			k := "  " + f["part"] + " sent node to node"
			phase[k] = append(phase[k], f.duration("took"))
		case strings.HasPrefix(f["msg"], "sending a checkpoint straight") && f["sandbox"] == name:
			phase["  not sent ahead (downloaded)"] = append(phase["  not sent ahead (downloaded)"], 0)
		case f["msg"] == "restored" && f["sandbox"] == name:
			for _, k := range []string{"verify", "engine"} {
				phase["  restore "+k] = append(phase["  restore "+k], f.duration(k))
			}
		}
	}
	var out []string
	for _, k := range []string{"hibernate", "upload", "  files sent node to node", "  memory sent node to node", "adopt", "  download", "  restore verify", "  restore engine"} {
		if len(phase[k]) > 0 {
			out = append(out, fmt.Sprintf("%s %s", strings.TrimSpace(k), phase[k].pct(0.5).Round(time.Millisecond)))
		}
	}
	if n := len(phase["  not sent ahead (downloaded)"]); n > 0 {
		out = append(out, fmt.Sprintf("a part not sent ahead, downloaded instead, %d times", n))
	}
	return strings.Join(out, ", ")
}

// logLine is one slog text line's fields.
type logLine map[string]string

// logFields splits a slog text line into its key=value fields.
func logFields(line string) logLine {
	f := logLine{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				v, _ = strconv.Unquote(q)
				rest = rest[len(q):]
			}
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		f[k] = v
		line = rest
	}
	return f
}

func (f logLine) duration(k string) time.Duration {
	d, _ := time.ParseDuration(f[k])
	return d
}
