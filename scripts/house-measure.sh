#!/usr/bin/env bash
# Measures how den's code is laid out (issue 28): lines per package,
# imports that climb from a lower layer to a higher one (the layers are in
# tools/house/layers.go and docs/architecture.md), the core's file-to-file
# calls and the largest cycle among them, and the files one create passes
# through. HOUSE_EDGES=1 also lists the core's call edges.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
args=(-dir "$root")
[ "${HOUSE_EDGES:-}" = 1 ] && args+=(-edges)
exec go run -C "$root/tools/house" . "${args[@]}"
