//! The cap on warm app-server processes (`max_warm`): which sessions hold one, which of them
//! are idle, and which was used least recently. Each process is owned by its session actor
//! (held in its state between turns, in its turn task during a turn); this pool only counts
//! and picks whom to ask to close theirs when a new one is needed and the cap is reached.
//!
//! The cap holds for processes, not only for holders: every `codex app-server` the server
//! starts (a session's, the spare, a fork's one-off, a probe's) first takes one of `max_warm`
//! [`Slot`]s, and gives it back only once it has been reaped. A process that is still closing
//! keeps its slot; a new one waits for it.
//!
//! The processes no session or call holds are owned by one actor, the pool's keeper
//! (`spares::PoolKeeper`), in its state: the spare (one app-server started ahead for the next
//! new session) and the idle app-servers of one-shot calls (`query`, `search`, `structured`:
//! [`OneShotServer`]), each for one client context and never shared. This pool reaches them
//! only through the keeper's messages (`KeeperMessage`): a one-shot server is taken whole by
//! the call that uses it (so the call's one-shot actor owns it while its turn runs, and its
//! cancel or stop kills it), given back only after a completed turn whose thread it let go of,
//! and closed by the keeper after the idle timeout, at shutdown, and when a new process needs
//! its slot. Each is on record (`inflight`, under a key of its own) for as long as it lives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use ractor::ActorRef;

use crate::actors::inflight::Recorded;
use crate::codex::process::WarmKey;
use crate::security::ids::SessionId;

/// The index of the least recently used holder whose process is idle, if any.
fn least_recently_used_idle(entries: &[Entry]) -> Option<usize> {
    entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.busy)
        .min_by_key(|(_, e)| e.last_used)
        .map(|(i, _)| i)
}

/// How the pool asks a holder to close its idle process (a session actor casts itself its
/// `CloseWarm`); the pool names no actor type, so it imports nothing of the session's.
pub type Closer = Arc<dyn Fn() + Send + Sync>;

/// A holder: a session's actor (its id, and its closer, which no other actor shares).
struct Entry {
    id: SessionId,
    closer: Closer,
    last_used: Instant,
    busy: bool,
}

impl Entry {
    /// Whether this is the entry of session `id`'s actor that asks through `closer`.
    fn holds(&self, id: &SessionId, closer: &Closer) -> bool {
        &self.id == id && Arc::ptr_eq(&self.closer, closer)
    }
}

/// What [`WarmPool::acquire`] decided.
pub enum Admission {
    /// Use (or start) a warm process (the least recently used idle holder may have been asked
    /// to close its own, to stay within the cap).
    Granted,
    /// Every warm process is busy and the cap is reached: run this turn with `codex exec`.
    Full,
}

/// The warm processes of all sessions, for the cap.
pub struct WarmPool {
    max: usize,
    entries: Mutex<Vec<Entry>>,
    /// Whether this codex has a usable app-server, once known: the first warm start (or a
    /// probe) tells. `Err` holds why not; turns then run with `codex exec`.
    health: Mutex<Option<std::result::Result<(), String>>>,
    /// One permit per app-server process that may exist at once.
    slots: Arc<Semaphore>,
    /// The actor that owns the processes no session or call holds (the spare, the idle one-shot
    /// servers) and the pool's work in the background (the spare's start, the probe, closes:
    /// `actors/pool/keeper.rs`), once the bridge started it.
    keeper: std::sync::OnceLock<ActorRef<KeeperMessage>>,
}

