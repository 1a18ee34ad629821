package image

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/den-dev/den/internal/errdefs"
)

// startRegistry serves an in-memory registry on loopback and returns its
// host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func TestPull(t *testing.T) {
	host := startRegistry(t)
	img := ggcrImage(t, "amd64", testLayers(t)...)
	ref := host + "/team/my_app:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	var last Progress
	im, err := f.m.Pull(context.Background(), ref, "", true, func(p Progress) {
		if p.Phase == "download" {
			last = p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if im.Name != "my-app" || im.Source != SourcePulled || im.Digest != want.String() || im.Ref != ref {
		t.Errorf("record %+v, want my-app pulled %s from %s", im, want, ref)
	}
	diffTrees(t, tree(t, f.pool.Path(im.VolumeKey())), testTree)
	if !slices.Equal(im.Env, testConfig.Env) || im.Cwd != "/srv" || im.User != "1000:1000" {
		t.Errorf("env %q cwd %q user %q", im.Env, im.Cwd, im.User)
	}
	if last.Total <= 0 || last.Current != last.Total {
		t.Errorf("last download progress %+v, want all of it", last)
	}

	again, err := f.m.Pull(context.Background(), ref, "", true, nil)
	if err != nil || again.Version != 2 {
		t.Fatalf("pulling again = %+v, %v; want version 2", again, err)
	}
}

func TestPullIndexTakesPlatform(t *testing.T) {
	if platformArch != "amd64" {
		t.Skip("the test index holds amd64 and arm64")
	}
	host := startRegistry(t)
	amd := ggcrImage(t, "amd64", testLayers(t)...)
	arm := ggcrImage(t, "arm64", tarOf(t, file("arm", "arm")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref := host + "/multi:latest"
	if err := remote.WriteIndex(mustRef(t, ref), idx); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	im, err := f.m.Pull(context.Background(), ref, "multi", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.Digest()
	if im.Digest != want.String() {
		t.Errorf("digest %s, want the amd64 image's %s", im.Digest, want)
	}
	diffTrees(t, tree(t, f.pool.Path(im.VolumeKey())), testTree)

	// An index without the platform.
	armOnly := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}}},
	)
	if err := remote.WriteIndex(mustRef(t, host+"/armonly:latest"), armOnly); err != nil {
		t.Fatal(err)
	}
	_, err = f.m.Pull(context.Background(), host+"/armonly:latest", "", true, nil)
	assertClass(t, err, errdefs.ErrInvalid)
	f.assertNothingOf(t, "armonly")
}

func TestPullFailures(t *testing.T) {
	host := startRegistry(t)
	cases := []struct {
		name, ref string
		class     error
	}{
		{"missing repository", host + "/team/missing:v1", errdefs.ErrNotFound},
		{"no registry there", "127.0.0.1:1/team/app:v1", errdefs.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.m.Pull(context.Background(), c.ref, "app", true, nil)
			t.Log(err)
			assertClass(t, err, c.class)
			f.assertNothingOf(t, "app")
		})
	}
}

func TestPullCancelledLeavesNothing(t *testing.T) {
	host := startRegistry(t)
	img := ggcrImage(t, "amd64", testLayers(t)...)
	ref := host + "/team/app:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := f.m.Pull(ctx, ref, "", true, func(p Progress) {
		if p.Phase == "download" && p.Current > 0 {
			cancel()
		}
	})
	if err == nil {
		t.Fatal("pull went on after cancel")
	}
	f.assertNothingOf(t, "app")
}

func TestNameFromRef(t *testing.T) {
	cases := map[string]string{
		"docker.io/library/python:3.12": "python",
		"python":                        "python",
		"ghcr.io/team/my_app@sha256:" + strings.Repeat("a", 64): "my-app",
		"example.com/a/b/c.d__e:v1":                             "c-d-e",
		"example.com/" + strings.Repeat("x", 70):                strings.Repeat("x", 63),
	}
	for ref, want := range cases {
		r, err := name.ParseReference(ref, name.WeakValidation)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if got := nameFromRef(r); got != want {
			t.Errorf("%s: got %q, want %q", ref, got, want)
		}
	}
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
