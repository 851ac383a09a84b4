#!/usr/bin/env bash
# Writes scripts/startup-symbols.txt, the functions a start of the server executes up to its
# idle after the first `tools/list` (an empty store; the scenario of the packages' idle-RSS
# test), as the store's owner and as a relay with the owner daemon it starts, in the order of
# their addresses in BINARY. scripts/link-ordered.sh lays them out first.
#
#   scripts/startup-symbols.sh [BINARY]     (default target/release-lto/codex-mcp-bridge)
#
# Needs valgrind (callgrind counts each function run), nm (binutils), node, and a codex binary
# (CODEX_BIN, or `codex` on PATH: the server asks its version at the start). Run it again when
# the packages' idle RSS grows (tests/packages.rs prints how much of the list the binary has).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="$(realpath "${1:-target/release-lto/codex-mcp-bridge}")"
for tool in valgrind nm node; do
    command -v "$tool" >/dev/null || { echo "scripts/startup-symbols.sh needs $tool" >&2; exit 1; }
done
CODEX="${CODEX_BIN:-$(command -v codex || true)}"
[[ -x "$CODEX" ]] || { echo "scripts/startup-symbols.sh needs codex (CODEX_BIN or on PATH)" >&2; exit 1; }
export LC_ALL=C
work="$(mktemp -d)"
trap 'rm -rf -- "$work"' EXIT
mkdir -p "$work/home" "$work/codex-home"
# one start per owner mode, as the test: initialize, tools/list, a second's idle, stdin closed.
# `process`: the server owns the store (the packages' idle-RSS test); `daemon` (the default): the
# server starts the owner daemon (valgrind follows it) and relays to it
for owner in process daemon; do
    mkdir -p "$work/$owner"
    env -i PATH="$PATH" HOME="$work/home" CODEX_HOME="$work/codex-home" \
        CODEX_BIN="$CODEX" CODEX_BRIDGE_ROOTS="$work" \
        CODEX_BRIDGE_STORE="$work/$owner/store" CODEX_BRIDGE_OWNER="$owner" RUST_LOG=error \
        node -e '
const { spawn } = require("child_process");
const [out, bin] = process.argv.slice(1);
const p = spawn("valgrind", ["--tool=callgrind", "--demangle=no", "--trace-children=yes",
    "--trace-children-skip=*/codex",
    "--callgrind-out-file=" + out, bin], { stdio: ["pipe", "pipe", "inherit"] });
let buf = "", step = 0;
const send = (m) => p.stdin.write(JSON.stringify(m) + "\n");
p.stdout.on("data", (d) => {
    buf += d;
    while (buf.includes("\n")) {
        buf = buf.slice(buf.indexOf("\n") + 1);
        step += 1;
        if (step === 1) {
            send({ jsonrpc: "2.0", method: "notifications/initialized" });
            send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
        } else if (step === 2) {
            setTimeout(() => p.stdin.end(), 1000);
        }
    }
});
send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18",
    capabilities: {}, clientInfo: { name: "startup-symbols", version: "1" } } });
p.on("exit", (code) => process.exit(code === null ? 1 : code));
setTimeout(() => { console.error("no answer within 120 s"); p.kill(); process.exit(1); }, 120000).unref();
' "$work/$owner/callgrind.%p.out" "$BIN" 2>"$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 1; }
    # the daemon exits once no client is connected: its profile is written then
    for _ in $(seq 300); do
        pgrep -f -- "--callgrind-out-file=$work/" >/dev/null || break
        sleep 0.2
    done
    if pgrep -f -- "--callgrind-out-file=$work/" >/dev/null; then
        echo "the $owner start's processes did not exit within 60 s" >&2
        exit 1
    fi
    runs=("$work/$owner"/callgrind.*.out)
    want=$([[ "$owner" == daemon ]] && echo 2 || echo 1)
    [[ -f "${runs[0]}" && ${#runs[@]} -ge $want ]] || {
        echo "the $owner start: ${#runs[@]} profiles, not $want" >&2
        exit 1
    }
    echo "$owner: ${#runs[@]} processes profiled"
done
# the functions callgrind names (fn= and cfn=, name on first use), those of the binary's code,
# by address
cat "$work"/*/callgrind.*.out | sed -n 's/^c\{0,1\}fn=([0-9]*) //p' | sort -u >"$work/run.txt"
nm --defined-only "$BIN" | awk '$2 ~ /^[tT]$/ { print $1, $3 }' | sort -k2,2 >"$work/text.txt"
{
    echo "# the functions a start of the server runs up to its idle, as the store's owner and as a relay with its owner daemon (scripts/startup-symbols.sh), by address"
    join -1 2 -2 1 -o 1.1,1.2 "$work/text.txt" "$work/run.txt" | sort | cut -d' ' -f2
} >scripts/startup-symbols.txt
echo "scripts/startup-symbols.txt: $(($(wc -l <scripts/startup-symbols.txt) - 1)) functions"
