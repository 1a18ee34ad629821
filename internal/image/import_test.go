package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// The test image: layer 2 deletes a file, makes a directory opaque and
// adds a hard link and a symlink.
func testLayers(t *testing.T) [][]byte {
	tool := file("bin/tool", "tool")
	tool.mode = 0o755
	return [][]byte{
		tarOf(t, dir("etc/"), file("etc/keep", "keep"), file("etc/gone", "gone"), dir("opq/"), file("opq/old", "old"), dir("bin/"), tool),
		tarOf(t, file("etc/.wh.gone", ""), file("opq/new", "new"), file("opq/.wh..wh..opq", ""),
			hardlink("links/hard", "bin/tool"), symlink("links/soft", "../bin/tool")),
	}
}

var testTree = map[string]string{
	"etc":        "dir 0755",
	"etc/keep":   "file 0644 keep",
	"opq":        "dir 0755",
	"opq/new":    "file 0644 new",
	"bin":        "dir 0755",
	"bin/tool":   "file 0755 tool",
	"links":      "dir 0755",
	"links/hard": "file 0755 tool",
	"links/soft": "link -> ../bin/tool",
	"tmp":        "dir 1777", // added so /tmp stays on disk
	"tmp/.keep":  "file 0644 ",
}

var testConfig = v1.Config{Env: []string{"PATH=/opt/bin:/usr/bin:/bin", "FOO=bar"}, WorkingDir: "/srv", User: "1000:1000"}

func testDiffID(layer []byte) v1.Hash {
	sum := sha256.Sum256(layer)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// ggcrImage makes an image of layers with go-containerregistry.
func ggcrImage(t *testing.T, arch string, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, testConfig
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// dockerSave writes layers the way `docker save` does: manifest.json, the
// config, and uncompressed layer.tar files.
func dockerSave(t *testing.T, layers [][]byte) (archive []byte, configDigest string) {
	t.Helper()
	cf := v1.ConfigFile{OS: "linux", Architecture: "amd64", Config: testConfig, RootFS: v1.RootFS{Type: "layers"}}
	var ents []tarFile
	var paths []string
	for i, l := range layers {
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, testDiffID(l))
		p := fmt.Sprintf("%064d/layer.tar", i)
		paths = append(paths, p)
		ents = append(ents, tarFile{p, l})
	}
	cfg, err := json.Marshal(cf)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(sum[:]) + ".json"
	mf, err := json.Marshal([]tarball.Descriptor{{Config: cfgName, RepoTags: []string{"example.com/team/app:v1"}, Layers: paths}})
	if err != nil {
		t.Fatal(err)
	}
	ents = append(ents, tarFile{cfgName, cfg}, tarFile{"manifest.json", mf})
	return tarFiles(t, ents), "sha256:" + hex.EncodeToString(sum[:])
}

type tarFile struct {
	name string
	body []byte
}

func tarFiles(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociArchive writes images into an OCI image layout and tars it.
func ociArchive(t *testing.T, imgs ...v1.Image) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for i, img := range imgs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": fmt.Sprintf("v%d", i+1)})); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func checkImported(t *testing.T, f *fixture, im *sandbox.Image, digest, ref string) {
	t.Helper()
	diffTrees(t, tree(t, f.pool.Path(im.VolumeKey())), testTree)
	if im.Source != SourceImported || im.Digest != digest || im.Ref != ref {
		t.Errorf("source %q digest %q ref %q, want imported %q %q", im.Source, im.Digest, im.Ref, digest, ref)
	}
	if !slices.Equal(im.Env, testConfig.Env) || im.Cwd != "/srv" || im.User != "1000:1000" {
		t.Errorf("env %q cwd %q user %q", im.Env, im.Cwd, im.User)
	}
	rec, err := f.records.GetImage(context.Background(), im.Name)
	if err != nil || rec.Digest != digest || rec.SizeBytes <= 0 {
		t.Errorf("record %+v %v", rec, err)
	}
	if !f.pool.sealed[im.VolumeKey()] {
		t.Error("volume not sealed")
	}
}

func TestImportDockerSave(t *testing.T) {
	archive, digest := dockerSave(t, testLayers(t))
	for name, data := range map[string][]byte{"plain": archive, "gzipped": gzipped(t, archive)} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var phases []string
			im, err := f.m.Import(context.Background(), "app", bytes.NewReader(data), func(p Progress) { phases = append(phases, p.Phase) })
			if err != nil {
				t.Fatal(err)
			}
			checkImported(t, f, im, digest, "example.com/team/app:v1")
			if !slices.Contains(phases, "read") || !slices.Contains(phases, "extract") {
				t.Errorf("phases %q", phases)
			}
		})
	}
}

