package integration

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// entry is one member of a test layer.
type entry struct {
	name, body, link string
	mode             int64
	typ              byte
}

func layerTar(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Mode: mode, Typeflag: typ, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// dockerSave builds a `docker save` archive of one image from layers.
func dockerSave(t *testing.T, env []string, cwd string, layers ...[]byte) []byte {
	t.Helper()
	var diffIDs, names []string
	files := map[string][]byte{}
	for _, l := range layers {
		sum := sha256.Sum256(l)
		diffIDs = append(diffIDs, "sha256:"+hex.EncodeToString(sum[:]))
		name := hex.EncodeToString(sum[:]) + "/layer.tar"
		names = append(names, name)
		files[name] = l
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": env, "WorkingDir": cwd},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	csum := sha256.Sum256(config)
	configName := hex.EncodeToString(csum[:]) + ".json"
	files[configName] = config
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{"test/app:latest"}, "Layers": names}})
	files["manifest.json"] = manifest

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range append([]string{"manifest.json", configName}, names...) {
		b := files[name]
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	return buf.Bytes()
}

// busyboxLayer is a base layer with the host's static busybox.
func busyboxLayer(t *testing.T, extra ...entry) []byte {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("no /bin/busybox on the host")
	}
	es := []entry{
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/busybox", body: string(bb), mode: 0o755},
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	}
	for _, a := range []string{"sh", "cat", "ls", "echo", "id", "pwd", "test"} {
		es = append(es, entry{name: "bin/" + a, link: "busybox", typ: tar.TypeSymlink})
	}
	return layerTar(t, append(es, extra...))
}

func TestImageImportDockerSave(t *testing.T) {
	d := startDend(t)
	base := busyboxLayer(t,
		entry{name: "etc/motd", body: "base motd\n"},
		entry{name: "etc/secret", body: "should be deleted\n"},
		entry{name: "opt/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "opt/old/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "opt/old/gone.txt", body: "lower\n"},
	)
	top := layerTar(t, []entry{
		{name: "etc/.wh.secret", body: ""},
		{name: "opt/old/", typ: tar.TypeDir, mode: 0o755},
		{name: "opt/old/.wh..wh..opq", body: ""},
		{name: "opt/old/new.txt", body: "upper\n"},
		{name: "etc/motd", body: "top motd\n"},
		{name: "etc/motd.link", link: "motd", typ: tar.TypeSymlink},
	})
	archive := dockerSave(t, []string{"PATH=/bin", "APP_MODE=imported"}, "/opt", base, top)

	ctx := ctxT(t, 2*time.Minute)
	var phases []string
	im, err := d.c.ImportImage(ctx, "app", bytes.NewReader(archive), func(p api.Progress) { phases = append(phases, p.Phase) })
	if err != nil {
		t.Fatal(err)
	}
	if im.Name != "app" || im.Source != "imported" || im.Cwd != "/opt" {
		t.Fatalf("imported image record: %+v", im)
	}
	if len(phases) == 0 {
		t.Fatalf("no progress reported")
	}
	// Importing a taken name makes its next version.
	if again, err := d.c.ImportImage(ctx, "app", bytes.NewReader(archive), nil); err != nil || again.Version != 2 {
		t.Fatalf("importing a taken name: %+v, %v; want version 2", again, err)
	}

	d.create("from-import", func(r *api.CreateSandboxRequest) { r.Image = "app" })
	out := d.mustSh("from-import", `cat /etc/motd /etc/motd.link; ls /opt/old; test -e /etc/secret && echo secret-present; echo "$APP_MODE $(pwd)"`)
	want := "top motd\ntop motd\nnew.txt\nimported /opt\n"
	if out != want {
		t.Fatalf("inside imported image:\n%q\nwant\n%q", out, want)
	}

	list, err := d.c.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "app") {
		t.Fatalf("image list %v lacks app", names)
	}
	if err := d.c.RemoveImage(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	// The sandbox made from it does not depend on it.
	if got := d.mustSh("from-import", "cat /etc/motd"); got != "top motd\n" {
		t.Fatalf("after image rm: %q", got)
	}
	if err := d.c.RemoveImage(ctx, "app"); !client.IsNotFound(err) {
		t.Fatalf("removing a removed image: %v", err)
	}
}

// The default image is Debian, built on first use; packages installed in
// it stay installed across stop/start. No network: the package is a .deb
// the test builds and copies in. Its build starts from an empty package
// cache (the other tests share one): the cold path, whose downloads fill
// the cache, and a build from scratch, not a copy of the debian image
// another test's build kept there.
func TestDebianDefaultImageKeepsPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the debian image (about a minute)")
	}
	// Its dend has the SSH gateway: VS Code Remote-SSH is tried on the
	// image below, on alice's sandbox.
	cache := t.TempDir()
	r := newSSHRig(t, "--image-cache", cache)
	d := r.d
	ctx := ctxT(t, 10*time.Minute)
	sb, err := r.alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "deb"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Image != "debian" {
		t.Fatalf("default image %q, want debian", sb.Image)
	}
	if debs, _ := filepath.Glob(filepath.Join(cache, "*.deb")); len(debs) < 50 {
		t.Errorf("the build left %d packages in the empty cache it was given, want all it downloaded", len(debs))
	}
	if got := d.mustSh("deb", "python3 -c 'print(6*7)'; git --version | cut -d' ' -f1; . /etc/os-release; echo $VERSION_CODENAME"); got != "42\ngit\nbookworm\n" {
		t.Fatalf("debian image: %q", got)
	}
	deb := buildDeb(t, "den-test-pkg", "/usr/bin/den-test-hello", "#!/bin/sh\necho hello from a package\n")
	if err := d.c.WriteFile(ctx, "deb", "/root/pkg.deb", 0o644, bytes.NewReader(deb)); err != nil {
		t.Fatal(err)
	}
	d.mustSh("deb", "dpkg -i /root/pkg.deb >/dev/null")
	if _, err := d.c.StopSandbox(ctx, "deb"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.StartSandbox(ctx, "deb"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("deb", "dpkg-query -W -f='${Status}' den-test-pkg; echo; den-test-hello"); got != "install ok installed\nhello from a package\n" {
		t.Fatalf("package after stop/start: %q", got)
	}
	r.addKey("alice")
	vscodeRemoteSSH(t, r, "deb")
}

// buildDeb makes a tiny Debian package holding one executable.
func buildDeb(t *testing.T, pkg, path, script string) []byte {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(root+"/DEBIAN", 0o755))
	must(os.WriteFile(root+"/DEBIAN/control", []byte("Package: "+pkg+"\nVersion: 1.0\nArchitecture: all\nMaintainer: den tests <tests@den.invalid>\nDescription: den test package\n"), 0o644))
	must(os.MkdirAll(root+"/"+strings.TrimPrefix(dirOf(path), "/"), 0o755))
	must(os.WriteFile(root+path, []byte(script), 0o755))
	out := t.TempDir() + "/pkg.deb"
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	must(err)
	return b
}

func dirOf(p string) string { return p[:strings.LastIndex(p, "/")] }