/// Messages to the pool's keeper (`actors::pool::keeper::PoolKeeper`), which owns the spare and the
/// idle one-shot servers in its state, and every process the pool starts or closes in the
/// background, each in a task of the keeper, aborted (its process killed) when the keeper
/// stops.
pub(crate) enum KeeperMessage {
    /// Close the idle one-shot servers past the idle timeout or found dead, and the spare when
    /// it exited or waited past the idle timeout.
    Tick,
    /// The spare started (by a `Refill`): keep it for `key`, replacing (closing) the one
    /// there, unless the sessions filled the cap meanwhile (then it is closed).
    SpareReady { key: WarmKey, spare: Recorded },
    /// The spare, taken out, when it was started with `key` and is fit to use (the asker
    /// hands it to its session; one the asker no longer waits for is kept).
    TakeSpare {
        key: WarmKey,
        reply: tokio::sync::oneshot::Sender<Option<Recorded>>,
    },
    /// The pid of the spare waiting, if one does.
    SparePid {
        reply: tokio::sync::oneshot::Sender<Option<i32>>,
    },
    /// Close the spare, else the least recently used idle one-shot server, for a new
    /// process's slot; answers whether one was closed.
    MakeRoom {
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    /// An alive idle one-shot server of `client` for `serves`, taken out (dead ones found
    /// meanwhile are retired; one the asker no longer waits for is kept).
    TakeOneShot {
        client: crate::actors::client::ClientId,
        serves: Serves,
        reply: tokio::sync::oneshot::Sender<Option<OneShotServer>>,
    },
    /// Keep an idle one-shot server until a call of its client takes it.
    PutOneShot(OneShotServer),
    /// How many idle one-shot servers there are.
    OneShotCount {
        reply: tokio::sync::oneshot::Sender<usize>,
    },
    /// Start a spare app-server from `spec` into `slot`.
    Refill {
        spec: crate::codex::argv::SpawnSpec,
        slot: Slot,
    },
    /// Close a process the pool let go of (an idle one-shot server a call found unfit): the
    /// close runs in a task of the keeper, so a shutdown aborts it, which kills what is left
    /// of the process.
    Close(futures::future::BoxFuture<'static, ()>),
    /// A host's last connection is gone: close the spare and the idle one-shot servers whose
    /// credentials nobody holds now.
    Released,
    /// Start an app-server with `common` and close it ([`probe`]), then answer.
    Probe {
        common: crate::codex::argv::Common,
        slot: Option<Slot>,
        reply: tokio::sync::oneshot::Sender<std::result::Result<(), String>>,
    },
}

/// What a one-shot app-server serves: the process's key besides its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serves {
    /// `query` (`search: false`) or `search` (`search: true`, the only process with live web
    /// search on), in the process's own directory: each call's thread runs in a fresh one.
    Scratch { search: bool },
    /// `structured` in this working directory (the projects pin names it).
    Dir(std::path::PathBuf),
}

/// An app-server that serves one client context's one-shot calls: its process, its record for
/// the crash sweep, and (for `query` and `search`) the directory it was started in, removed
/// with it. Retire it with [`OneShotServer::retire`]; dropping it kills the process.
pub struct OneShotServer {
    pub client: crate::actors::client::ClientId,
    pub serves: Serves,
    pub process: Option<crate::codex::process::WarmProcess>,
    /// Its `inflight` key (no session uses it).
    pub record: SessionId,
    /// The process's own directory (`Scratch`), and the directory itself.
    pub home: Option<(tempfile::TempDir, crate::security::paths::Confined)>,
    pub store: crate::store::Store,
    idle_since: Instant,
}

impl OneShotServer {
    /// A server for `client`'s calls of kind `serves`, running `process`, on record as `record`.
    pub fn new(
        client: crate::actors::client::ClientId,
        serves: Serves,
        process: crate::codex::process::WarmProcess,
        record: SessionId,
        home: Option<(tempfile::TempDir, crate::security::paths::Confined)>,
        store: crate::store::Store,
    ) -> OneShotServer {
        OneShotServer {
            client,
            serves,
            process: Some(process),
            record,
            home,
            store,
            idle_since: Instant::now(),
        }
    }

    /// Close the process (EOF, then a kill: reaped before its slot comes back) and forget its
    /// record.
    pub async fn retire(mut self) {
        if let Some(w) = self.process.take() {
            w.close().await;
        }
        let _ = crate::actors::inflight::off_record(&self.store, &self.record);
        let _ = self.store.flush().await;
    }

    /// Kill the process and everything it started (a distrusted one: its turn did not
    /// complete), reap it, and forget its record.
    pub async fn kill(mut self) {
        if let Some(mut w) = self.process.take() {
            w.kill().await;
        }
        let _ = crate::actors::inflight::off_record(&self.store, &self.record);
        let _ = self.store.flush().await;
    }

    /// Whether its process is alive and fit for another call.
    pub(crate) fn alive(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|w| w.reusable() && !w.exited())
    }

    /// It goes idle now (given back to the keeper).
    pub(crate) fn mark_idle(&mut self) {
        self.idle_since = Instant::now();
    }

    /// Since when it has been idle.
    pub(crate) fn idle_since(&self) -> Instant {
        self.idle_since
    }
}

