#!/usr/bin/env bash
# Builds every package of the server from one build (profile release-lto: fat LTO, one codegen
# unit, the size and memory figures of benches/README.md) into target/dist/, each with the
# version of Cargo.toml:
#
#   codex-mcp-bridge-linux-x64-VERSION.tgz   npm: the binary, for Linux x86_64 (glibc)
#   codex-mcp-bridge-VERSION.tgz             npm: the launcher, with the package above as an
#                                            optional dependency (no install script)
#   codex-mcp-bridge-VERSION-linux-x64.mcpb  MCP bundle (Claude Desktop): manifest.json + binary
#   codex-mcp-bridge-VERSION.crate           `cargo package --locked` (tests/packages.rs builds it)
#   server.json                              the repository's, with the bundle's sha256
#   SHA256SUMS
#
# Templates: packaging/npm/*/, packaging/mcpb/manifest.json (`@VERSION@`, `@MCP_NAME@`).
# Needs cargo, node and npm, zip, objdump and nm (binutils). Downloads nothing beyond the crates cargo already locked.
# The install tests: `cargo nextest run --locked --test packages` (README.md: Install).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly PROFILE="${PACKAGE_PROFILE:-release-lto}"
readonly DIST="target/dist"

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "scripts/package.sh builds the linux-x64 packages, on Linux x86_64 only (this is $(uname -s)-$(uname -m))" >&2
    exit 1
fi
for tool in cargo node npm zip objdump nm; do
    command -v "$tool" >/dev/null || { echo "scripts/package.sh needs $tool" >&2; exit 1; }
done

VERSION="$(cargo metadata --locked --offline --no-deps --format-version 1 |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const p=JSON.parse(s).packages.find(p=>p.name==="codex-mcp-bridge");process.stdout.write(p.version)})')"
MCP_NAME="$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync("server.json","utf8")).name)')"
readonly VERSION MCP_NAME
echo "== codex-mcp-bridge $VERSION ($MCP_NAME), profile $PROFILE"

# `jemalloc`: the allocator the memory targets are measured with (benches/README.md). Linked by
# scripts/link-ordered.sh: the code a start runs laid out together, so an idle server maps less
# of the executable (only this binary: build scripts and dependencies build as they would)
# (cargo does not see the list or the script: when either is newer than the binary, the
# binary's own outputs go, so it is linked again)
OUT="${CARGO_TARGET_DIR:-target}/$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")"
if [[ -e "$OUT/codex-mcp-bridge" && ( scripts/startup-symbols.txt -nt "$OUT/codex-mcp-bridge" ||
    scripts/link-ordered.sh -nt "$OUT/codex-mcp-bridge" ) ]]; then
    rm -f -- "$OUT/codex-mcp-bridge" "$OUT"/deps/codex_mcp_bridge-*
fi
cargo rustc --locked --profile "$PROFILE" --features jemalloc --bin codex-mcp-bridge -- \
    -C linker="$PWD/scripts/link-ordered.sh"
# (cargo's dev profile builds into target/debug; PACKAGE_PROFILE=dev makes quick packages to try;
# CARGO_TARGET_DIR is honoured, target/dist stays in the checkout)
readonly TARGET="${CARGO_TARGET_DIR:-target}"
readonly BIN="$TARGET/$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")/codex-mcp-bridge"
[[ "$("$BIN" --version)" == "codex-mcp-bridge $VERSION" ]] || {
    echo "$BIN --version says $("$BIN" --version), not codex-mcp-bridge $VERSION" >&2
    exit 1
}
# the allocator's settings (src/main.rs) are in the binary only when jemalloc is its allocator
grep -qa 'narenas:1,tcache:false' "$BIN" || {
    echo "$BIN was built without the jemalloc feature" >&2
    exit 1
}

rm -rf -- "$DIST"
mkdir -p -- "$DIST/stage"
STAGE="$(cd "$DIST/stage" && pwd)"
readonly STAGE

