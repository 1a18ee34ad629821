package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// Image builds keep packages under the data dir unless told a place,
// which must be absolute.
func TestImageCacheDir(t *testing.T) {
	c := Default()
	c.DataDir = "/srv/den"
	if got := c.ImageCacheDir(); got != "/srv/den/cache/apt" {
		t.Errorf("default image cache %q, want /srv/den/cache/apt", got)
	}
	c.ImageCache = "/var/cache/den-apt"
	if got := c.ImageCacheDir(); got != "/var/cache/den-apt" {
		t.Errorf("image cache %q, want the one given", got)
	}
	// Validate looks for the binaries: any file will do.
	c.Runsc, c.Init = os.Args[0], os.Args[0]
	if err := c.Validate(); err != nil {
		t.Fatalf("an absolute --image-cache: %v", err)
	}
	c.ImageCache = "cache/apt"
	if err := c.Validate(); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "config image-cache") {
		t.Errorf("a relative --image-cache: %v, want invalid image-cache", err)
	}
}
