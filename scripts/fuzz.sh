#!/usr/bin/env bash
# Runs every cargo-fuzz (libFuzzer) target in fuzz/ for a bounded time, on the machine's one
# stable toolchain. A crash, a failed assertion, a timeout or an out-of-memory input fails the
# script; the input is left in fuzz/artifacts/<target>/. See fuzz/README.md.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default: $FUZZ_SECONDS, else 15 (four targets: about a minute in all)
#   TARGET...           default: every target (`cargo fuzz list`)
# Environment:
#   FUZZ_SANITIZER=address  build with AddressSanitizer. cargo-fuzz passes `-Zsanitizer=…`,
#                           which a stable rustc takes only with RUSTC_BOOTSTRAP=1 (set here
#                           for that case only). Default `none`: stable flags only.
#   FUZZ_GROW=1             write new inputs into fuzz/corpus/<target>/ (default: into a
#                           scratch directory; the committed corpus is only read).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly CARGO_FUZZ_VERSION="0.13.2"
secs="${1:-${FUZZ_SECONDS:-15}}"
if [[ $# -gt 0 ]]; then shift; fi
sanitizer="${FUZZ_SANITIZER:-none}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: seconds per target must be a positive integer, got '$secs'" >&2
    exit 2
fi

if [[ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
    cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi
if [[ "$sanitizer" != "none" ]]; then
    export RUSTC_BOOTSTRAP=1
fi
# release build with debug assertions (overflow checks on), coverage instrumentation,
# `--cfg fuzzing`; no -Z flag unless a sanitizer is asked for
flags=(--sanitizer "$sanitizer" --debug-assertions)

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
passed=0
for t in "${targets[@]}"; do
    echo "== fuzz target $t: ${secs}s"
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus"
    if [[ "${FUZZ_GROW:-}" == "1" ]]; then
        dirs=("$corpus")
    else
        mkdir -p "$scratch/$t"
        dirs=("$scratch/$t" "$corpus")
    fi
    args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
    if [[ -f "fuzz/dicts/$t.dict" ]]; then
        args+=(-dict="fuzz/dicts/$t.dict")
    fi
    cargo fuzz run "${flags[@]}" "$t" "${dirs[@]}" -- "${args[@]}"
    passed=$((passed + 1))
done
echo "fuzz: $passed passed, 0 failed"
