package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// rebaseKept is how much the rebased sandbox holds in its kept paths.
const rebaseKept = 100 << 20

// rebaseSandbox times `den rebase` of a debian sandbox holding 100 MiB in
// /root with one setup step, beside what the same work costs done by
// hand in the same run: a read-only btrfs snapshot of the old root (the
// checkpoint), a snapshot of the image, `cp -a --reflink=auto` of the
// kept path, and `runsc run true`. Each rebase is onto the newest debian
// version, the one the sandbox is on already: the work is the same
// whichever version, and a second debian build would add a minute.
func (b *bench) rebaseSandbox() error {
	if _, err := b.d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "debian"}, nil); err != nil {
		return fmt.Errorf("building debian: %w", err)
	}
	off := "0"
	sb, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: "rb", Image: "debian", Memory: "512M",
		Setup:  []string{"echo rebased > /etc/den-bench-setup"},
		Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
	if err != nil {
		return err
	}
	if _, err := b.exec("rb", "sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /root/data && sync", rebaseKept)); err != nil {
		return err
	}
	var den samples
	var steps time.Duration
	for i := 0; i < b.n+1; i++ {
		res, err := b.d.c.Rebase(b.ctx, "rb", "")
		if err != nil {
			return err
		}
		if i > 0 { // the first warms the cache
			den = append(den, time.Duration(res.DurationMS)*time.Millisecond)
			for _, st := range res.Steps {
				steps += time.Duration(st.DurationMS) * time.Millisecond
			}
		}
	}
	if out, err := b.exec("rb", "sh", "-c", "wc -c < /root/data; cat /etc/den-bench-setup"); err != nil || out != fmt.Sprintf("%d\nrebased\n", rebaseKept) {
		return fmt.Errorf("after the rebases the sandbox holds %q (%v)", out, err)
	}
	pool := filepath.Join(b.d.dataDir, "pool")
	raw, err := rawRebase(pool, filepath.Join(pool, "sandboxes", sb.ID), filepath.Join(pool, "images", "debian"), b.n)
	if err != nil {
		return fmt.Errorf("raw rebase: %w", err)
	}
	run, err := b.raw.rawRun(b.n)
	if err != nil {
		return fmt.Errorf("raw runsc: %w", err)
	}
	for i := range raw {
		raw[i] += run.pct(0.5)
	}
	if err := b.d.c.RemoveSandbox(b.ctx, "rb", true); err != nil {
		return err
	}
	b.add(section{title: "rebase (debian, 100 MiB in kept paths, one setup step)", rows: []row{
		{op: "den rebase", den: den, raw: raw,
			note: joinNotes(ratio(den, raw), fmt.Sprintf("its setup step took %s on average", ms(steps/time.Duration(max(len(den), 1)))),
				"raw: btrfs snapshot -r of the root + snapshot of the image + cp -a --reflink of /root + runsc run true")},
	}})
	return nil
}

// rawRebase does a rebase's file work by hand n times (after one to warm
// the cache) and times it: dirs under pool, removed after.
func rawRebase(pool, root, image string, n int) (samples, error) {
	btrfs := func(args ...string) error {
		out, err := exec.Command("btrfs", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("btrfs %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	var s samples
	for i := 0; i < n+1; i++ {
		ck, fresh := filepath.Join(pool, fmt.Sprintf(".bench-ck-%d", i)), filepath.Join(pool, fmt.Sprintf(".bench-new-%d", i))
		exec.Command("sync", "-f", pool).Run()
		start := time.Now()
		err := btrfs("subvolume", "snapshot", "-r", root, ck)
		if err == nil {
			err = btrfs("subvolume", "snapshot", image, fresh)
		}
		if err == nil {
			err = os.RemoveAll(filepath.Join(fresh, "root"))
		}
		if err == nil {
			if out, cerr := exec.Command("cp", "-a", "--reflink=auto", "--no-target-directory",
				filepath.Join(ck, "root"), filepath.Join(fresh, "root")).CombinedOutput(); cerr != nil {
				err = fmt.Errorf("cp: %v: %s", cerr, out)
			}
		}
		d := time.Since(start)
		btrfs("subvolume", "delete", fresh)
		btrfs("subvolume", "delete", ck)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			s = append(s, d)
		}
	}
	return s, nil
}
