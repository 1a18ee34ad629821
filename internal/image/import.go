package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// Import makes image name from r: a `docker save` archive or an OCI
// image-layout archive, plain or gzipped. The archive must hold one image,
// or one for den's platform. When name exists, this is its next version.
func (m *Manager) Import(ctx context.Context, name string, r io.Reader, progress func(Progress)) (*sandbox.Image, error) {
	if err := specs.ValidateName("image", name); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	unlock, err := m.locks.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	work, err := os.MkdirTemp(m.cfg.TempDir, "den-import-")
	if err != nil {
		return nil, fmt.Errorf("importing image %q: making a work directory: %w", name, hostErr(err))
	}
	defer os.RemoveAll(work)

	im, err := m.importFrom(ctx, name, r, work, progress)
	if err != nil {
		return nil, fmt.Errorf("importing image %q: %w", name, err)
	}
	return im, nil
}

func (m *Manager) importFrom(ctx context.Context, name string, r io.Reader, work string, progress func(Progress)) (*sandbox.Image, error) {
	archive := filepath.Join(work, "archive.tar")
	if err := spool(ctx, r, archive, progress); err != nil {
		return nil, err
	}
	src, err := openArchive(ctx, archive, work)
	if err != nil {
		return nil, err
	}
	return m.install(ctx, name, func(ctx context.Context, root string) (*sandbox.Image, error) {
		im, err := m.applyImage(ctx, src.img, root, progress, archiveError)
		if err != nil {
			return nil, err
		}
		im.Source, im.Ref, im.Digest = SourceImported, src.ref, src.digest
		return im, nil
	})
}

// archiveError classifies a failure to read part of an archive: the
// archive is damaged.
func archiveError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errdefs.Class(err) != nil {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.Invalid("damaged archive: a file it refers to is missing")
	}
	return errdefs.Invalid("damaged archive: %v", hostErr(err))
}

// spool copies the archive to file, ungzipping it if need be, since the
// readers of both formats need to seek.
func spool(ctx context.Context, r io.Reader, file string, progress func(Progress)) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("receiving the archive: %w", hostErr(err))
	}
	defer f.Close()
	br := bufio.NewReaderSize(ctxReader{ctx: ctx, r: r}, 1<<16)
	src := &trackReader{r: br}
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return archiveError(err)
		}
		src.r = zr
	}
	n, err := io.Copy(f, &progressReader{r: src, phase: "read", progress: progress})
	switch {
	case src.err != nil:
		return archiveError(src.err)
	case errors.Is(err, unix.ENOSPC):
		return errdefs.TooLarge("no space left to receive the archive")
	case err != nil:
		return fmt.Errorf("receiving the archive: %w", hostErr(err))
	case n == 0:
		return errdefs.Invalid("the archive is empty")
	}
	return f.Close()
}

// archiveImage is the image found in an archive.
type archiveImage struct {
	img         v1.Image
	ref, digest string
}

// openArchive finds the image in the tar file archive. An OCI layout is
// unpacked into work first.
func openArchive(ctx context.Context, archive, work string) (*archiveImage, error) {
	top, err := topLevelNames(archive)
	if err != nil {
		return nil, err
	}
	switch {
	case top["index.json"]:
		return openLayout(ctx, archive, filepath.Join(work, "layout"))
	case top["manifest.json"]:
		return openDockerSave(archive)
	}
	return nil, errdefs.WithHint(errdefs.Invalid("the archive is neither a `docker save` archive nor an OCI image layout"),
		"make one with `docker save IMAGE -o FILE` or `skopeo copy IMAGE oci-archive:FILE`")
}

// topLevelNames lists the files at the top of a tar file.
func topLevelNames(archive string) (map[string]bool, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, hostErr(err)
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, errdefs.Invalid("the archive is not a valid tar file: %v", err)
		}
		if p := path.Clean(hdr.Name); !strings.Contains(p, "/") {
			names[p] = true
		}
	}
}

func openLayout(ctx context.Context, archive, dir string) (*archiveImage, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, hostErr(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		return nil, hostErr(err)
	}
	defer f.Close()
	// The same careful extractor as for layers, without their whiteouts.
	a, err := newApplier(dir, applyOptions{})
	if err != nil {
		return nil, err
	}
	err = a.Apply(ctx, f)
	a.Close()
	if err != nil {
		return nil, fmt.Errorf("unpacking the OCI layout: %w", err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, errdefs.Invalid("reading the OCI layout: %v", hostErr(err))
	}
	img, err := pickImage(idx, "the archive")
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, errdefs.Invalid("reading the image manifest: %v", hostErr(err))
	}
	return &archiveImage{img: img, ref: layoutRef(idx, digest), digest: digest.String()}, nil
}

// layoutRef is the name an OCI layout gives the image, if any.
func layoutRef(idx v1.ImageIndex, digest v1.Hash) string {
	im, err := idx.IndexManifest()
	if err != nil {
		return ""
	}
	for _, d := range im.Manifests {
		for _, k := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
			if v := d.Annotations[k]; v != "" && (d.Digest == digest || len(im.Manifests) == 1) {
				return v
			}
		}
	}
	return ""
}

// openDockerSave reads a `docker save` archive. Its digest is the config's,
// which is what docker shows as the image ID: such an archive has no
// registry manifest.
func openDockerSave(archive string) (*archiveImage, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(archive) }
	mf, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, errdefs.Invalid("reading manifest.json: %v", hostErr(err))
	}
	if len(mf) != 1 {
		var names []string
		for _, d := range mf {
			names = append(names, d.RepoTags...)
		}
		return nil, errdefs.WithHint(errdefs.Invalid("the archive holds %d images: %s", len(mf), strings.Join(names, ", ")),
			"import one image per archive, e.g. `docker save IMAGE -o FILE`")
	}
	img, err := tarball.Image(opener, nil)
	if err != nil {
		return nil, errdefs.Invalid("reading the docker archive: %v", hostErr(err))
	}
	digest, err := img.ConfigName()
	if err != nil {
		return nil, errdefs.Invalid("reading the image config: %v", hostErr(err))
	}
	var ref string
	if len(mf[0].RepoTags) > 0 {
		ref = mf[0].RepoTags[0]
	}
	return &archiveImage{img: img, ref: ref, digest: digest.String()}, nil
}

// progressReader reports bytes read, every 4 MiB.
type progressReader struct {
	r        io.Reader
	phase    string
	progress func(Progress)
	n, last  int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.n-p.last >= 4<<20 || (err == io.EOF && p.n != p.last) {
		p.last = p.n
		p.progress(Progress{Phase: p.phase, Current: p.n})
	}
	return n, err
}
