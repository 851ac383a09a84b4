#!/usr/bin/env bash
# Fetch a supported OpenAI Codex CLI version for the integration tests.
#
# Usage: scripts/fetch-codex.sh [VERSION [DEST]]
#
#   VERSION is one of the directories under scripts/codex-cli/ (each a supported version, e.g.
#   0.145.0 or 0.171.0); without it, the newest of them (the newest tested version). DEST defaults
#   to <repo>/.codex-cli/VERSION (git-ignored). That version's pinned package.json and
#   package-lock.json (exact version + sha512 integrity hashes) are copied into DEST and installed
#   with `npm ci`, which verifies every tarball against the lock. If DEST already holds a binary
#   whose `--version` is exactly `codex-cli VERSION`, nothing is downloaded.
#
# On success the absolute path of the codex binary is the LAST line on stdout (everything else
# goes to stderr). On any failure the script exits non-zero with a message on stderr.
#
# The script does not lock: callers that may run concurrently (the Rust test support does) must
# serialize calls themselves.
set -euo pipefail

readonly BIN_REL="node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

die() {
    echo "fetch-codex.sh: error: $*" >&2
    exit 1
}

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
pins="$script_dir/codex-cli"

[[ $# -le 2 ]] || die "usage: $0 [VERSION [DEST]]"

# The pinned versions, oldest first (version sort).
mapfile -t known < <(cd -- "$pins" && ls -d -- */ 2>/dev/null | tr -d / | sort -V)
[[ ${#known[@]} -gt 0 ]] || die "no pinned versions under $pins"

version="${1:-${known[-1]}}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION must look like 0.171.0, got '$version'"
pin_dir="$pins/$version"
[[ -d "$pin_dir" ]] \
    || die "codex $version is not pinned (pinned: ${known[*]}); to add it see 'Adding a Codex CLI version' in docs/operating.md"
readonly want="codex-cli $version"
dest="${2:-$repo_root/.codex-cli/$version}"

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

if [[ "$(version_of "$bin")" == "$want" ]]; then
    echo "fetch-codex.sh: $want already present in $dest" >&2
else
    command -v npm >/dev/null 2>&1 || die "npm not found on PATH (needed to install @openai/codex)"
    echo "fetch-codex.sh: installing $want into $dest (npm ci)" >&2
    cp -- "$pin_dir/package.json" "$pin_dir/package-lock.json" "$dest/" \
        || die "cannot copy the pinned package files into $dest"
    # stdout of npm goes to stderr so that our last stdout line stays the binary path.
    npm ci --prefix "$dest" --no-audit --no-fund --ignore-scripts --include=optional 1>&2 \
        || die "npm ci --prefix $dest failed"
    [[ -x "$bin" ]] || die "npm ci succeeded but $bin is missing or not executable"
    got="$(version_of "$bin")"
    [[ "$got" == "$want" ]] \
        || die "installed binary $bin reports '${got:-<nothing>}', expected '$want'"
fi

echo "$bin"
