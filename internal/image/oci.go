package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// The platform den runs: the image picked from a multi-platform index.
const platformOS = "linux"

const platformArch = runtime.GOARCH

func platformName() string { return platformOS + "/" + platformArch }

// applyImage writes img's layers in order onto root, checking each
// against its diff id. sourceErr classifies an error reading a layer.
func (m *Manager) applyImage(ctx context.Context, img v1.Image, root string, progress func(Progress), sourceErr func(error) error) (*sandbox.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, sourceErr(fmt.Errorf("reading the image config: %w", err))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, sourceErr(fmt.Errorf("reading the image manifest: %w", err))
	}
	if len(layers) != len(cf.RootFS.DiffIDs) {
		return nil, errdefs.Invalid("the image has %d layers but its config lists %d", len(layers), len(cf.RootFS.DiffIDs))
	}
	a, err := newApplier(root, applyOptions{chown: os.Geteuid() == 0, whiteouts: true, maxBytes: m.cfg.MaxImageBytes})
	if err != nil {
		return nil, err
	}
	defer a.Close()
	n := len(layers)
	for i, l := range layers {
		progress(Progress{Phase: "extract", Message: fmt.Sprintf("layer %d of %d", i+1, n), Current: int64(i), Total: int64(n)})
		if err := applyLayer(ctx, a, l, cf.RootFS.DiffIDs[i], sourceErr); err != nil {
			return nil, fmt.Errorf("layer %d of %d: %w", i+1, n, err)
		}
	}
	progress(Progress{Phase: "extract", Message: "done", Current: int64(n), Total: int64(n)})
	if a.skipped > 0 {
		m.log.Debug("skipped device nodes and other special files", logCount, a.skipped)
	}
	if err := keepTmpOnDisk(root); err != nil {
		return nil, fmt.Errorf("keeping /tmp on disk: %w", hostErr(err))
	}
	return imageRecord(cf), nil
}

func applyLayer(ctx context.Context, a *applier, l v1.Layer, want v1.Hash, sourceErr func(error) error) error {
	if want.Algorithm != "sha256" {
		return errdefs.Invalid("unsupported layer digest %q", want)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return sourceErr(err)
	}
	defer rc.Close()
	h := sha256.New()
	src := io.TeeReader(&classifyingReader{r: rc, classify: sourceErr}, h)
	if err := a.Apply(ctx, src); err != nil {
		return err
	}
	// The tar's end-of-archive padding counts toward the digest.
	if _, err := io.Copy(io.Discard, ctxReader{ctx: ctx, r: src}); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return errdefs.Invalid("the layer's content does not match its digest %s", want)
	}
	return nil
}

// classifyingReader gives errors of a layer source their class.
type classifyingReader struct {
	r        io.Reader
	classify func(error) error
}

func (c *classifyingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = c.classify(err)
	}
	return n, err
}

// imageRecord takes what den keeps of an image config.
func imageRecord(cf *v1.ConfigFile) *sandbox.Image {
	env := cf.Config.Env
	hasPath := false
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			hasPath = true
		}
	}
	if !hasPath {
		env = append([]string{defaultPath}, env...)
	}
	return &sandbox.Image{Env: env, Cwd: cf.Config.WorkingDir, User: cf.Config.User}
}

// keepTmpOnDisk makes sure /tmp is a directory holding a file: an empty
// /tmp becomes an in-memory tmpfs under gVisor, whose files would live only
// in memory. A /tmp that is a symlink is left alone.
func keepTmpOnDisk(root string) error {
	tmp := filepath.Join(root, "tmp")
	fi, err := os.Lstat(tmp)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := makeDirs(root, []dirSpec{{"tmp", 0o1777}}); err != nil {
			return err
		}
	case err != nil:
		return err
	case !fi.IsDir():
		return nil
	}
	entries, err := os.ReadDir(tmp)
	if err != nil || len(entries) > 0 {
		return err
	}
	f, err := os.OpenFile(filepath.Join(tmp, ".keep"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("writing /tmp/.keep: %w", err)
	}
	return f.Close()
}

// pickImage chooses the one image in idx: the only one, or the one for
// den's platform. Nested indexes are followed; attestations are ignored.
func pickImage(idx v1.ImageIndex, what string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, errdefs.Invalid("reading the index of %s: %v", what, hostErr(err))
	}
	var cands []v1.Descriptor
	for _, d := range im.Manifests {
		if (d.MediaType.IsImage() || d.MediaType.IsIndex()) && !isAttestation(d) {
			cands = append(cands, d)
		}
	}
	if len(cands) > 1 {
		var match []v1.Descriptor
		for _, d := range cands {
			if d.Platform != nil && d.Platform.OS == platformOS && d.Platform.Architecture == platformArch {
				match = append(match, d)
			}
		}
		if len(match) == 0 {
			return nil, chooseError(what, cands)
		}
		cands = match[:1]
	}
	if len(cands) == 0 {
		return nil, errdefs.Invalid("%s holds no image", what)
	}
	d := cands[0]
	if d.MediaType.IsIndex() {
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, errdefs.Invalid("reading the index of %s: %v", what, hostErr(err))
		}
		return pickImage(child, what)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, errdefs.Invalid("reading the image in %s: %v", what, hostErr(err))
	}
	return img, nil
}

func isAttestation(d v1.Descriptor) bool {
	return d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" ||
		(d.Platform != nil && d.Platform.OS == "unknown")
}

func chooseError(what string, cands []v1.Descriptor) error {
	var names []string
	platforms := true
	for _, d := range cands {
		n := d.Annotations["org.opencontainers.image.ref.name"]
		if n == "" {
			n = d.Annotations["io.containerd.image.name"]
		}
		if n == "" {
			n = d.Digest.String()
		}
		if d.Platform != nil {
			n += " (" + d.Platform.String() + ")"
		} else {
			platforms = false
		}
		names = append(names, n)
	}
	if platforms {
		return errdefs.WithHint(errdefs.Invalid("%s has no %s image; it has: %s", what, platformName(), strings.Join(names, ", ")),
			"den runs "+platformName()+" images only")
	}
	return errdefs.WithHint(errdefs.Invalid("%s holds %d images: %s", what, len(cands), strings.Join(names, ", ")),
		"import one image per archive, e.g. `docker save IMAGE -o FILE`")
}
