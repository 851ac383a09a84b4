#!/usr/bin/env bash
# The linker of the packaged binary (scripts/package.sh sets it for its build only): rustc's own
# linker (`cc`, with lld) with the same arguments, and the functions a start executes laid out
# together at the head of the code (lld's --symbol-ordering-file).
#
# Why: the idle server's RSS is mostly the executable's code, and a page fault maps the 64 kB
# around it (the kernel's fault-around). The 2 MB of code a start runs was spread over 9 MB of
# the 13 MB of code; laid out together it takes 2 to 3 MB (benches/README.md: memory).
#
# scripts/startup-symbols.txt lists those functions (scripts/startup-symbols.sh writes it). A
# Rust symbol holds hashes that move when a dependency, the version or the compiler does (the
# legacy `17h…E` at its end; the crate's `Cs…_` in std's v0 names): a name not found as it is
# stands for every symbol of the LTO object with the same name but its hashes (a few more
# functions than the start runs: generic instances share a name). A name found nowhere is left
# out. The order only places code: the program is the same.
set -euo pipefail
list="$(dirname "${BASH_SOURCE[0]}")/startup-symbols.txt"
real="${LINK_ORDERED_CC:-cc}"
order="$(mktemp)"
trap 'rm -f -- "$order"' EXIT
# the objects, and the linker the driver will use (the last -fuse-ld wins; rustc's own: lld)
objects=()
linker=""
for arg in "$@"; do
    [[ "$arg" == *.o && -f "$arg" ]] && objects+=("$arg")
    [[ "$arg" == -fuse-ld=* ]] && linker="${arg#-fuse-ld=}"
done
if [[ "$linker" == lld && -f "$list" && ${#objects[@]} -gt 0 ]]; then
    # the defined functions of the objects, then the list: each listed name as it is, or
    # every function with its name but the hashes. A failure here costs the order, never
    # the link
    if ! nm --defined-only -- "${objects[@]}" |
        awk '$2 ~ /^[tT]$/ { print $3 }' |
        awk -v list="$list" '
            # (no regex interval: mawk, the awk of Debian, has none)
            function bare(s, n) {
                n = length(s)
                if (n > 20 && substr(s, n - 19, 3) == "17h" && substr(s, n, 1) == "E") s = substr(s, 1, n - 20)
                gsub(/Cs[0-9A-Za-z]+_/, "Cs_", s)
                return s
            }
            { defined[$0] = 1; by[bare($0)] = by[bare($0)] "\n" $0 }
            END {
                while ((getline name < list) > 0) {
                    if (name == "" || name ~ /^#/) continue
                    if (name in defined) { print name; continue }
                    b = bare(name)
                    if (b == name) print name # (C code of a static library: as it is)
                    else if ((b in by) && !(b in done)) { print substr(by[b], 2); done[b] = 1 }
                }
            }' >"$order"; then
        echo "scripts/link-ordered.sh: no order for the link (reading the objects failed)" >&2
        : >"$order"
    fi
fi
# (-Xlinker: the file's path goes to lld whole, whatever it holds; -Wl would split it at a comma)
status=0
if [[ -s "$order" ]]; then
    "$real" "$@" -Xlinker --symbol-ordering-file -Xlinker "$order" \
        -Xlinker --no-warn-symbol-ordering || status=$?
else
    "$real" "$@" || status=$?
fi
exit "$status"