impl Drop for OneShotServer {
    fn drop(&mut self) {
        if let Some(w) = self.process.take() {
            // not retired (an aborted task): killed now; the record goes with it
            drop(w);
            let _ = crate::actors::inflight::off_record(&self.store, &self.record);
        }
    }
}

/// The right to have one `codex app-server` process: held by the process
/// ([`crate::codex::process::WarmProcess::hold`]) until it has been reaped.
pub type Slot = OwnedSemaphorePermit;

/// How often a start waiting for a slot looks again (and closes a spare started meanwhile).
const ROOM_EVERY: Duration = Duration::from_millis(250);

impl WarmPool {
    /// A pool of at most `max` warm processes.
    pub fn new(max: usize) -> Self {
        WarmPool {
            max: max.max(1),
            entries: Mutex::new(Vec::new()),
            health: Mutex::new(None),
            slots: Arc::new(Semaphore::new(max.max(1))),
            keeper: std::sync::OnceLock::new(),
        }
    }

    /// The actor that owns the pool's background work (set once, by the bridge's start).
    pub(crate) fn set_keeper(&self, keeper: ActorRef<KeeperMessage>) {
        let _ = self.keeper.set(keeper);
    }

    /// Close a process the pool let go of in a task of the keeper (`KeeperMessage::Close`);
    /// with no keeper to take it (a pool outside a bridge, or after the keeper stopped at
    /// shutdown) in a task of its own, as the close must still reap it.
    fn close_owned(&self, closing: impl std::future::Future<Output = ()> + Send + 'static) {
        let closing: futures::future::BoxFuture<'static, ()> = Box::pin(closing);
        let refused = match self.keeper.get() {
            Some(keeper) => match keeper.cast(KeeperMessage::Close(closing)) {
                Ok(()) => return,
                Err(ractor::MessagingErr::SendErr(KeeperMessage::Close(c))) => c,
                // a cast to a stopped keeper hands the message back (above); only a wrong
                // actor type lands here, which cannot be: the process is killed as it drops
                Err(e) => {
                    tracing::error!("the pool's keeper refused a close: {e}");
                    return;
                }
            },
            None => closing,
        };
        tokio::spawn(refused);
    }

    /// Start a spare app-server from `spec` in the keeper, replacing the one there (closed);
    /// the keeper closes it after the idle timeout if no session took it. None when the warm
    /// sessions fill the cap, no slot is free now (a spare never waits for room), or no keeper
    /// runs.
    pub fn refill(&self, spec: crate::codex::argv::SpawnSpec) {
        if self.len() >= self.max() {
            return;
        }
        let (Some(keeper), Some(slot)) = (self.keeper.get(), self.try_slot()) else {
            return;
        };
        let _ = keeper.cast(KeeperMessage::Refill { spec, slot });
    }

    /// A host's last connection is gone: the keeper closes what it holds that was started
    /// with credentials nobody holds now.
    pub(crate) fn credentials_released(&self) {
        if let Some(keeper) = self.keeper.get() {
            let _ = keeper.cast(KeeperMessage::Released);
        }
    }

    /// [`probe`] in the keeper, which owns its process: whether this codex has a usable
    /// app-server. `None` when the keeper could not answer (it stopped: shutdown), which says
    /// nothing of the app-server.
    pub async fn probe_owned(
        &self,
        common: &crate::codex::argv::Common,
        slot: Option<Slot>,
    ) -> Option<std::result::Result<(), String>> {
        if self.keeper.get().is_none() {
            // no keeper (a pool outside a bridge): no store to put it on record in either
            return Some(probe(common, slot, None).await);
        }
        self.ask(|reply| KeeperMessage::Probe {
            common: common.clone(),
            slot,
            reply,
        })
        .await
    }

    /// Ask the keeper with `ask` (a message carrying the reply's sender); `None` when no keeper
    /// runs (a pool outside a bridge, or after shutdown).
    async fn ask<T>(
        &self,
        ask: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> KeeperMessage,
    ) -> Option<T> {
        let keeper = self.keeper.get()?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        keeper.cast(ask(reply)).ok()?;
        answer.await.ok()
    }

