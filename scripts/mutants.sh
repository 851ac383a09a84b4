#!/usr/bin/env bash
# Mutation testing of the security modules and the argv builders with cargo-mutants.
#
# Usage: scripts/mutants.sh [EXTRA cargo-mutants ARGS...]
#
#   scripts/mutants.sh                              # every mutant in .cargo/mutants.toml's scope
#   scripts/mutants.sh -F '^src/security/ids\.rs'   # one file (a regex on the mutant names)
#   scripts/mutants.sh --list                       # what would be tried
#   scripts/mutants.sh --iterate                    # skip mutants caught by the previous run
#
# Scope, test selection and timeouts live in .cargo/mutants.toml. This script pins the tool's
# version, keeps its builds apart from the main target dir (target/mutants/build, kept between
# runs so dependencies are compiled once) and runs one mutant at a time (the machine has two
# cores and is shared). The report lands in target/mutants/mutants.out/ (outcomes.json,
# missed.txt, caught.txt, unviable.txt, timeout.txt); benches/README.md has the latest figures.
set -euo pipefail

readonly WANT="cargo-mutants 27.1.0"

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"

got="$(cargo mutants --version 2>/dev/null || true)"
if [[ "$got" != "$WANT" ]]; then
    echo "mutants.sh: installing $WANT (found: ${got:-none})" >&2
    cargo install --locked cargo-mutants@"${WANT#cargo-mutants }"
fi

out="$repo/target/mutants"
mkdir -p "$out"
# Debug info only costs link time here: no mutant is ever debugged.
export CARGO_PROFILE_DEV_DEBUG=0
# a failing proptest case must not be saved in the build copy and replayed for every later
# mutant (one flaky case once counted 55 mutants as caught)
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=1
export CARGO_TARGET_DIR="$out/build"

exec cargo mutants --jobs 1 --output "$out" "$@"
