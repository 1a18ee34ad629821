package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// imageTests cover the records of base images.
var imageTests = []testCase{
	{"RoundTripsEveryField", testImageRoundTrip},
	{"PutSetsCreateTime", testImageCreateTime},
	{"PutReplaces", testImageReplace},
	{"ListByName", testListImages},
	{"GetMissing", testGetImageMissing},
	{"Delete", testDeleteImage},
	{"Location", testImageLocation},
	{"Versions", testImageVersions},
}

func newImage(name string) *sandbox.Image {
	return &sandbox.Image{
		Name:      name,
		Source:    "pulled",
		Ref:       "docker.io/library/" + name + ":latest",
		Digest:    "sha256:0123456789abcdef",
		SizeBytes: 5 << 30,
		Env:       []string{"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", "EMPTY="},
		Cwd:       "/app",
		User:      "1000:1000",
		CreatedAt: at(0),
	}
}

func utcImage(im *sandbox.Image) *sandbox.Image {
	cp := *im
	cp.CreatedAt = utc(cp.CreatedAt)
	if cp.Location == "" {
		cp.Location = sandbox.LocationLocal
	}
	cp.Version = max(cp.Version, 1)
	return &cp
}

// testImageLocation records where an image's root filesystem is; a
// rebuilt image starts local again.
func testImageLocation(t *testing.T, st sandbox.Store) {
	ctx := t.Context()
	im := newImage("debian")
	mustPutImage(t, st, im)
	same(t, "a new image", mustGetImage(t, st, "debian").Location, sandbox.LocationLocal)
	b := uploadedBlobs()
	if err := st.SetImageLocation(ctx, "debian", sandbox.LocationUploaded, b); err != nil {
		t.Fatal(err)
	}
	want := utcImage(im)
	want.Location, want.Blobs = sandbox.LocationUploaded, b
	same(t, "uploaded", mustGetImage(t, st, "debian"), want)
	wantErr(t, st.SetImageLocation(ctx, "debian", "away", b), errdefs.ErrInvalid, `"away"`, "")
	wantErr(t, st.SetImageLocation(ctx, "none", sandbox.LocationUploaded, b), errdefs.ErrNotFound, `"none"`, "")
	mustPutImage(t, st, newImage("debian"))
	if got := mustGetImage(t, st, "debian"); got.Location != sandbox.LocationLocal || len(got.Blobs.Files) != 0 {
		t.Fatalf("a rebuilt image is %q with %+v; want local, no blobs", got.Location, got.Blobs)
	}
}

func mustPutImage(t *testing.T, st sandbox.Store, im *sandbox.Image) {
	t.Helper()
	if err := st.PutImage(t.Context(), im); err != nil {
		t.Fatalf("PutImage(%s): %v", im.Name, err)
	}
}

func mustGetImage(t *testing.T, st sandbox.Store, name string) *sandbox.Image {
	t.Helper()
	im, err := st.GetImage(t.Context(), name)
	if err != nil {
		t.Fatalf("GetImage(%s): %v", name, err)
	}
	return im
}

func testImageRoundTrip(t *testing.T, st sandbox.Store) {
	full := newImage("python")
	bare := &sandbox.Image{Name: "busybox", Source: "builtin", CreatedAt: at(1)}
	for _, im := range []*sandbox.Image{full, bare} {
		want := utcImage(im)
		mustPutImage(t, st, im)
		same(t, "image "+im.Name, mustGetImage(t, st, im.Name), want)
	}
}

func testImageCreateTime(t *testing.T, st sandbox.Store) {
	im := newImage("debian")
	im.CreatedAt = time.Time{}
	before := time.Now()
	mustPutImage(t, st, im)
	after := time.Now()
	got := mustGetImage(t, st, "debian")
	if got.CreatedAt.Before(before.Round(0)) || got.CreatedAt.After(after) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want in UTC between %v and %v", got.CreatedAt, before, after)
	}
	if !im.CreatedAt.Equal(got.CreatedAt) {
		t.Errorf("CreatedAt handed back = %v, stored %v", im.CreatedAt, got.CreatedAt)
	}
}

func testImageReplace(t *testing.T, st sandbox.Store) {
	mustPutImage(t, st, newImage("debian"))
	rebuilt := &sandbox.Image{Name: "debian", Source: "builtin", Digest: "sha256:new", SizeBytes: 1, CreatedAt: at(100)}
	mustPutImage(t, st, rebuilt)
	same(t, "replaced image", mustGetImage(t, st, "debian"), utcImage(rebuilt))
	list, err := st.ListImages(t.Context())
	if err != nil || len(list) != 1 {
		t.Errorf("ListImages after a replace = %s, %v; want one image", dump(list), err)
	}
}

