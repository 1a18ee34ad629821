package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// runtimeDepends are the Debian 12 packages dend runs: btrfs for the
// storage pool, nftables and iproute2 for sandboxes' networks,
// util-linux for loop devices and mounts, mmdebstrap and busybox-static
// for the built-in images (debian, den create's default, and busybox),
// ca-certificates for pulling images (scripts/setup.sh installs the
// same on a host built from source).
var runtimeDepends = []string{"btrfs-progs", "nftables", "iproute2", "util-linux", "mmdebstrap", "busybox-static", "ca-certificates"}

// Maintainer scripts, as debhelper writes them for a package with one
// systemd unit: enable it on install, and start it (restart it on an
// upgrade: sandboxes outlive dend) only on a host run by systemd; stop
// it on remove. The data directory, /var/lib/den, is never touched, not
// even by a purge: it holds the users' sandboxes.
const (
	postinst = `#!/bin/sh
set -e
if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ]; then
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		# Removes only a mask left by a removal of the package.
		deb-systemd-helper unmask 'dend.service' >/dev/null || true
		# was-enabled is true on a first install: enable the unit.
		if deb-systemd-helper --quiet was-enabled 'dend.service'; then
			deb-systemd-helper enable 'dend.service' >/dev/null || true
		else
			deb-systemd-helper update-state 'dend.service' >/dev/null || true
		fi
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then action=restart; else action=start; fi
		deb-systemd-invoke "$action" 'dend.service' >/dev/null || true
	fi
fi
`
	prerm = `#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
	deb-systemd-invoke stop 'dend.service' >/dev/null || true
fi
`
	postrm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = "remove" ] && [ -x /usr/bin/deb-systemd-helper ]; then
	deb-systemd-helper mask 'dend.service' >/dev/null || true
fi
if [ "$1" = "purge" ] && [ -x /usr/bin/deb-systemd-helper ]; then
	deb-systemd-helper purge 'dend.service' >/dev/null || true
	deb-systemd-helper unmask 'dend.service' >/dev/null || true
fi
`
)

// writeDeb builds the Debian package of files at dst with nfpm, writing
// its maintainer scripts into dir.
func writeDeb(dst string, o options, list []file, dir string) error {
	scripts, err := writeScripts(dir)
	if err != nil {
		return err
	}
	var contents files.Contents
	for _, f := range list {
		c := &files.Content{
			Source:      f.src,
			Destination: f.dst,
			FileInfo:    &files.ContentFileInfo{Mode: f.mode, MTime: o.date},
		}
		if f.conf {
			c.Type = files.TypeConfig
		}
		contents = append(contents, c)
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "den",
		Arch:          "amd64",
		Platform:      "linux",
		Version:       debVersion(o.version, o.date),
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    o.maintainer,
		Homepage:      "https://github.com/den-dev/den",
		Description: "durable gVisor sandboxes for AI agents\n" +
			"dend runs Linux sandboxes under gVisor that pause, hibernate, checkpoint\n" +
			"and fork, and serves den's API; den is its command-line client.",
		MTime: o.date,
		Overridables: nfpm.Overridables{
			Depends:  runtimeDepends,
			Contents: contents,
			Scripts:  scripts,
			Umask:    0o022,
		},
	})
	if err := info.Validate(); err != nil {
		return fmt.Errorf("checking the package's description: %w", err)
	}
	return writeFile(dst, func(out io.Writer) error {
		if err := deb.Default.Package(info, out); err != nil {
			return fmt.Errorf("building the Debian package: %w", err)
		}
		return nil
	})
}

func writeScripts(dir string) (nfpm.Scripts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nfpm.Scripts{}, fmt.Errorf("making %s: %w", dir, err)
	}
	s := nfpm.Scripts{
		PostInstall: filepath.Join(dir, "postinst"),
		PreRemove:   filepath.Join(dir, "prerm"),
		PostRemove:  filepath.Join(dir, "postrm"),
	}
	for p, body := range map[string]string{s.PostInstall: postinst, s.PreRemove: prerm, s.PostRemove: postrm} {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			return nfpm.Scripts{}, fmt.Errorf("writing %s: %w", filepath.Base(p), err)
		}
	}
	return s, nil
}