    /// An idle one-shot app-server of `client` for `serves` that `fits` (its key is the one
    /// the call would start now) and is alive, taken from the keeper; one found dead or unfit
    /// is retired.
    pub async fn take_one_shot(
        &self,
        client: crate::actors::client::ClientId,
        serves: &Serves,
        fits: impl Fn(&OneShotServer) -> bool,
    ) -> Option<OneShotServer> {
        loop {
            let found = self
                .ask(|reply| KeeperMessage::TakeOneShot {
                    client,
                    serves: serves.clone(),
                    reply,
                })
                .await
                .flatten()?;
            if fits(&found) {
                return Some(found);
            }
            self.close_owned(found.retire());
        }
    }

    /// Give `server` to the keeper until a call of its client takes it; with no keeper to
    /// take it (shutdown) it is handed back, to be retired.
    #[must_use]
    pub fn put_one_shot(&self, server: OneShotServer) -> Option<OneShotServer> {
        let Some(keeper) = self.keeper.get() else {
            return Some(server);
        };
        match keeper.cast(KeeperMessage::PutOneShot(server)) {
            Ok(()) => None,
            Err(ractor::MessagingErr::SendErr(KeeperMessage::PutOneShot(s))) => Some(s),
            // a wrong actor type, which cannot be: the server is killed as it drops
            Err(e) => {
                tracing::error!("the pool's keeper refused an idle one-shot server: {e}");
                None
            }
        }
    }

    /// How many idle one-shot app-servers the keeper holds.
    pub async fn one_shot_count(&self) -> usize {
        self.ask(|reply| KeeperMessage::OneShotCount { reply })
            .await
            .unwrap_or(0)
    }

