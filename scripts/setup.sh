#!/usr/bin/env bash
# Installs what den needs on a Debian 12 host: a few Debian packages and the
# pinned, version-stamped, static runsc. Idempotent, and quick when all is
# already there. Run as root.
set -euo pipefail

RUNSC_MODULE_VERSION="v0.0.0-20260905035102-160fafc42237"
RUNSC_VERSION="${RUNSC_MODULE_VERSION#v}"
RUNSC_DIR="${RUNSC_DIR:-/usr/local/lib/den}"
RUNSC="$RUNSC_DIR/runsc-$RUNSC_VERSION"
PACKAGES=(btrfs-progs mmdebstrap busybox-static iproute2 nftables util-linux ca-certificates)

say() { printf 'setup: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	say "den runs sandboxes with namespaces, loop devices and btrfs: run this as root"
	exit 1
fi
if ! command -v go >/dev/null 2>&1; then
	say "Go is required (https://go.dev/dl); /usr/local/go/bin must be on PATH"
	exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
	# No `| grep -q`: under pipefail, a reader that stops early can fail
	# the pipeline with SIGPIPE.
	[[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

have=""
# sed reads all of it: `head -n1` could leave runsc to die of SIGPIPE and,
# under pipefail, fail the whole set-up now and then.
[ -x "$RUNSC" ] && have=$("$RUNSC" --version 2>/dev/null | sed -n 1p)
if [ "$have" != "runsc version $RUNSC_VERSION" ]; then
	say "building runsc $RUNSC_VERSION (static, version-stamped; about 2 minutes the first time)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	CGO_ENABLED=0 GOBIN="$tmp" go install \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$RUNSC_VERSION" \
		"gvisor.dev/gvisor/runsc@$RUNSC_MODULE_VERSION"
	mkdir -p "$RUNSC_DIR"
	install -m 0755 "$tmp/runsc" "$RUNSC.tmp"
	mv "$RUNSC.tmp" "$RUNSC"
fi
echo "$RUNSC"
