#!/usr/bin/env bash
# Checks every dependency against the RustSec advisory database with cargo-deny (deny.toml,
# [advisories]): a vulnerability, an unmaintained or unsound crate, a yanked version, or an
# accepted advisory that no longer applies fails the check. Run by .ci/run on every CI run.
#
# The database is a git repository on GitHub, which CI machines may not reach. So:
# 1. a fresh clone is tried first, bounded by a timeout;
# 2. otherwise an offline snapshot of the RustSec database beside the checkout is used
#    (ADVISORY_SNAPSHOT, default ../shared/advisory-db; plain files, read-only, which CI puts
#    there): it is copied under target/, made a git repository with one commit dated like the
#    snapshot's newest advisory (cargo-deny reads the database as one).
# The database's date is printed: a check is only as recent as its database.
#
# Usage: scripts/advisories.sh
# Environment:
#   ADVISORY_SNAPSHOT   the snapshot directory (default: ../shared/advisory-db)
#   ADVISORY_FETCH=0    do not try the network (default: try for at most 120 s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

snapshot="${ADVISORY_SNAPSHOT:-../shared/advisory-db}"
dbs="$PWD/target/advisory-dbs"
# deny.toml's db-path, and cargo-deny's directory name there for its default database URL
# (github.com/RustSec/advisory-db)
db="$dbs/advisory-db-3157b0e258782691"

rm -rf "$dbs"
mkdir -p "$dbs"
source="a fresh fetch of github.com/rustsec/advisory-db"
if [[ "${ADVISORY_FETCH:-1}" == "0" ]] || ! timeout 120 cargo deny fetch db; then
    if [[ ! -d "$snapshot/crates" ]]; then
        echo "advisories: the database could not be fetched and there is no snapshot at" \
            "$snapshot (a directory with crates/)" >&2
        exit 1
    fi
    # the snapshot's date: that of its newest advisory (plain files carry no commit date)
    date="$(grep -rhoE '^date = "[0-9]{4}-[0-9]{2}-[0-9]{2}"' "$snapshot/crates" |
        cut -d'"' -f2 | sort | tail -n 1)"
    rm -rf "$db"
    cp -r "$snapshot" "$db"
    chmod -R u+w "$db"
    GIT_AUTHOR_DATE="${date}T00:00:00Z" GIT_COMMITTER_DATE="${date}T00:00:00Z" \
        git -C "$db" -c init.defaultBranch=main init -q
    git -C "$db" add -A
    GIT_AUTHOR_DATE="${date}T00:00:00Z" GIT_COMMITTER_DATE="${date}T00:00:00Z" \
        git -C "$db" -c user.name=snapshot -c user.email=snapshot@localhost \
        -c commit.gpgsign=false commit -q -m "RustSec advisory database snapshot of $date"
    source="the offline snapshot $snapshot"
fi
echo "advisories: database from $source, dated $(git -C "$db" log -1 --format=%cs)" \
    "(commit $(git -C "$db" log -1 --format=%h)); advisories published later are not checked"

cargo fetch --locked
cargo deny --locked --offline check --hide-inclusion-graph advisories
echo "advisories: OK against the database of $(git -C "$db" log -1 --format=%cs)"
