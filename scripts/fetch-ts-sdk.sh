#!/usr/bin/env bash
# Install the pinned official MCP TypeScript SDK (@modelcontextprotocol/sdk) used by the
# end-to-end test tests/suite/ts_sdk.rs (which runs tests/ts-sdk/e2e.mjs).
#
# Usage: scripts/fetch-ts-sdk.sh
#
#   tests/ts-sdk/package.json pins the exact version and tests/ts-sdk/package-lock.json every
#   package's exact version and sha512 integrity hash; `npm ci` installs exactly that into
#   tests/ts-sdk/node_modules (git-ignored), verifying every tarball against the lock. If the
#   pinned version is already installed there, nothing is downloaded.
#
# On success the absolute path of tests/ts-sdk is the LAST line on stdout (everything else goes
# to stderr). On any failure the script exits non-zero with a message on stderr.
#
# The script does not lock: callers that may run concurrently (the Rust test does) must
# serialize calls themselves.
set -euo pipefail

die() {
    echo "fetch-ts-sdk.sh: error: $*" >&2
    exit 1
}

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
dir="$(cd -- "$script_dir/../tests/ts-sdk" && pwd -P)"

[[ -f "$dir/package.json" ]] || die "missing $dir/package.json"
[[ -f "$dir/package-lock.json" ]] || die "missing $dir/package-lock.json"
command -v node >/dev/null 2>&1 || die "node not found on PATH (Node.js 20 or later is needed)"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH (it comes with Node.js)"

node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 20 ]] || die "Node.js 20 or later is needed, found $(node --version)"

# the version package.json pins, and the one installed (empty when none)
want="$(node -p 'require(process.argv[1]).dependencies["@modelcontextprotocol/sdk"]' "$dir/package.json")"
installed_pkg="$dir/node_modules/@modelcontextprotocol/sdk/package.json"
got=""
if [[ -f "$installed_pkg" ]]; then
    got="$(node -p 'require(process.argv[1]).version' "$installed_pkg" 2>/dev/null || true)"
fi

if [[ "$got" == "$want" ]]; then
    echo "fetch-ts-sdk.sh: @modelcontextprotocol/sdk $want already present in $dir" >&2
else
    echo "fetch-ts-sdk.sh: installing @modelcontextprotocol/sdk $want into $dir (npm ci)" >&2
    # stdout of npm goes to stderr so that our last stdout line stays the directory.
    npm ci --prefix "$dir" --no-audit --no-fund --ignore-scripts 1>&2 \
        || die "npm ci --prefix $dir failed"
    got="$(node -p 'require(process.argv[1]).version' "$installed_pkg" 2>/dev/null || true)"
    [[ "$got" == "$want" ]] \
        || die "npm ci succeeded but @modelcontextprotocol/sdk is '${got:-missing}', expected '$want'"
fi

echo "$dir"
