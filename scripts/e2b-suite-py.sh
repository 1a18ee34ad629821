#!/usr/bin/env bash
# Runs E2B's own Python SDK tests, unmodified, against a dend, with
# Debian's /usr/bin/python3 and pytest. E2B's code is never copied into
# den: the SDK at TAG is extracted from an E2B checkout into WORK (outside
# this repository) and imported from there through PYTHONPATH; nothing is
# installed with pip.
#
#   scripts/e2b-suite-py.sh E2B_CHECKOUT [TAG] [PYTEST ARGS...]
#
# E2B_CHECKOUT is a git clone of github.com/e2b-dev/E2B; TAG defaults to
# @e2b/python-sdk@2.34.0. The environment names the dend, as
# docs/agents.md's E2B section says: E2B_API_URL, E2B_SANDBOX_URL,
# E2B_API_KEY (the token in E2B's e2b_HEX shape) and E2B_DOMAIN. DEPS, if
# set, is a directory put on PYTHONPATH before Debian's packages, for the
# libraries Debian 12 has too old or not at all (httpx, httpcore,
# dockerfile_parse: see docs/agents.md). WORK defaults to
# /tmp/den-e2b-suite-py. Without PYTEST ARGS it runs tests/ less the
# template and volume suites (den builds images with `den image`, and has
# no volumes), two at a time, each test given 120 s.
set -euo pipefail

checkout=${1:?usage: scripts/e2b-suite-py.sh E2B_CHECKOUT [TAG] [PYTEST ARGS...]}
tag=${2:-@e2b/python-sdk@2.34.0}
shift $(( $# >= 2 ? 2 : 1 ))
work=${WORK:-/tmp/den-e2b-suite-py}
for v in E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY; do
	[ -n "${!v:-}" ] || { echo "e2b-suite-py: set $v (see docs/agents.md, E2B)" >&2; exit 2; }
done

version=${tag##*@}
dir="$work/$version"
if [ ! -d "$dir/e2b" ]; then
	rm -rf "$dir" && mkdir -p "$dir"
	git -C "$checkout" archive "$tag" packages/python-sdk | tar -x -C "$dir" --strip-components=2
fi
# The SDK reads its own version from its package metadata
# (importlib.metadata.version("e2b")), which only an install writes:
# write that one file beside the source instead.
meta="$work/meta-$version/e2b-$version.dist-info"
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: e2b\nVersion: %s\n' "$version" >"$meta/METADATA"

export PYTHONPATH="$dir:${meta%/*}${DEPS:+:$DEPS}"
cd "$dir"
if [ $# -eq 0 ]; then
	set -- -n 2 --timeout 120 tests \
		--ignore=tests/sync/template_sync --ignore=tests/async/template_async \
		--ignore=tests/sync/volume_sync --ignore=tests/async/volume_async
fi
exec /usr/bin/python3 -m pytest -p no:cacheprovider "$@"
