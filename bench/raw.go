package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/internal/runsc"
	"github.com/den-dev/den/internal/sandbox"
)

// rawEngine drives bare runsc containers on copies of the busybox image,
// with the global flags den uses and a root of their own: the baseline
// den's figures are compared with.
type rawEngine struct {
	runsc string
	root  string // runsc --root
	work  string
	image string // the busybox root filesystem to copy
	seq   int
	// net, when set, gives containers what den's spec gives a sandbox: a
	// network link, and the host cgroup of a default sandbox (likeDen).
	// Without it (-raw-like-den=false) a container has loopback only and
	// no cgroup.
	net *rawNet
}

func newRawEngine(bin, work string, likeDen bool) *rawEngine {
	r := &rawEngine{runsc: filepath.Join(bin, "runsc"), root: filepath.Join(work, "raw-root"), work: work}
	if likeDen {
		r.net = newRawNet()
	}
	return r
}

// likeDen reports whether containers get den's link and cgroup.
func (r *rawEngine) likeDen() bool { return r.net != nil }

func (r *rawEngine) prepare(image string) error {
	r.image = image
	return os.MkdirAll(r.root, 0o700)
}

// flags are den's engine flags (internal/runsc engineFlags) with the raw
// engine's own root.
func (r *rawEngine) flags() []string {
	return []string{"--root=" + r.root, "--platform=systrap", "--network=sandbox", "--overlay2=none", "--host-uds=none"}
}

