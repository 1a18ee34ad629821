#!/usr/bin/env bash
# Runs E2B's own JavaScript SDK tests, unmodified, against a dend: the
# suites of commands, files, the API, create, connect, kill, timeouts and
# the rest of tests/sandbox and tests/api. E2B's code is never copied into
# den: the SDK package at TAG is extracted from an E2B checkout into WORK
# (outside this repository), its test dependencies are installed there
# from the npm registry, and vitest runs there.
#
#   scripts/e2b-suite.sh E2B_CHECKOUT [TAG] [VITEST ARGS...]
#
# E2B_CHECKOUT is a git clone of github.com/e2b-dev/E2B; TAG defaults to
# e2b@2.45.0. The environment names the dend, as docs/agents.md's E2B section
# says: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (the token in E2B's
# e2b_HEX shape, which SDKs up to 2.45 insist on), and E2B_DOMAIN. WORK
# defaults to /tmp/den-e2b-suite.
set -euo pipefail

checkout=${1:?usage: scripts/e2b-suite.sh E2B_CHECKOUT [TAG] [VITEST ARGS...]}
tag=${2:-e2b@2.45.0}
shift $(( $# >= 2 ? 2 : 1 ))
work=${WORK:-/tmp/den-e2b-suite}
for v in E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY; do
	[ -n "${!v:-}" ] || { echo "e2b-suite: set $v (see docs/agents.md, E2B)" >&2; exit 2; }
done

dir="$work/${tag//[@\/]/-}"
if [ ! -d "$dir/node_modules" ]; then
	rm -rf "$dir" && mkdir -p "$dir"
	git -C "$checkout" archive "$tag" packages/js-sdk | tar -x -C "$dir" --strip-components=2
	# Only what the node tests need: the browser, Cloudflare and
	# build tool chains stay out.
	(cd "$dir" && node -e '
		const fs = require("fs"), p = JSON.parse(fs.readFileSync("package.json"));
		const keep = ["vitest", "@types/node", "dotenv", "msw", "error-stack-parser-es"];
		p.devDependencies = Object.fromEntries(Object.entries(p.devDependencies).filter(([k]) => keep.includes(k)));
		fs.writeFileSync("package.json", JSON.stringify(p, null, 2));
	')
	(cd "$dir" && npm install --no-audit --no-fund >/dev/null)
fi
cat >"$dir/vitest.den.mts" <<'EOF'
import { defineConfig } from 'vitest/config'
// E2B's own settings for its node tests, without the projects that need a
// browser, Cloudflare, template builds or volumes.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    exclude: ['tests/runtimes/**', 'tests/template/**', 'tests/connectionConfig.test.ts', 'tests/volume/**'],
    isolate: true,
    globals: false,
    testTimeout: 30_000,
    environment: 'node',
    setupFiles: ['tests/globalFetchFallback.setup.ts'],
    deps: { interopDefault: true },
  },
})
EOF
cd "$dir"
if [ $# -eq 0 ]; then
	set -- tests/sandbox tests/api
fi
exec npx vitest run --config vitest.den.mts "$@"
