//! The `inflight` record of a codex process (what the takeover sweep needs to find and kill
//! it), made from what identifies the process once it runs. A leaf of `actors/`.

/// The record of a spawned codex process that the takeover sweep needs to find and kill it.
pub(crate) fn inflight_of(info: crate::codex::process::SpawnInfo) -> crate::store::InflightTurn {
    crate::store::InflightTurn {
        pid: info.pid,
        start_ticks: info.start_ticks,
        argv_hash: info.argv_hash,
        started_ms: crate::store::now_ms(),
        cgroup: info.cgroup,
    }
}
