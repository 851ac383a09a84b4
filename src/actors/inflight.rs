//! The `inflight` record of a codex process (what the takeover sweep needs to find and kill
//! it), made from what identifies the process once it runs, and [`Recorded`]: an app-server
//! that no session owns (the pool's spare, a fork's one-off process) kept on record under a
//! key of its own for as long as it lives. A leaf of `actors/`, and the one writer of
//! `inflight` records ([`on_record`], [`off_record`], [`client_closed`]): whoever owns a
//! process calls them (the layering test holds the rest of the crate to it).

use crate::codex::process::{SpawnHook, SpawnInfo, WarmProcess};
use crate::security::ids::SessionId;
use crate::store::Store;

/// The record of a spawned codex process that the takeover sweep needs to find and kill it.
pub(crate) fn inflight_of(info: SpawnInfo) -> crate::store::InflightTurn {
    crate::store::InflightTurn {
        pid: info.pid,
        start_ticks: info.start_ticks,
        argv_hash: info.argv_hash,
        started_ms: crate::store::now_ms(),
        cgroup: info.cgroup,
        client_closed: false,
    }
}

/// Put the process `info` identifies on record under `key` (flushed by the caller); a store
/// that refuses is logged: the process runs all the same.
pub(crate) fn on_record(store: &Store, key: &SessionId, info: SpawnInfo) {
    if let Err(e) = store.put_inflight(key, &inflight_of(info)) {
        tracing::error!(error = %e, "could not record a codex process in flight");
    }
}

/// Take `key`'s process off record (flushed by the caller).
pub(crate) fn off_record(store: &Store, key: &SessionId) -> Result<(), crate::store::StoreError> {
    store.clear_inflight(key)
}

/// Mark every process on record as one whose client closed its connection (the server stops
/// under it); how many.
pub(crate) fn client_closed(store: &Store) -> Result<usize, crate::store::StoreError> {
    store.mark_inflight_client_closed()
}

/// A hook that puts the spawned process on record under `record` as it starts (flushed by the
/// caller).
pub(crate) fn record_hook(store: Store, record: SessionId) -> SpawnHook {
    std::sync::Arc::new(move |info: &SpawnInfo| on_record(&store, &record, info.clone()))
}

/// An app-server no session owns (the pool's spare, a fork's one-off process, a probe's), on
/// record (`inflight`, under a generated key no session uses) from its spawn until it is
/// closed, dropped or handed to a session ([`Recorded::hand_to`]: then under its id). So a bridge that dies while it holds one leaves a record the
/// next bridge's takeover sweep kills it by.
pub(crate) struct Recorded {
    process: Option<WarmProcess>,
    record: SessionId,
    store: Store,
}

impl Recorded {
    /// Spawn an app-server from `spec` (see [`WarmProcess::spawn`]), on record from the
    /// moment it runs.
    pub(crate) async fn spawn(
        spec: &crate::codex::argv::SpawnSpec,
        store: Store,
    ) -> crate::error::Result<Recorded> {
        let record = SessionId::generate();
        let hook = record_hook(store.clone(), record.clone());
        // made first, so a start that fails or is dropped (a timeout) forgets the record too
        let mut me = Recorded {
            process: None,
            record,
            store,
        };
        me.process = Some(WarmProcess::spawn(spec, Some(hook)).await?);
        let _ = me.store.flush().await;
        Ok(me)
    }

    /// The process.
    pub(crate) fn process(&mut self) -> &mut WarmProcess {
        self.process
            .as_mut()
            .expect("a Recorded holds its process until it is given up")
    }

    /// The process's pid.
    pub(crate) fn pid(&self) -> i32 {
        self.process.as_ref().map_or(0, |p| p.info().pid)
    }

    /// The process, handed to session `to`: on record under its id first, then its record
    /// here is forgotten (so it is never off the record).
    pub(crate) fn hand_to(mut self, to: &SessionId) -> WarmProcess {
        let p = self.process.take().expect("a Recorded holds its process");
        if let Err(e) = self.store.put_inflight(to, &inflight_of(p.info().clone())) {
            tracing::error!(error = %e, "could not record the spare for its session");
        }
        p
    }

    /// Close the process (EOF, then a kill; reaped) and forget its record.
    pub(crate) async fn close(mut self) {
        if let Some(p) = self.process.take() {
            p.close().await;
        }
        let _ = off_record(&self.store, &self.record);
        let _ = self.store.flush().await;
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        // closed, handed on, or not (a failed or aborted start, an aborted task): a process
        // still here is killed first (as it drops), then its record goes
        drop(self.process.take());
        let _ = off_record(&self.store, &self.record);
    }
}
