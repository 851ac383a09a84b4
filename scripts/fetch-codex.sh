#!/usr/bin/env bash
# Fetch the pinned OpenAI Codex CLI (codex-cli 0.145.0) used by the integration tests.
#
# Usage: scripts/fetch-codex.sh [DEST]
#
#   DEST defaults to <repo>/.codex-cli (git-ignored). The pinned package.json and
#   package-lock.json (exact version + sha512 integrity hashes) from scripts/codex-cli/ are
#   copied into DEST and installed with `npm ci`, which verifies every tarball against the lock.
#   If DEST already holds a binary whose `--version` is exactly `codex-cli 0.145.0`, nothing is
#   downloaded.
#
# On success the absolute path of the codex binary is the LAST line on stdout (everything else
# goes to stderr). On any failure the script exits non-zero with a message on stderr.
#
# The script does not lock: callers that may run concurrently (the Rust test support does) must
# serialize calls themselves.
set -euo pipefail

readonly WANT_VERSION="codex-cli 0.145.0"
readonly BIN_REL="node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

die() {
    echo "fetch-codex.sh: error: $*" >&2
    exit 1
}

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
pin_dir="$script_dir/codex-cli"

[[ $# -le 1 ]] || die "usage: $0 [DEST]"
dest="${1:-$repo_root/.codex-cli}"

case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) ;;
    *) die "only linux x86_64 is supported (the lock pins @openai/codex-linux-x64), got $(uname -s)/$(uname -m)" ;;
esac

[[ -f "$pin_dir/package.json" ]] || die "missing $pin_dir/package.json"
[[ -f "$pin_dir/package-lock.json" ]] || die "missing $pin_dir/package-lock.json"

mkdir -p -- "$dest" || die "cannot create $dest"
dest="$(cd -- "$dest" && pwd -P)"
bin="$dest/$BIN_REL"

# Prints the binary's --version output (empty on failure); never fails itself.
version_of() {
    if [[ -x "$1" ]]; then
        "$1" --version 2>/dev/null </dev/null | head -n 1 || true
    fi
}

if [[ "$(version_of "$bin")" == "$WANT_VERSION" ]]; then
    echo "fetch-codex.sh: $WANT_VERSION already present in $dest" >&2
else
    command -v npm >/dev/null 2>&1 || die "npm not found on PATH (needed to install @openai/codex)"
    echo "fetch-codex.sh: installing $WANT_VERSION into $dest (npm ci)" >&2
    cp -- "$pin_dir/package.json" "$pin_dir/package-lock.json" "$dest/" \
        || die "cannot copy the pinned package files into $dest"
    # stdout of npm goes to stderr so that our last stdout line stays the binary path.
    npm ci --prefix "$dest" --no-audit --no-fund --ignore-scripts --include=optional 1>&2 \
        || die "npm ci --prefix $dest failed"
    [[ -x "$bin" ]] || die "npm ci succeeded but $bin is missing or not executable"
    got="$(version_of "$bin")"
    [[ "$got" == "$WANT_VERSION" ]] \
        || die "installed binary $bin reports '${got:-<nothing>}', expected '$WANT_VERSION'"
fi

echo "$bin"
