package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
)

// blobRig is a MinIO started for the test, a bucket in it, and a
// credentials file for dend.
type blobRig struct {
	srv   *miniotest.Server
	url   string
	creds string
}

func newBlobRig(t *testing.T) *blobRig {
	t.Helper()
	srv := miniotest.ForTest(t)
	if err := srv.CreateBucket(t.Context(), "den"); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "blobs")
	if err := srv.WriteCredentials(creds); err != nil {
		t.Fatal(err)
	}
	return &blobRig{srv: srv, url: srv.URL("den", "fleet"), creds: creds}
}

// store reads the bucket as den does, to check what it holds.
func (r *blobRig) store(t *testing.T) (*blob.Store, *s3.Bucket) {
	t.Helper()
	loc, err := s3.ParseURL(r.url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s3.Open(t.Context(), loc, s3.Credentials{AccessKeyID: r.srv.AccessKey, SecretAccessKey: r.srv.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := blob.New(blob.Config{Objects: b})
	if err != nil {
		t.Fatal(err)
	}
	return st, b
}

// waitUploaded waits until a checkpoint is uploaded and returns it.
func (d *dend) waitUploaded(sb, ck string) *api.Checkpoint {
	d.t.Helper()
	var got *api.Checkpoint
	waitFor(d.t, 3*time.Minute, "checkpoint "+ck+" to be uploaded", func() bool {
		c, err := d.c.GetCheckpoint(ctxT(d.t, 10*time.Second), sb, ck)
		if err != nil {
			d.t.Fatalf("reading checkpoint %s: %v", ck, err)
		}
		got = c
		return c.Location == api.LocationUploaded
	})
	return got
}

// dropLocal removes a checkpoint's copy on the host, as a lost disk
// would: its files' volume and its memory image.
func (d *dend) dropLocal(ckID string) {
	d.t.Helper()
	d.dropVolume("checkpoints", ckID)
	if err := os.RemoveAll(filepath.Join(d.dataDir, "checkpoints", ckID)); err != nil {
		d.t.Fatal(err)
	}
}

// dropVolume removes a volume of the pool behind dend's back, if it is
// there: a btrfs subvolume, or the copy driver's directory and its marks
// beside it.
func (d *dend) dropVolume(dir, name string) {
	d.t.Helper()
	vol := filepath.Join(d.dataDir, "pool", dir, name)
	if _, err := os.Lstat(vol); errors.Is(err, fs.ErrNotExist) {
		return
	}
	if ok, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", dir, "."+name+".volume")); len(ok) > 0 {
		for _, p := range []string{vol, filepath.Join(d.dataDir, "pool", dir, "."+name+".volume"), filepath.Join(d.dataDir, "pool", dir, "."+name+".readonly")} {
			if err := os.RemoveAll(p); err != nil {
				d.t.Fatal(err)
			}
		}
		return
	}
	if out, err := exec.Command("btrfs", "subvolume", "delete", vol).CombinedOutput(); err != nil {
		d.t.Fatalf("deleting %s: %v: %s", vol, err, out)
	}
}

// randomBytes are n bytes from seed: the same seed, the same bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Checkpoints to a real MinIO: uploaded in the background, deduplicated
// across sandboxes, incremental, collected, downloaded again when the
// host lost them, and refused when the bucket's bytes are damaged; on
// btrfs (diffs) and on the copy driver (tars, whole).
func TestBlobStore(t *testing.T) {
	for _, storage := range []string{"btrfs", "copy"} {
		t.Run(storage, func(t *testing.T) { testBlobStore(t, storage) })
	}
}

func testBlobStore(t *testing.T, storage string) {
	rig := newBlobRig(t)
	d := startDend(t, "--storage", storage, "--blobs", rig.url, "--blobs-credentials", rig.creds,
		"--blobs-gc-grace", "5s", "--blobs-gc-interval", "0")
	ctx := ctxT(t, 10*time.Minute)

	// Two sandboxes hold the same 32 MiB file: the second's first
	// checkpoint sends little of it, the chunks where it starts and ends.
	same := randomBytes(1, 32<<20)
	for _, name := range []string{"ba", "bb"} {
		d.create(name)
		if err := d.c.WriteFile(ctx, name, "/root/same", 0o644, bytes.NewReader(same)); err != nil {
			t.Fatal(err)
		}
	}
	fa, err := d.c.Checkpoint(ctx, "ba", clientFSOnly("files-a"))
	if err != nil {
		t.Fatal(err)
	}
	fa = d.waitUploaded("ba", fa.ID)
	fb, err := d.c.Checkpoint(ctx, "bb", clientFSOnly("files-b"))
	if err != nil {
		t.Fatal(err)
	}
	fb = d.waitUploaded("bb", fb.ID)
	t.Logf("dedup: first sandbox's checkpoint sent %d bytes; the second's, holding the same 32 MiB file, sent %d", fa.UploadedBytes, fb.UploadedBytes)
	// Files are cut in chunks of 1 to 8 MiB, so the chunks where the
	// shared file starts and ends (up to 16 MiB together, as the bytes
	// around it fall) may be sent again; the rest of it must not be.
	if fa.UploadedBytes < 32<<20 || fb.UploadedBytes > fa.UploadedBytes-16<<20 {
		t.Fatalf("the second sandbox's checkpoint sent %d bytes (the first %d); want the shared file once, less its first and last chunks", fb.UploadedBytes, fa.UploadedBytes)
	}

	// A checkpoint with memory, then another after a 1 MiB change: the
	// second sends the change and what of its memory image is new.
	d.startCounter("ba", 2)
	c1, err := d.c.Checkpoint(ctx, "ba", clientNamed("one"))
	if err != nil {
		t.Fatal(err)
	}
	c1 = d.waitUploaded("ba", c1.ID)
	change := randomBytes(2, 1<<20)
	if err := d.c.WriteFile(ctx, "ba", "/root/change", 0o644, bytes.NewReader(change)); err != nil {
		t.Fatal(err)
	}
	c2, err := d.c.Checkpoint(ctx, "ba", clientNamed("two"))
	if err != nil {
		t.Fatal(err)
	}
	c2 = d.waitUploaded("ba", c2.ID)
	t.Logf("incremental: first checkpoint with memory sent %d bytes; the second, after a 1 MiB change, sent %d (memory image %d bytes)",
		c1.UploadedBytes, c2.UploadedBytes, c2.MemoryBytes)
	// The copy driver sends a whole tar, so the change (the new file and
	// the counter's, adjacent in /root) also costs the chunks it begins
	// and ends in, old bytes around it included: up to 8 MiB each. A
	// whole tar would be over 40 MiB.
	limit := 2<<20 + c2.MemoryBytes
	if storage == "copy" {
		limit += 16 << 20
	}
	if c2.UploadedBytes > limit {
		t.Fatalf("the second checkpoint sent %d bytes; want at most %d (2 MiB + its %d-byte memory image)", c2.UploadedBytes, limit, c2.MemoryBytes)
	}
	if out, _, _ := d.den("checkpoints", "ba"); !strings.Contains(out, "uploaded") {
		t.Fatalf("den checkpoints does not say where they are:\n%s", out)
	}

	// A checkpoint removed: after the grace period the collector takes
	// what only it used, and every manifest left is whole.
	gone, err := d.c.Checkpoint(ctx, "bb", clientFSOnly("gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.WriteFile(ctx, "bb", "/root/unique", 0o644, bytes.NewReader(randomBytes(3, 2<<20))); err != nil {
		t.Fatal(err)
	}
	gone, err = d.c.Checkpoint(ctx, "bb", clientFSOnly("gone2"))
	if err != nil {
		t.Fatal(err)
	}
	d.waitUploaded("bb", gone.ID)
	if err := d.c.RemoveCheckpoint(ctx, "bb", gone.ID); err != nil {
		t.Fatal(err)
	}
	// Nothing is collected within the grace period; once past it, what
	// only the removed checkpoint used goes.
	gc, err := d.c.CollectBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gc.ManifestsRemoved+gc.ChunksRemoved != 0 {
		t.Fatalf("a collection within the grace period removed %+v", *gc)
	}
	waitFor(t, time.Minute, "the collector to remove the checkpoint's blobs", func() bool {
		if gc, err = d.c.CollectBlobs(ctx); err != nil {
			t.Fatal(err)
		}
		return gc.ManifestsRemoved > 0
	})
	t.Logf("collection: %+v", *gc)
	if gc.ChunksRemoved == 0 || gc.MissingManifests != 0 {
		t.Fatalf("collection after removing a checkpoint: %+v", *gc)
	}
	st, bucket := rig.store(t)
	manifests := 0
	err = bucket.List(ctx, "manifests/", func(o blob.ObjectInfo) error {
		manifests++
		_, err := st.Get(ctx, strings.TrimPrefix(o.Key, "manifests/"), io.Discard)
		return err
	})
	if err != nil || manifests != gc.Manifests {
		t.Fatalf("after collection %d manifests are left (kept %d): %v", manifests, gc.Manifests, err)
	}

	// The host loses its image and the sandbox's checkpoints: restoring
	// the last downloads its chain, the image first, and its processes
	// carry on.
	before := sha256.Sum256(change)
	for _, id := range []string{fa.ID, c1.ID, c2.ID} {
		d.dropLocal(id)
	}
	image := filepath.Join(d.dataDir, "pool", "images", "busybox")
	d.dropVolume("images", "busybox")
	if _, err := d.c.Restore(ctx, "ba", c2.ID); err != nil {
		t.Fatalf("restore of a checkpoint the host lost: %v\n%s", err, tail(d.logs(), 3000))
	}
	out := d.mustSh("ba", "sha256sum /root/change")
	if !strings.HasPrefix(out, hex.EncodeToString(before[:])) {
		t.Fatalf("the restored file is not the one checkpointed: %s", out)
	}
	d.countAbove("ba", 2)
	// On btrfs the image is the base of the chain and came back with it;
	// the copy driver's whole tars need no base.
	if _, err := os.Stat(filepath.Join(image, "bin", "busybox")); storage == "btrfs" && err != nil {
		t.Fatalf("the image did not come back with the checkpoint: %v", err)
	}

	// The bucket's chunks are damaged: a restore that needs them fails,
	// naming the checkpoint and what is wrong, and boots nothing.
	d.dropLocal(c1.ID)
	d.dropLocal(c2.ID)
	corruptChunks(t, rig)
	_, err = d.c.Restore(ctx, "ba", c2.ID)
	if err == nil || !strings.Contains(err.Error(), c2.ID) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("restore from damaged chunks = %v; want a refusal naming checkpoint %s and the damage", err, c2.ID)
	}
	t.Logf("refused: %v", err)
	sb, err := d.c.GetSandbox(ctx, "ba")
	if err != nil || sb.State != api.StateError {
		t.Fatalf("after a refused restore the sandbox is %+v, %v; want error", sb, err)
	}
}

// A hibernated sandbox's memory and files go to the blob store too, and
// it wakes with its processes from there when the host lost them.
func TestBlobStoreHibernation(t *testing.T) {
	rig := newBlobRig(t)
	d := startDend(t, "--blobs", rig.url, "--blobs-credentials", rig.creds)
	ctx := ctxT(t, 5*time.Minute)
	d.create("sleeper")
	d.startCounter("sleeper", 2)
	d.mustSh("sleeper", "echo kept > /root/f")
	if _, err := d.c.Hibernate(ctx, "sleeper"); err != nil {
		t.Fatal(err)
	}
	cks, err := d.c.Checkpoints(ctx, "sleeper")
	if err != nil || len(cks) != 1 || cks[0].Kind != api.CheckpointHibernate {
		t.Fatalf("checkpoints of a hibernated sandbox: %+v, %v", cks, err)
	}
	ck := d.waitUploaded("sleeper", cks[0].ID)
	t.Logf("hibernation image uploaded: %d bytes sent for %d of memory and %d of files", ck.UploadedBytes, ck.MemoryBytes, ck.FilesBytes)
	d.dropLocal(ck.ID)
	if sb, err := d.c.Resume(ctx, "sleeper"); err != nil || sb.State != api.StateRunning {
		t.Fatalf("waking from a hibernation the host lost: %+v, %v\n%s", sb, err, tail(d.logs(), 3000))
	}
	if out := d.mustSh("sleeper", "cat /root/f"); strings.TrimSpace(out) != "kept" {
		t.Fatalf("file after waking: %q", out)
	}
	d.countAbove("sleeper", d.count("sleeper"))
}

// corruptChunks overwrites every chunk in the bucket with other bytes.
func corruptChunks(t *testing.T, rig *blobRig) {
	t.Helper()
	c, err := rig.srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for o := range c.ListObjects(t.Context(), "den", minio.ListObjectsOptions{Prefix: "fleet/chunks/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		junk := []byte("not the chunk that was here")
		if _, err := c.PutObject(t.Context(), "den", o.Key, bytes.NewReader(junk), int64(len(junk)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no chunks to corrupt")
	}
}

// dend refuses at start a --blobs it cannot use, saying why, and never
// echoes a secret.
func TestBlobStoreRefusedAtStart(t *testing.T) {
	rig := newBlobRig(t)
	wrong := filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong, []byte("AWS_ACCESS_KEY_ID="+rig.srv.AccessKey+"\nAWS_SECRET_ACCESS_KEY=not-the-secret-at-all\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"not s3", []string{"--blobs", "http://den/x"}, nil, "not an s3:// URL"},
		{"keys in the URL", []string{"--blobs", "s3://id:secret@den/x?endpoint=" + rig.srv.Endpoint}, nil, "holds credentials"},
		{"unknown parameter", []string{"--blobs", rig.url + "&tls=no"}, nil, "unknown parameter"},
		{"no keys", []string{"--blobs", rig.url}, nil, "credentials are not set"},
		{"wrong secret", []string{"--blobs", rig.url, "--blobs-credentials", wrong}, nil, "refused dend's credentials"},
		{"wrong secret from env", []string{"--blobs", rig.url}, []string{"AWS_ACCESS_KEY_ID=" + rig.srv.AccessKey, "AWS_SECRET_ACCESS_KEY=not-the-secret-at-all"}, "refused dend's credentials"},
		{"no bucket", []string{"--blobs", rig.srv.URL("nobucket", "x"), "--blobs-credentials", rig.creds}, nil, `bucket "nobucket" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			t.Cleanup(func() { unmountUnder(t, base) })
			args := append([]string{"--data-dir", filepath.Join(base, "data"), "--run-dir", filepath.Join(base, "run"),
				"--socket", filepath.Join(base, "den.sock"), "--subnet", testSubnet(), "--storage", "copy"}, tc.args...)
			cmd := exec.CommandContext(ctxT(t, time.Minute), filepath.Join(binDir, "dend"), args...)
			cmd.Env = append(envWithoutBlobKeys(), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("dend %v: %v; want it to stop saying %q:\n%s", tc.args, err, tc.want, out)
			}
			if strings.Contains(string(out), "not-the-secret-at-all") || strings.Contains(string(out), rig.srv.SecretKey) {
				t.Fatalf("dend's error shows a secret:\n%s", out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "dend: ") || strings.HasPrefix(line, "hint: ") {
					t.Log(line)
				}
			}
		})
	}
}

// envWithoutBlobKeys is the test's environment without any blob store keys.
func envWithoutBlobKeys() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "DEN_BLOBS") {
			env = append(env, kv)
		}
	}
	return env
}

func clientFSOnly(name string) client.CheckpointOptions {
	return client.CheckpointOptions{Name: name, FSOnly: true}
}

func clientNamed(name string) client.CheckpointOptions { return client.CheckpointOptions{Name: name} }
