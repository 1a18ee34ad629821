#!/usr/bin/env bash
# The previous release's package, for scripts/hostvm-upgrade.sh: `make
# dist-prev` builds it into dist/prev/ (its .deb, tarball and SHA256SUMS)
# from `git archive` of its tag, with that release's own Makefile, so
# what it installs is what its users installed. PREV names the tag;
# by default the newest v* tag older than HEAD, or HEAD's own when it
# has none older. Run it on the host, before run-in-vm copies the
# checkout into the VM.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'dist-prev: %s\n' "$*" >&2; }

prev=${PREV:-}
if [ -z "$prev" ]; then
	if ! prev=$(git describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null); then
		say "this checkout has no release tag (v*): fetch the tags (git fetch --tags) or set PREV=TAG"
		exit 1
	fi
	if [ "$(git describe --tags --exact-match --match 'v*' HEAD 2>/dev/null)" = "$prev" ] &&
		older=$(git describe --tags --abbrev=0 --match 'v*' HEAD^ 2>/dev/null); then
		prev=$older
	fi
fi
git rev-parse -q --verify "$prev^{commit}" >/dev/null || { say "no such tag or commit: $prev"; exit 1; }

out=$PWD/dist/prev
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$prev" | tar -x -C "$tmp"
rm -rf "$out"
mkdir -p "$out"
say "building $prev's release into dist/prev/"
# Its Makefile dates the release from git, which an archive lacks: the
# files are dated now, and nothing else differs from the tag's release.
make -C "$tmp" dist VERSION="$prev" DIST="$out" >"$tmp/build.log" 2>&1 ||
	{ tail -30 "$tmp/build.log" >&2; say "building $prev failed"; exit 1; }
ls "$out"/den_*_amd64.deb