    /// A slot for a new process, if one is free now (the spare's start: it never waits).
    pub fn try_slot(&self) -> Option<Slot> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A slot for a new process: free now, or once a process still closing has been reaped.
    /// While none is free the spare is closed, and from `patience` on (then every 2.5 s) the
    /// least recently used idle holder is asked to close its process: a
    /// turn, whose holder was admitted by [`WarmPool::acquire`] (which asked for a close
    /// already), waits for that close first; a fork does not. `None` when `within` passes
    /// (every process is busy) or `cancel` fires.
    pub async fn slot(
        &self,
        within: Duration,
        patience: Duration,
        cancel: &CancellationToken,
    ) -> Option<Slot> {
        let start = tokio::time::Instant::now();
        let deadline = start + within;
        let mut evict_at = start + patience;
        loop {
            if let Some(s) = self.try_slot() {
                return Some(s);
            }
            let now = tokio::time::Instant::now();
            if !self.make_room().await && now >= evict_at {
                self.evict_idle();
                evict_at = now + ROOM_EVERY * 10;
            }
            if now >= deadline {
                return None;
            }
            let wait = (deadline - now).min(ROOM_EVERY);
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return None,
                got = tokio::time::timeout(wait, self.slots.clone().acquire_owned()) => {
                    if let Ok(Ok(s)) = got {
                        return Some(s);
                    }
                }
            }
        }
    }

    /// Close the spare, else the least recently used idle one-shot server (each slot comes
    /// back once its process has been reaped): whether one was closed.
    async fn make_room(&self) -> bool {
        self.ask(|reply| KeeperMessage::MakeRoom { reply })
            .await
            .unwrap_or(false)
    }

    /// Ask the least recently used idle holder to close its process (its slot comes back once
    /// that process has been reaped).
    fn evict_idle(&self) {
        let mut entries = self.lock();
        let victim = least_recently_used_idle(&entries);
        if let Some(i) = victim {
            let v = entries.swap_remove(i);
            tracing::info!(session = %v.id, "closing the least recently used warm codex process for a new one (max_warm reached)");
            (v.closer)();
        }
    }

    /// The spare, when it was started with `key` (the same invocation: directory, client
    /// environment, CODEX_HOME, binary, pins) and is fit to use.
    /// It goes on record as session `to`'s before its own record is forgotten (here, once it
    /// arrived: one lost on the way is closed with its own record).
    pub async fn take_spare(
        &self,
        key: &WarmKey,
        to: &SessionId,
    ) -> Option<crate::codex::process::WarmProcess> {
        let spare = self
            .ask(|reply| KeeperMessage::TakeSpare {
                key: key.clone(),
                reply,
            })
            .await
            .flatten()?;
        Some(spare.hand_to(to))
    }

    /// The pid of the spare waiting in the keeper, if one does (started, not yet taken).
    pub async fn spare_pid(&self) -> Option<i32> {
        self.ask(|reply| KeeperMessage::SparePid { reply })
            .await
            .flatten()
    }

    /// Stop the keeper once it has handled what is already on its way to it (an idle one-shot
    /// server given back, a spare that just started): it then closes the spare and every idle
    /// one-shot server; one given back later is handed back to its caller, to be retired
    /// (shutdown).
    pub async fn close(&self) {
        if let Some(keeper) = self.keeper.get() {
            let _ = keeper.drain_and_wait(Some(Duration::from_secs(10))).await;
        }
    }

    /// Whether the app-server is known to be unusable (then turns run with `codex exec`).
    pub fn unusable(&self) -> Option<String> {
        match &*self.health.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Err(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Whether a start (or a probe) has been seen yet.
    pub fn known(&self) -> bool {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Record what a warm start (or a probe) found.
    pub fn record(&self, found: std::result::Result<(), String>) {
        if let Err(why) = &found {
            tracing::warn!(
                "codex has no usable app-server ({why}); session turns run with codex exec"
            );
        }
        *self.health.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id` is about to run a turn on a warm process (its own, or a new one). A session
    /// already holding one is marked busy; a new holder is admitted when there is room, or
    /// when the least recently used idle holder can be asked to close its process.
    pub fn acquire(&self, id: &SessionId, closer: &Closer) -> Admission {
        let mut entries = self.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.holds(id, closer)) {
            e.busy = true;
            e.last_used = Instant::now();
            return Admission::Granted;
        }
        // the spare counts against the cap through its slot: the start of the new process
        // closes it when no slot is free ([`WarmPool::slot`]), so that a session in the
        // spare's directory can still take it
        if entries.len() >= self.max {
            let victim = least_recently_used_idle(&entries);
            match victim {
                Some(i) => {
                    let v = entries.swap_remove(i);
                    tracing::info!(session = %v.id, "closing the least recently used warm codex process (max_warm reached)");
                    (v.closer)();
                }
                None => return Admission::Full,
            }
        }
        entries.push(Entry {
            id: id.clone(),
            closer: closer.clone(),
            last_used: Instant::now(),
            busy: true,
        });
        Admission::Granted
    }

    /// Session `id`'s turn ended and it keeps its warm process (counted again if it had been
    /// picked for closing while its turn ran).
    pub fn idle(&self, id: &SessionId, closer: &Closer) {
        let mut entries = self.lock();
        match entries.iter_mut().find(|e| e.holds(id, closer)) {
            Some(e) => {
                e.busy = false;
                e.last_used = Instant::now();
            }
            None => entries.push(Entry {
                id: id.clone(),
                closer: closer.clone(),
                last_used: Instant::now(),
                busy: false,
            }),
        }
    }

    /// Session `id`'s actor that asks through `closer` no longer holds a warm process (an
    /// entry of another actor of the same session, one started after it, stays).
    pub fn release(&self, id: &SessionId, closer: &Closer) {
        self.lock().retain(|e| !e.holds(id, closer));
    }

    /// How many sessions hold a warm process.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session holds one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Start a `codex app-server` with `common` in a scratch directory, complete the handshake and
/// close it: whether this codex binary has a usable app-server (for `ping` and `doctor`).
/// `slot` is the probe's place under a server's cap, and `store` where its process is on
/// record for the takeover sweep while it lives (both `None` outside a server: `doctor`).
pub async fn probe(
    common: &crate::codex::argv::Common,
    slot: Option<Slot>,
    store: Option<crate::store::Store>,
) -> std::result::Result<(), String> {
    let (_dir, cwd) = crate::turn::files::scratch_dir().map_err(|e| e.to_string())?;
    let spec = crate::codex::argv::build_app_server(common, cwd).map_err(|e| e.to_string())?;
    fn redacted(e: impl std::fmt::Display) -> String {
        crate::security::redact::redact(&e.to_string()).into_owned()
    }
    match store {
        Some(store) => {
            let mut w = Recorded::spawn(&spec, store).await.map_err(redacted)?;
            if let Some(s) = slot {
                w.process().hold(s);
            }
            w.close().await;
        }
        None => {
            let mut w = crate::codex::process::WarmProcess::spawn(&spec, None)
                .await
                .map_err(redacted)?;
            if let Some(s) = slot {
                w.hold(s);
            }
            w.close().await;
        }
    }
    Ok(())
}