func TestImportGgcrTarball(t *testing.T) {
	img := ggcrImage(t, "amd64", testLayers(t)...)
	var buf bytes.Buffer
	if err := tarball.Write(name.MustParseReference("example.com/team/app:v2"), img, &buf); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	im, err := f.m.Import(context.Background(), "app", &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgName, _ := img.ConfigName()
	checkImported(t, f, im, cfgName.String(), "example.com/team/app:v2")
}

func TestImportOCILayout(t *testing.T) {
	img := ggcrImage(t, "amd64", testLayers(t)...)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	im, err := f.m.Import(context.Background(), "app", bytes.NewReader(ociArchive(t, img)), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkImported(t, f, im, digest.String(), "v1")
}

func TestImportOCIIndexPicksPlatform(t *testing.T) {
	amd := ggcrImage(t, "amd64", testLayers(t)...)
	arm := ggcrImage(t, "arm64", tarOf(t, file("arm", "arm")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	dir := t.TempDir()
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	f := newFixture(t)
	im, err := f.m.Import(context.Background(), "multi", &buf, nil)
	if platformArch != "amd64" {
		t.Skip("the test index holds amd64 and arm64")
	}
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.Digest()
	if im.Digest != want.String() {
		t.Errorf("digest %s, want the amd64 image's %s", im.Digest, want)
	}
}

// rewriteTar changes the body of the matching files in a tar, dropping
// those change returns nil for.
func rewriteTar(t *testing.T, archive []byte, match func(name string) bool, change func([]byte) []byte) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	var files []tarFile
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeDir {
			continue // made again from the files' names
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if match(hdr.Name) {
			if body = change(body); body == nil {
				continue // dropped
			}
		}
		files = append(files, tarFile{hdr.Name, body})
	}
	return tarFiles(t, files)
}

func TestImportFailuresLeaveNothing(t *testing.T) {
	layers := testLayers(t)
	archive, _ := dockerSave(t, layers)
	secondLayer := func(n string) bool { return strings.HasPrefix(n, fmt.Sprintf("%064d/", 1)) }
	img1 := ggcrImage(t, "amd64", layers[0])
	img2 := ggcrImage(t, "amd64", layers[1])
	var multi bytes.Buffer
	if err := tarball.MultiWrite(map[name.Tag]v1.Image{
		name.MustParseReference("a:1").(name.Tag): img1,
		name.MustParseReference("b:1").(name.Tag): img2,
	}, &multi); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		data  []byte
		class error
	}{
		{"not a tar", bytes.Repeat([]byte("garbage!"), 300), errdefs.ErrInvalid},
		{"empty", nil, errdefs.ErrInvalid},
		{"tar without image", tarFiles(t, []tarFile{{"hello.txt", []byte("hi")}}), errdefs.ErrInvalid},
		{"truncated archive", archive[:len(archive)/2], errdefs.ErrInvalid},
		{"truncated layer", rewriteTar(t, archive, secondLayer, func(b []byte) []byte { return b[:len(b)/2] }), errdefs.ErrInvalid},
		{"altered layer", rewriteTar(t, archive, secondLayer, func(b []byte) []byte {
			return tarOf(t, file("etc/.wh.gone", ""), file("opq/new", "NEW"))
		}), errdefs.ErrInvalid},
		{"truncated gzip", gzipped(t, archive)[:len(gzipped(t, archive))/2], errdefs.ErrInvalid},
		{"two images", multi.Bytes(), errdefs.ErrInvalid},
		{"OCI layout without its layers", rewriteTar(t, ociArchive(t, img1), isBlob, func(b []byte) []byte {
			if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
				return nil
			}
			return b
		}), errdefs.ErrInvalid},
		{"OCI layout with a damaged index", rewriteTar(t, ociArchive(t, img1), func(n string) bool { return n == "index.json" },
			func([]byte) []byte { return []byte("{") }), errdefs.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.m.Import(context.Background(), "app", bytes.NewReader(c.data), nil)
			t.Log(err)
			assertClass(t, err, c.class)
			if strings.Contains(err.Error(), f.m.cfg.TempDir) {
				t.Errorf("the error shows a host path: %v", err)
			}
			f.assertNothingOf(t, "app")
			if ents, _ := os.ReadDir(f.m.cfg.TempDir); len(ents) != 0 {
				t.Errorf("temporary files left: %v", ents)
			}
		})
	}
}

