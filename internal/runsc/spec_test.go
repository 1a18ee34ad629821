package runsc

import (
	"slices"
	"testing"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

func TestSpecHash(t *testing.T) {
	r := &Runtime{cfg: Config{InitDir: "/usr/lib/den/init"}}
	base := sandbox.Instance{
		ID: "sb1-g1", Hostname: "one", Rootfs: "/pool/sb1", Netns: "/run/den/netns/den-sb1",
		Env: []string{"DEN_INIT_TOKEN=aaaa"}, CPUs: 1, MemoryBytes: 256 << 20,
	}
	want := r.SpecHash(base)
	if len(want) != 64 {
		t.Fatalf("hash %q is not sha256 hex", want)
	}

	// What restore lets change leaves the hash alone.
	other := sandbox.Instance{
		ID: "sb2-g7", Hostname: "two", Rootfs: "/elsewhere/sb2", Netns: "/run/den/netns/den-sb2",
		Env: []string{"DEN_INIT_TOKEN=bbbb", "X=1"}, CPUs: 2, MemoryBytes: 1 << 30,
	}
	if got := r.SpecHash(other); got != want {
		t.Errorf("instances differing only in per-instance parts: %s != %s", got, want)
	}
	moved := &Runtime{cfg: Config{InitDir: "/opt/den/init"}}
	if got := moved.SpecHash(base); got != want {
		t.Errorf("another den-init directory (a mount source) changed the hash")
	}

	// What restore validates changes it.
	changes := map[string]func(*ociSpec){
		"mount destination": func(s *ociSpec) { s.Mounts[len(s.Mounts)-1].Destination = "/.den2" },
		"mount options":     func(s *ociSpec) { s.Mounts[0].Options = []string{"ro"} },
		"mount type":        func(s *ociSpec) { s.Mounts[1].Type = "bind" },
		"args":              func(s *ociSpec) { s.Process.Args = append(s.Process.Args, "-v") },
		"cwd":               func(s *ociSpec) { s.Process.Cwd = "/root" },
		"user":              func(s *ociSpec) { s.Process.User.UID = 1000 },
		"capabilities":      func(s *ociSpec) { s.Process.Capabilities.Bounding = s.Process.Capabilities.Bounding[1:] },
		"rlimits":           func(s *ociSpec) { s.Process.Rlimits[0].Soft = 1024 },
		"namespaces":        func(s *ociSpec) { s.Linux.Namespaces = s.Linux.Namespaces[1:] },
		"annotations":       func(s *ociSpec) { s.Annotations = map[string]string{"dev.gvisor.internal.cpufeatures": "sse2"} },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s := r.spec(base)
			if hashSpec(s) != want {
				t.Fatal("hashSpec and SpecHash disagree")
			}
			change(&s)
			if hashSpec(s) == want {
				t.Errorf("changing the %s kept the hash", name)
			}
		})
	}
}

func TestSpecViews(t *testing.T) {
	r := &Runtime{cfg: Config{InitDir: "/usr/lib/den/init"}}
	base := sandbox.Instance{ID: "sb1-g1", Rootfs: "/pool/sb1"}
	withView := base
	withView.Views = []sandbox.ViewMount{{Source: "/pool/peers/sb1-v1", Destination: "/peers/coder"}}
	spec := r.spec(withView)
	m := spec.Mounts[len(spec.Mounts)-1]
	if m.Destination != "/peers/coder" || m.Source != "/pool/peers/sb1-v1" || m.Type != "bind" || !slices.Contains(m.Options, "ro") {
		t.Fatalf("view mount = %+v, want a read-only bind of the view at its mount point", m)
	}
	if r.SpecHash(withView) == r.SpecHash(base) {
		t.Error("a view's mount point did not change the hash: a restore without it would be let through")
	}
	refreshed := withView
	refreshed.Views = []sandbox.ViewMount{{Source: "/pool/peers/sb1-v2", Destination: "/peers/coder"}}
	if r.SpecHash(refreshed) != r.SpecHash(withView) {
		t.Error("a refreshed view (another source, same mount point) changed the hash")
	}
}

// Instances of a den-init placed in the root filesystem have no host
// mounts for it or the resolver; the versions from before keep the very
// spec they had, or their memory images would not restore (the hashes
// are those the spec had before r- versions existed).
func TestSpecInitLayout(t *testing.T) {
	r := &Runtime{cfg: Config{InitDir: "/usr/lib/den/init", ResolvConf: "/var/lib/den/resolv.conf"}}
	if got, want := r.SpecHash(sandbox.Instance{ID: "sb1-g1", Init: "v-0123456789abcdef"}), "28b5a5841b6eb9da3bab30702993b4a2b55d16b71d055a52e86d4ba4ec9ab82b"; got != want {
		t.Errorf("a v- instance's spec hash changed: %s, was %s", got, want)
	}
	noResolver := &Runtime{cfg: Config{InitDir: "/usr/lib/den/init"}}
	if got, want := noResolver.SpecHash(sandbox.Instance{ID: "sb1-g1"}), "2a7e4ce032527fcb7030ba337fa41a2e40581943f3e8b670aca6da15af4b3416"; got != want {
		t.Errorf("a legacy instance's spec hash changed: %s, was %s", got, want)
	}
	inRoot := r.spec(sandbox.Instance{ID: "sb1-g1", Init: "r-0123456789abcdef"})
	for _, m := range inRoot.Mounts {
		if m.Type == "bind" {
			t.Errorf("an r- instance has a host mount: %+v", m)
		}
	}
	if !slices.ContainsFunc(inRoot.Mounts, func(m ociMount) bool { return m.Destination == guest.SecretDir }) {
		t.Error("an r- instance lost its secrets mount")
	}
	if r.SpecHash(sandbox.Instance{Init: "r-0123456789abcdef"}) == r.SpecHash(sandbox.Instance{Init: "v-0123456789abcdef"}) {
		t.Error("the two layouts hash the same: an image of one would be let into the other")
	}
}
