#!/usr/bin/env bash
# A release on a fresh host, both ways a user gets it, in one VM: after
# `make dist dist-prev`, `../shared/hostvm/run-in-vm scripts/hostvm-release.sh`
# runs scripts/hostvm-deb.sh (a first install of this checkout's package,
# `den create x` on the default image, a reinstall, removal) on the fresh
# host; then reboots, clears what it left (its sandboxes outlive dend by
# design) and runs scripts/hostvm-upgrade.sh (the previous release's
# package, its sandboxes, an upgrade to this one, a rollback).
set -uo pipefail
[ -f Makefile ] || cd "$(dirname "$0")/.." || exit 1
case "${HOSTVM_BOOT:-1}" in
1)
	echo "== the package on a fresh host"
	bash scripts/hostvm-deb.sh
	echo $? >/root/hostvm-deb.rc
	exit 100 # reboot: the upgrade starts from a clean slate
	;;
*)
	# What the first half left: its sandboxes' engines died with the
	# reboot; their files, the data directory and the settings go.
	umount /var/lib/den/pool 2>/dev/null
	losetup -D
	rm -rf /var/lib/den /etc/den /run/den
	echo "== an upgrade from the previous release"
	bash scripts/hostvm-upgrade.sh
	up=$?
	deb=$(cat /root/hostvm-deb.rc 2>/dev/null || echo 1)
	echo "HOSTVM-RELEASE: deb=$deb upgrade=$up"
	[ "$deb" = 0 ] && [ "$up" = 0 ]
	;;
esac