// do runs one runsc verb and returns its error with runsc's output. The
// output goes to a file, not a pipe: a detached sandbox inherits it and
// would hold a pipe open forever.
func (r *rawEngine) do(args ...string) error {
	out, err := os.CreateTemp(r.work, "runsc-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(r.runsc, append(r.flags(), args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(out.Name())
		return fmt.Errorf("runsc %s: %v: %s", args[0], err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// time runs one runsc verb and returns how long it took.
func (r *rawEngine) time(args ...string) (time.Duration, error) {
	return timed(func() error { return r.do(args...) })
}

// container is a bare runsc container: its bundle, root and id.
type container struct {
	id     string
	bundle string
	rootfs string
	spec   map[string]any
}

// newContainer writes a bundle whose process is sh -c script, on a fresh
// copy of the image, with the mounts den's spec has (less den-init's).
func (r *rawEngine) newContainer(script string) (*container, error) {
	return r.newContainerIn(script, "")
}

// newContainerIn is newContainer in host cgroup cgroupsPath ("": none),
// whose CPU use can then be read (see cgroupCPU).
func (r *rawEngine) newContainerIn(script, cgroupsPath string) (*container, error) {
	r.seq++
	c := &container{id: "raw" + strconv.Itoa(r.seq)}
	c.bundle = filepath.Join(r.work, c.id+"-bundle")
	c.rootfs = filepath.Join(r.work, c.id+"-rootfs")
	if out, err := exec.Command("cp", "-a", r.image, c.rootfs).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying image: %v: %s", err, out)
	}
	if err := os.MkdirAll(c.bundle, 0o700); err != nil {
		return nil, err
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{"args": []string{"/bin/sh", "-c", script}, "env": []string{"PATH=/bin"},
			"cwd": "/", "user": map[string]int{"uid": 0, "gid": 0}},
		"root":     map[string]any{"path": c.rootfs},
		"hostname": c.id,
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		"linux": map[string]any{"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}}},
	}
	if cgroupsPath != "" {
		spec["linux"].(map[string]any)["cgroupsPath"] = cgroupsPath
	}
	c.spec = spec
	if err := r.writeBundle(c, c.bundle, c.id); err != nil {
		return nil, err
	}
	return c, nil
}

// writeBundle writes c's spec into dir, in the network namespace of
// container id when containers have links.
func (r *rawEngine) writeBundle(c *container, dir, id string) error {
	spec := maps.Clone(c.spec)
	linux := maps.Clone(c.spec["linux"].(map[string]any))
	spec["linux"] = linux
	if r.likeDen() {
		linux["namespaces"] = []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network", "path": r.net.path(id)}}
	}
	if r.likeDen() && linux["cgroupsPath"] == nil {
		// The host cgroup and backstops den's spec (internal/runsc)
		// gives a sandbox of the default size: runsc moves itself in and
		// out of it on every run and restore, which on cgroup v1 can
		// cost an RCU grace period each time.
		linux["cgroupsPath"] = "/den-bench-raw/" + id
		linux["resources"] = map[string]any{
			"memory": map[string]any{"limit": runsc.HostMemory(sandbox.DefaultMemory)},
			"cpu":    map[string]any{"quota": int64(sandbox.DefaultCPUs * 100000), "period": 100000},
			"pids":   map[string]any{"limit": runsc.HostPIDs(0)},
		}
	}
	js, _ := json.Marshal(spec)
	return os.WriteFile(filepath.Join(dir, "config.json"), js, 0o600)
}

// attach gives container id a fresh link before it boots or is
// restored, as den attaches a sandbox; untimed.
func (r *rawEngine) attach(id string) error {
	if !r.likeDen() {
		return nil
	}
	return r.net.attach(id)
}

// newImageDir is a fresh directory for one checkpoint image: runsc
// creates image files exclusively.
func (r *rawEngine) newImageDir() string {
	r.seq++
	return filepath.Join(r.work, "raw-image-"+strconv.Itoa(r.seq))
}

// close removes every container left under the raw root, and their
// network namespaces.
func (r *rawEngine) close() {
	out, _ := exec.Command(r.runsc, "--root="+r.root, "list", "-quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		exec.Command(r.runsc, append(r.flags(), "delete", "--force", id)...).Run()
	}
	if r.likeDen() {
		r.net.close()
		// runsc removes each container's cgroup, not the parent.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/den-bench-raw")
		for _, d := range append(dirs, "/sys/fs/cgroup/den-bench-raw") {
			os.Remove(d)
		}
	}
}

// rawRun times `runsc run` of `true` on a copy of the busybox image.
func (r *rawEngine) rawRun(n int) (samples, error) {
	c, err := r.newContainer("exec /bin/true")
	if err != nil {
		return nil, err
	}
	var s samples
	for i := 0; i < n+1; i++ {
		id := fmt.Sprintf("%s-%d", c.id, i)
		if err := r.attach(c.id); err != nil {
			return nil, err
		}
		d, err := r.time("run", "--bundle", c.bundle, id)
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first run warms the cache
			s = append(s, d)
		}
		r.do("delete", "--force", id)
	}
	return s, nil
}

// rawFigures are the raw engine's counterparts of den's sleep and wake.
type rawFigures struct {
	pause, resume samples
	checkpoint    samples // checkpoint --leave-running
	frozenSave    samples // pause + checkpoint --leave-running + resume
	freeze        samples // the same, of the container running the ticker
	child         samples // restore as a new container + runsc exec true
	hibernate     samples // checkpoint + delete
	wake          samples // restore + runsc exec true
}

// sleepAndWake measures a bare container that holds fill bytes of memory
// (see fillScript) through the same steps as den's. Its forks are of a
// second such container that also runs ticker, as den's parent does
// while it is forked: the engine saves and restores that process too.
func (r *rawEngine) sleepAndWake(fill int64, n int, ticker []byte) (*rawFigures, error) {
	c, err := r.startFilled(fillScript(fill, "/root/filled"), nil)
	if c != nil {
		defer r.do("delete", "--force", c.id)
	}
	if err != nil {
		return nil, err
	}
	f := &rawFigures{}
	for i := 0; i < n; i++ {
		for _, step := range []struct {
			s    *samples
			verb string
		}{{&f.pause, "pause"}, {&f.resume, "resume"}} {
			d, err := r.time(step.verb, c.id)
			if err != nil {
				return nil, err
			}
			*step.s = append(*step.s, d)
		}
	}
	for i := 0; i < n; i++ {
		img := r.newImageDir()
		d, err := r.time("checkpoint", "--leave-running", "--image-path="+img, c.id)
		if err != nil {
			return nil, err
		}
		f.checkpoint = append(f.checkpoint, d)
		os.RemoveAll(img)
		if d, err = r.frozenSave(c.id, img); err != nil {
			return nil, err
		}
		f.frozenSave = append(f.frozenSave, d)
		os.RemoveAll(img)
	}
	forked, err := r.startFilled("/root/ticker >/dev/null 2>&1 & "+fillScript(fill, "/root/filled"), ticker)
	if forked != nil {
		defer r.do("delete", "--force", forked.id)
	}
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := r.forkOnce(forked, f); err != nil {
			return nil, err
		}
	}
	if err := r.do("delete", "--force", forked.id); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := r.hibernateOnce(c, f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// startFilled runs a bare container whose process is script (which
// touches /root/filled once its memory is held), with ticker, when given,
// at /root/ticker, and returns once the marker is there. The container
// is returned, for its removal, whenever it was made.
func (r *rawEngine) startFilled(script string, ticker []byte) (*container, error) {
	c, err := r.newContainer(script)
	if err != nil {
		return nil, err
	}
	if ticker != nil {
		if err := os.WriteFile(filepath.Join(c.rootfs, "root", "ticker"), ticker, 0o755); err != nil {
			return c, err
		}
	}
	if err := r.attach(c.id); err != nil {
		return c, err
	}
	if err := r.do("run", "--detach", "--bundle", c.bundle, c.id); err != nil {
		return c, err
	}
	return c, poll(5*time.Minute, "the raw container to fill its memory", func() (bool, error) {
		_, err := os.Stat(filepath.Join(c.rootfs, "root", "filled"))
		return err == nil, nil
	})
}

// frozenSave times a save of container id into img that it stands still
// for: pause, checkpoint --leave-running, resume.
func (r *rawEngine) frozenSave(id, img string) (time.Duration, error) {
	return timed(func() error {
		if err := r.do("pause", id); err != nil {
			return err
		}
		if err := r.do("checkpoint", "--leave-running", "--image-path="+img, id); err != nil {
			return err
		}
		return r.do("resume", id)
	})
}

// forkOnce is a fork by hand: freeze, save with --leave-running, thaw;
// then restore the image as a second container sharing the (unchanged)
// root filesystem, until a command has run in it.
func (r *rawEngine) forkOnce(c *container, f *rawFigures) error {
	img := r.newImageDir()
	defer os.RemoveAll(img)
	d, err := r.frozenSave(c.id, img)
	if err != nil {
		return err
	}
	f.freeze = append(f.freeze, d)
	// The child has a bundle and, with links, a network of its own, as a
	// fork of den's does.
	child := c.id + "-child"
	bundle := filepath.Join(r.work, child+"-bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return err
	}
	if err := r.writeBundle(c, bundle, child); err != nil {
		return err
	}
	if err := r.attach(child); err != nil {
		return err
	}
	d, err = timed(func() error {
		if err := r.do("restore", "--detach", "--bundle", bundle, "--image-path="+img, child); err != nil {
			return err
		}
		return r.do("exec", child, "/bin/true")
	})
	r.do("delete", "--force", child)
	if err != nil {
		return err
	}
	f.child = append(f.child, d)
	return nil
}

// hibernateOnce saves the container to disk and removes it, then restores
// it under the same id until a command has run in it.
func (r *rawEngine) hibernateOnce(c *container, f *rawFigures) error {
	img := r.newImageDir()
	defer os.RemoveAll(img)
	d, err := timed(func() error {
		if err := r.do("checkpoint", "--image-path="+img, c.id); err != nil {
			return err
		}
		return r.do("delete", "--force", c.id)
	})
	if err != nil {
		return err
	}
	f.hibernate = append(f.hibernate, d)
	// It sleeps as long as den's does before its wake: the host's state
	// (a cgroup move's RCU grace period) depends on it.
	time.Sleep(wakeAfter)
	if err := r.attach(c.id); err != nil {
		return err
	}
	d, err = timed(func() error {
		if err := r.do("restore", "--detach", "--bundle", c.bundle, "--image-path="+img, c.id); err != nil {
			return err
		}
		return r.do("exec", c.id, "/bin/true")
	})
	if err != nil {
		return err
	}
	f.wake = append(f.wake, d)
	return nil
}

// fillScript is a shell script that makes a process hold fill bytes of
// memory, touches marker once it does, and then sleeps. dd reads all of it
// into one buffer and then blocks writing it to a pipe nobody drains; the
// reader takes one byte first, which proves the buffer is full. (/dev/shm
// would be simpler, but den's spec caps it at 64 MiB.)
func fillScript(fill int64, marker string) string {
	if fill == 0 {
		return fmt.Sprintf("touch %s; exec sleep 1000000", marker)
	}
	return fmt.Sprintf("dd if=/dev/urandom bs=%d count=1 iflag=fullblock 2>/dev/null | { head -c 1 >/dev/null; touch %s; exec sleep 1000000; }", fill, marker)
}