func testListImages(t *testing.T, st sandbox.Store) {
	list, err := st.ListImages(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("ListImages on an empty store = %s, %v; want none", dump(list), err)
	}
	for i, name := range []string{"python", "alpine", "node", "debian"} {
		im := newImage(name)
		im.CreatedAt = at(-i) // newest first by time: the list must not follow it
		mustPutImage(t, st, im)
	}
	list, err = st.ListImages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range list {
		names = append(names, im.Name)
	}
	same(t, "names listed", names, []string{"alpine", "debian", "node", "python"})
	same(t, "first listed", list[0], mustGetImage(t, st, "alpine"))
}

func testGetImageMissing(t *testing.T, st sandbox.Store) {
	_, err := st.GetImage(t.Context(), "nope")
	wantErr(t, err, errdefs.ErrNotFound, `image "nope" not found`, "den image ls")
}

func testDeleteImage(t *testing.T, st sandbox.Store) {
	mustPutImage(t, st, newImage("debian"))
	mustPutImage(t, st, newImage("python"))
	if err := st.DeleteImage(t.Context(), "debian"); err != nil {
		t.Fatalf("DeleteImage: %v", err)
	}
	if _, err := st.GetImage(t.Context(), "debian"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetImage after delete = %v, want not found", err)
	}
	mustGetImage(t, st, "python")
	wantErr(t, st.DeleteImage(t.Context(), "debian"), errdefs.ErrNotFound, `image "debian" not found`, "")
	// The name can be used again.
	mustPutImage(t, st, newImage("debian"))
}

// testImageVersions keeps older versions of an image when a newer one is
// put, finds each, and removes them one at a time or all with the image.
func testImageVersions(t *testing.T, st sandbox.Store) {
	ctx := t.Context()
	v1 := newImage("debian")
	mustPutImage(t, st, v1)
	same(t, "first version", mustGetImage(t, st, "debian").Version, 1)
	v2 := newImage("debian")
	v2.Version, v2.Digest, v2.CreatedAt = 2, "sha256:v2", at(10)
	mustPutImage(t, st, v2)
	v3 := newImage("debian")
	v3.Version, v3.Digest, v3.CreatedAt = 3, "sha256:v3", at(20)
	mustPutImage(t, st, v3)
	mustPutImage(t, st, newImage("python"))

	same(t, "newest", mustGetImage(t, st, "debian"), utcImage(v3))
	for _, want := range []*sandbox.Image{v1, v2, v3} {
		got, err := st.GetImageVersion(ctx, "debian", want.Version)
		if err != nil {
			t.Fatalf("GetImageVersion(debian, %d): %v", want.Version, err)
		}
		same(t, "a version", got, utcImage(want))
	}
	_, err := st.GetImageVersion(ctx, "debian", 4)
	wantErr(t, err, errdefs.ErrNotFound, `image "debian" has no version 4`, "den image ls")
	list, err := st.ListImages(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("ListImages = %s, %v; want the newest of two images", dump(list), err)
	}
	older, err := st.ListImageVersions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "older versions", older, []*sandbox.Image{utcImage(v1), utcImage(v2)})
	if older, err = st.ListImageVersions(ctx, "python"); err != nil || len(older) != 0 {
		t.Errorf("older versions of python = %s, %v; want none", dump(older), err)
	}

	// Putting the newest version again replaces it and keeps the rest.
	v3.SizeBytes = 7
	mustPutImage(t, st, v3)
	if older, err = st.ListImageVersions(ctx, "debian"); err != nil || len(older) != 2 {
		t.Errorf("older versions after a replace = %s, %v; want 2", dump(older), err)
	}

	if err := st.DeleteImageVersion(ctx, "debian", 1); err != nil {
		t.Fatalf("DeleteImageVersion: %v", err)
	}
	wantErr(t, st.DeleteImageVersion(ctx, "debian", 1), errdefs.ErrNotFound, `image "debian" has no version 1`, "")
	wantErr(t, st.DeleteImageVersion(ctx, "debian", 3), errdefs.ErrNotFound, `image "debian" has no version 3`, "")
	if older, err = st.ListImageVersions(ctx, "debian"); err != nil || len(older) != 1 || older[0].Version != 2 {
		t.Errorf("older versions after deleting one = %s, %v; want version 2", dump(older), err)
	}

	if err := st.DeleteImage(ctx, "debian"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetImageVersion(ctx, "debian", 2); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an older version after DeleteImage = %v, want not found", err)
	}
}
