#!/usr/bin/env bash
# Installs what den's tests need beyond den's own set-up: Node.js and the
# third-party clients the integration tests drive unmodified, pinned by
# integration/js/package-lock.json; Debian's pytest (and what the Python
# SDK's tests use: yaml, venv, setuptools and wheel for an offline pip
# install); Debian's PostgreSQL, whose binaries the store's tests run in a
# temporary directory of their own; Debian's Chromium, the browser
# playwright-core drives in the dashboard's test (never a downloaded one).
# Idempotent, and quick when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test-setup: %s\n' "$*" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	say "installing nodejs and npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# The Python SDK's tests run under Debian's python3 with Debian's pytest;
# the dashboard's under Debian's chromium.
debdeps=(python3-pytest python3-yaml python3-venv python3-setuptools python3-wheel chromium)
missing=()
for p in "${debdeps[@]}"; do
	# No `| grep -q`: under pipefail, a reader that stops early can fail
	# the pipeline with SIGPIPE.
	[[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PostgreSQL: the tests run initdb and postgres themselves (see
# internal/store/postgres/pgtest), so the package's own cluster and
# service are not wanted: its main cluster is never made, the service is
# neither started during the install nor enabled.
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	say "installing postgresql (its binaries only: the tests start their own servers)"
	apt-get update -qq
	norc=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		norc=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null
	sed -ri 's/^#?\s*(create_main_cluster)\s*=.*$/\1 = false/' /etc/postgresql-common/createcluster.conf
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable postgresql >/dev/null 2>&1 || true
	fi
	[ -z "$norc" ] || rm -f /usr/sbin/policy-rc.d
fi

# promtool (Debian's prometheus package) checks dend's /metrics output;
# systemd-analyze (Debian's systemd package) checks dend's unit file. As
# for PostgreSQL, the package's own service is neither started nor enabled.
if ! command -v promtool >/dev/null 2>&1; then
	say "installing prometheus (for promtool; its service is not started)"
	apt-get update -qq
	norc=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		norc=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable prometheus >/dev/null 2>&1 || true
	fi
	[ -z "$norc" ] || rm -f /usr/sbin/policy-rc.d
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
	say "installing systemd (for systemd-analyze)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

# npm ci again only when a lockfile changed since the last install: the
# third-party clients the tests drive, and the TypeScript SDK's packages.
for js in integration/js sdk/ts; do
	stamp="$js/node_modules/.den-installed"
	if [ ! -f "$stamp" ] || [ "$js/package-lock.json" -nt "$stamp" ]; then
		say "installing the JavaScript packages of $js (npm ci)"
		npm ci --prefix "$js" --no-audit --no-fund --loglevel=error >&2
		touch "$stamp"
	fi
done

# MinIO, the S3 server the blob store's tests start on loopback (see
# internal/blob/s3/miniotest), built from the Go module proxy at a pinned
# version and kept under a path naming it, so a new pin builds again.
# Keep MINIO_VERSION in step with miniotest.Version.
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
minio_bin=/var/cache/den-test/minio-$MINIO_VERSION
if [ ! -x "$minio_bin" ]; then
	say "building MinIO $MINIO_VERSION (a few minutes, once)"
	mkdir -p /var/cache/den-test
	tmp=$(mktemp -d /var/cache/den-test/.minio-build-XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	CGO_ENABLED=0 GOBIN="$tmp" go install "github.com/minio/minio@$MINIO_VERSION" >&2
	mv "$tmp/minio" "$minio_bin"
fi