func TestImportCancelledLeavesNothing(t *testing.T) {
	archive, _ := dockerSave(t, testLayers(t))
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := f.m.Import(ctx, "app", bytes.NewReader(archive), func(p Progress) {
		if p.Phase == "extract" && p.Current == 1 { // between the layers
			cancel()
		}
	})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("import went on after cancel: %v", err)
	}
	f.assertNothingOf(t, "app")
}

// TestImportExistingNameMakesVersion imports a name twice: the second is
// version 2, and version 1 goes, since nothing was made from it.
func TestImportExistingNameMakesVersion(t *testing.T) {
	archive, digest := dockerSave(t, testLayers(t))
	f := newFixture(t)
	ctx := context.Background()
	v1, err := f.m.Import(ctx, "app", bytes.NewReader(archive), nil)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := f.m.Import(ctx, "app", bytes.NewReader(archive), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || v2.Version != 2 || v1.VolumeKey() == v2.VolumeKey() {
		t.Fatalf("versions %d (%s) and %d (%s), want 1 and 2 in two volumes", v1.Version, v1.VolumeKey(), v2.Version, v2.VolumeKey())
	}
	im, err := f.m.Get(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	checkImported(t, f, im, digest, "example.com/team/app:v1")
	if im.Version != 2 {
		t.Errorf("newest version %d, want 2", im.Version)
	}
	if _, err := os.Stat(f.pool.Path(v1.VolumeKey())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("unused version 1 kept (stat: %v)", err)
	}
	if _, err := f.m.Version(ctx, "app", 1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Version(app, 1) = %v, want not found", err)
	}
}

func TestImportHostileLayers(t *testing.T) {
	cases := map[string][]byte{
		"dot-dot":                    tarOf(t, file("../../../../escape", "x")),
		"absolute":                   tarOf(t, file("/escape", "x")),
		"symlink then write through": tarOf(t, symlink("l", "../../../.."), file("l/escape", "x")),
		"hard link out":              tarOf(t, hardlink("h", "../../../../outside")),
	}
	for name, layer := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			base := filepath.Dir(f.pool.root)
			if err := os.WriteFile(filepath.Join(base, "outside"), []byte("outside"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := tree(t, base)
			archive, _ := dockerSave(t, [][]byte{tarOf(t, dir("etc/")), layer})
			_, err := f.m.Import(context.Background(), "app", bytes.NewReader(archive), nil)
			t.Log(err)
			assertClass(t, err, errdefs.ErrInvalid)
			f.assertNothingOf(t, "app")
			after := tree(t, base)
			for k := range before {
				if !strings.HasPrefix(k, "pool") && before[k] != after[k] {
					t.Errorf("%s changed", k)
				}
			}
			for k := range after {
				if _, ok := before[k]; !ok && !strings.HasPrefix(k, "pool") {
					t.Errorf("%s created outside the pool", k)
				}
			}
		})
	}
}

func isBlob(name string) bool { return strings.HasPrefix(name, "blobs/") }