# a template with its placeholders filled in (every one of them: a leftover fails)
fill() {
    local from=$1 to=$2
    sed -e "s|@VERSION@|$VERSION|g" -e "s|@MCP_NAME@|$MCP_NAME|g" -- "$from" >"$to"
    if grep -q '@[A-Z_]*@' -- "$to"; then
        echo "$to: a placeholder is left: $(grep -o '@[A-Z_]*@' -- "$to" | head -n 1)" >&2
        exit 1
    fi
}

echo "== npm"
mkdir -p "$STAGE/npm-platform/bin" "$STAGE/npm-launcher/bin"
fill packaging/npm/codex-mcp-bridge-linux-x64/package.json "$STAGE/npm-platform/package.json"
# the newest glibc symbol version the binary needs: the launcher refuses an older glibc by name
GLIBC="$(objdump -T -- "$BIN" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)"
[[ -n "$GLIBC" ]] || { echo "no glibc symbol versions in $BIN" >&2; exit 1; }
echo "needs glibc $GLIBC"
node -e '
const fs = require("fs");
const [file, glibc] = process.argv.slice(1);
const p = JSON.parse(fs.readFileSync(file, "utf8"));
p.codexMcpBridge = { glibc };
fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");
' "$STAGE/npm-platform/package.json" "$GLIBC"
cp -- packaging/npm/codex-mcp-bridge-linux-x64/README.md "$STAGE/npm-platform/"
install -m 0755 -- "$BIN" "$STAGE/npm-platform/bin/codex-mcp-bridge"
fill packaging/npm/codex-mcp-bridge/package.json "$STAGE/npm-launcher/package.json"
cp -- packaging/npm/codex-mcp-bridge/README.md "$STAGE/npm-launcher/"
install -m 0755 -- packaging/npm/codex-mcp-bridge/bin/codex-mcp-bridge.js "$STAGE/npm-launcher/bin/"
# offline, with no user or project npm configuration in the way
for pkg in npm-platform npm-launcher; do
    (cd "$STAGE/$pkg" && npm pack --offline --userconfig /dev/null --ignore-scripts --loglevel=warn \
        --pack-destination "$STAGE/.." >/dev/null)
done

echo "== mcpb"
mkdir -p "$STAGE/mcpb/server"
fill packaging/mcpb/manifest.json "$STAGE/mcpb/manifest.json"
install -m 0755 -- "$BIN" "$STAGE/mcpb/server/codex-mcp-bridge"
readonly BUNDLE="codex-mcp-bridge-$VERSION-linux-x64.mcpb"
(cd "$STAGE/mcpb" && zip -q -X -r "../../$BUNDLE" manifest.json server)

echo "== cargo"
# the .crate only: tests/packages.rs builds the server from it (what `cargo package`'s own
# verification does, plus running the result)
cargo package --locked --offline --no-verify --allow-dirty --quiet
cp -- "$TARGET/package/codex-mcp-bridge-$VERSION.crate" "$DIST/"

echo "== server.json"
SHA="$(sha256sum -- "$DIST/$BUNDLE" | cut -d ' ' -f 1)"
node -e '
const fs = require("fs");
const [sha, out] = process.argv.slice(1);
const s = JSON.parse(fs.readFileSync("server.json", "utf8"));
const mcpb = (s.packages || []).filter((p) => p.registryType === "mcpb");
if (mcpb.length !== 1) throw new Error("server.json: one mcpb package expected");
mcpb[0].fileSha256 = sha;
fs.writeFileSync(out, JSON.stringify(s, null, 2) + "\n");
' "$SHA" "$DIST/server.json"

rm -rf -- "$STAGE"
(cd "$DIST" && sha256sum -- *.tgz *.mcpb *.crate server.json >SHA256SUMS)
ls -l -- "$DIST"
echo "$(cd "$DIST" && pwd)"
