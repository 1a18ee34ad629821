package integration

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// cliDocRig gives docs/cli.md a user's own image: app.tar as `docker
// save` writes it (busybox and a file /etc/app), and the same image as
// team/app:1 in a registry on loopback, over plain HTTP, at the
// examples' 127.0.0.1:5000.
func cliDocRig(t *testing.T, _ docServer) docRig {
	archive := dockerSave(t, []string{"PATH=/bin"}, "/", busyboxLayer(t, entry{name: "etc/app", body: "app 1\n"}))
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive)), nil }, nil)
	if err != nil {
		t.Fatalf("reading the docker save archive: %v", err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	ref, err := name.ParseReference(host+"/team/app:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing team/app:1 to the test's registry: %v", err)
	}
	return docRig{
		files:   map[string][]byte{"app.tar": archive},
		replace: []string{"127.0.0.1:5000", host},
	}
}

// upgradesDocRig keeps docs/upgrades.md's back-up of the store out of
// the host's /root.
func upgradesDocRig(t *testing.T, _ docServer) docRig {
	return docRig{replace: []string{"/root/", t.TempDir() + "/"}}
}
