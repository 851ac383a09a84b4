//! Conversations as actors (ractor): a [`registry::RegistryActor`] routes every call to the
//! [`session::SessionActor`] of its session id, spawning it linked or rehydrating it from the
//! store; each session actor owns the codex subprocess of its current turn. Every session-less
//! codex process (`query`, `search`, `review`, `structured`, the version probe, `codex delete`) is owned by a
//! [`oneshot::OneShotActor`] linked under the registry. [`Bridge`] is the typed handle the MCP
//! layer uses: it takes the requests of [`crate::calls`] and answers with its views; callers never
//! build messages, reply ports or codex invocations, and never see the store.
//!
//! Who owns what: a session's record is written by its session actor only (see
//! [`session`]); a one-shot's `inflight` entry by its one-shot actor. `getSession` asks a live
//! session's actor (through the registry) and reads the store only for a session without
//! one; `listSessions` reads the store's index, which the actors keep current (they flush
//! every change).

pub mod client;
pub mod credentials;
pub mod inflight;
pub mod oneshot;
pub mod pool;
pub mod registry;
pub mod session;
pub mod shared;
pub mod task_records;
pub mod worktree;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::security::ids::SessionId;
use crate::store::{Page, SessionRecord, Store, TurnStatus};

pub use crate::calls::{
    Answer, ApplyOutcome, BackendStatus, ChangedFile, Counts, Finding, OneShot, OneShotCall,
    SessionDiff, SessionPage, SessionView, Status, ThreadOp, TurnCall, WorkDir, WorktreeView,
};
pub use crate::turn::limiter::Limiter;
pub use client::{ClientContext, ClientId, Progress};
use oneshot::Job;
use registry::{RegistryActor, RegistryMessage};
use session::SessionMessage;
pub use shared::Shared;

/// The typed handle over the registry.
#[derive(Clone)]
pub struct Bridge {
    registry: ActorRef<RegistryMessage>,
    shared: Arc<Shared>,
    own: Arc<ClientContext>,
    /// The live session actors (the registry writes them).
    live: Arc<registry::Live>,
    /// Each session whose turn ended ([`Bridge::turn_ends`]).
    turn_ended: tokio::sync::broadcast::Sender<SessionId>,
}

/// How many ended turns a slow listener of [`Bridge::turn_ends`] may lag behind.
const TURN_ENDS_BACKLOG: usize = 256;

impl Bridge {
    /// Recover from a previous crash (kill leftover turns, mark them interrupted), then start
    /// the registry.
    pub async fn start(shared: Shared) -> Result<Bridge> {
        Bridge::start_with(shared, session::TurnDriver::default()).await
    }

    /// [`Bridge::start`] with what runs the session actors' turns and forks (a unit test's
    /// fake in place of codex).
    pub async fn start_with(shared: Shared, driver: session::TurnDriver) -> Result<Bridge> {
        recover_interrupted(&shared.store).await?;
        worktree::sweep_gone(&shared).await?;
        let shared = Arc::new(shared);
        let live = Arc::new(registry::Live::default());
        let behaviour = RegistryActor {
            driver,
            live: live.clone(),
        };
        let (registry, _) = Actor::spawn(None, behaviour, shared.clone())
            .await
            .map_err(|e| {
                Error::SessionFailed(format!("could not start the session registry: {e}"))
            })?;
        if let Some(ttl) = shared.config.session_ttl {
            // the registry runs the sweep (serialised with it bringing a session back); this
            // only asks, as long as the registry lives
            let registry = registry.clone();
            tokio::spawn(async move {
                // not at the very start: a large backlog's sweep would compete with the host's
                // first requests for the CPU (the startup bench measured 236 ms for the first
                // `tools/list` beside a sweep of 100 000 sessions, against < 50 ms)
                tokio::time::sleep(EXPIRY_FIRST_AFTER).await;
                loop {
                    match expire_through(&registry, ttl).await {
                        Ok(_) => {}
                        Err(Error::SessionFailed(_)) => break,
                        Err(e) => tracing::warn!(error = %e, "could not expire old sessions"),
                    }
                    tokio::time::sleep(EXPIRY_EVERY).await;
                }
            });
        }
        // the pool's keeper (the spare, the idle one-shot app-servers), linked under the
        // registry: shutdown drains it (closing them)
        let (keeper, _) = Actor::spawn_linked(
            None,
            pool::keeper::PoolKeeper,
            Arc::downgrade(&shared),
            registry.get_cell(),
        )
        .await
        .map_err(|e| {
            Error::SessionFailed(format!("could not start the warm pool's keeper: {e}"))
        })?;
        shared.warm.set_keeper(keeper);
        // once a host's last connection is gone, the keeper and every live session close
        // what was started with its credentials (each asks `HeldCredentials::held` itself)
        let (weak, live_now) = (Arc::downgrade(&shared), Arc::downgrade(&live));
        shared.credentials.on_release(move |_| {
            if let Some(shared) = weak.upgrade() {
                shared.warm.credentials_released();
            }
            for actor in live_now.upgrade().map(|l| l.actors()).unwrap_or_default() {
                let _ = actor.cast(SessionMessage::CredentialsReleased);
            }
        });
        let own = Arc::new(shared.own_context());
        Ok(Bridge {
            registry,
            shared,
            own,
            live,
            turn_ended: tokio::sync::broadcast::channel(TURN_ENDS_BACKLOG).0,
        })
    }

    /// Hold `client`'s credentials until the hold is dropped (a connection's, for as long as
    /// it is open): what was started with them is closed once no hold is left.
    pub fn hold_credentials(&self, client: &ClientContext) -> credentials::CredentialsHold {
        let creds = credentials::Credentials::of_env(&client.common.env);
        self.shared.credentials.hold(creds)
    }

    /// The shared settings and store.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The owning process's own client context.
    pub fn own_context(&self) -> &Arc<ClientContext> {
        &self.own
    }

    /// Run one turn; resolves when it ended (or failed to start). A call without a client is
    /// this process's own ([`Bridge::own_context`]), as a steer without one is: the same
    /// caller turn after turn (its spare, its one-shot processes), not a new one each time.
    pub async fn turn(&self, mut call: TurnCall) -> Result<Answer> {
        if call.client.is_none() {
            call.client = Some(self.own.clone());
        }
        let named = call.session_id.clone();
        // the caller's own home: a session of another is never continued (`check_codex_home`)
        let home = call.client.as_ref().map(|c| c.codex_home.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.registry
            .cast(RegistryMessage::Turn {
                call: Box::new(call),
                reply: tx,
            })
            .map_err(|_| Error::Busy("the session registry is not running".into()))?;
        let report = rx.await.unwrap_or_else(|_| {
            Err(Error::SessionFailed(
                "the session's actor failed during the turn; its processes were stopped and it \
                 restarts from its stored record on the next call"
                    .into(),
            ))
        });
        // every turn of this process passes here (each connection's, foreground, background
        // or task): its end is told to whoever listens (none: nothing to do)
        if let Some(id) = report
            .as_ref()
            .ok()
            .and_then(|r| r.session_id.as_ref())
            .or(named.as_ref())
        {
            let _ = self.turn_ended.send(id.clone());
        }
        // the session's entry in its home's list changed (its turn count, its last status)
        self.list_changed_in(home);
        report
    }

    /// The `CODEX_HOME` of each session made (its record stored by its first turn's
    /// preparation, or by a fork), whose turn ended (its entry's turn count and status), or
    /// closed, from now on, as it happens (a listener lagging a few hundred behind misses the
    /// oldest). The MCP layer's
    /// `notifications/resources/list_changed` listen here.
    pub fn session_list_changes(&self) -> tokio::sync::broadcast::Receiver<PathBuf> {
        self.shared.list_changed.subscribe()
    }

    /// Tell [`Bridge::session_list_changes`]' listeners that `home`'s session list changed.
    fn list_changed_in(&self, home: Option<impl Into<PathBuf>>) {
        if let Some(home) = home {
            let _ = self.shared.list_changed.send(home.into());
        }
    }

    /// The sessions whose turn ended from now on, as each ends (a listener that lags more than
    /// a few hundred ends behind misses the oldest). The MCP layer's resource subscriptions
    /// listen here.
    pub fn turn_ends(&self) -> tokio::sync::broadcast::Receiver<SessionId> {
        self.turn_ended.subscribe()
    }

    /// Run a session-less turn (`query`, `search`, `review`, `structured`) under the global
    /// limit, owned by a one-shot actor. Dropping this future cancels the turn.
    pub async fn one_shot(&self, call: OneShotCall) -> Result<Answer> {
        let cancel = call.cancel.clone();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = self.shared.clone();
        let job =
            oneshot::job(move |hook, token| oneshot::answer_then(shared, call, hook, token, tx));
        self.spawn_one_shot(cancel, job).await?;
        rx.await.unwrap_or_else(|_| {
            Err(Error::SessionFailed(
                "the turn was stopped before it answered (the server is shutting down)".into(),
            ))
        })
    }

    /// Start a one-shot actor linked under the registry (shutdown stops it).
    async fn spawn_one_shot(&self, cancel: CancellationToken, job: Job) -> Result<()> {
        oneshot::start(self.shared.clone(), self.registry.get_cell(), cancel, job).await
    }

    /// `codex --version` with `client`'s codex and environment, run by a one-shot actor (its
    /// process on record for the crash sweep while it runs); `None` when codex cannot be run.
    pub async fn codex_version(&self, client: &ClientContext) -> Option<String> {
        let (program, env) = (client.common.program.clone(), client.common.env.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = oneshot::job(move |hook, token| async move {
            let v = tokio::select! {
                v = crate::codex::process::codex_version(&program, &env, Some(&hook)) => v,
                _ = token.cancelled() => None,
            };
            let _ = tx.send(v);
        });
        self.spawn_one_shot(CancellationToken::new(), job)
            .await
            .ok()?;
        rx.await.ok().flatten()
    }

    /// The server's health as `client` sees it (its codex).
    pub async fn status(&self, client: &ClientContext) -> Status {
        let codex_version = self.codex_version(client).await;
        Status {
            codex_support: codex_version
                .as_deref()
                .map(crate::config::CodexSupport::of),
            codex_version,
            store_path: self.shared.store.path().display().to_string(),
            schema_version: self.shared.store.schema_version().unwrap_or(0),
            containment: serde_json::to_value(crate::codex::process::containment())
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            counts: self.counts(),
            backend: self.backend_status(client).await,
        }
    }

    /// The backend set and the one in effect: with `app-server` set and nothing started yet,
    /// a probe (an app-server started and closed) tells whether this codex has a usable one.
    pub async fn backend_status(&self, client: &ClientContext) -> BackendStatus {
        let configured = self.shared.config.backend;
        let pool = &self.shared.warm;
        if configured == crate::config::Backend::AppServer && !pool.known() {
            // the details go to the log (redacted for this client); every client sees the
            // bare reason
            // the probe's process counts against max_warm too; with no place free, some
            // process runs already and a start will tell
            if let Some(slot) = pool.try_slot() {
                // `None`: the keeper stopped (shutdown), which says nothing of the app-server
                if let Some(found) = pool.probe_owned(&client.common, Some(slot)).await {
                    pool.record(found.map_err(|why| {
                        tracing::warn!(error = %client.secrets.redact(&why), "codex app-server did not start");
                        "codex app-server did not start or answer (the server log says why)".to_owned()
                    }));
                }
            }
        }
        let warning = match configured {
            crate::config::Backend::AppServer => pool.unusable().map(|why| {
                format!("backend app-server is set, but codex has no usable app-server ({why}); session turns run with codex exec")
            }),
            crate::config::Backend::Exec => None,
        };
        let effective = if warning.is_some() {
            crate::config::Backend::Exec
        } else {
            configured
        };
        BackendStatus {
            configured: configured.to_string(),
            effective: effective.to_string(),
            warning,
            warm_processes: pool.len() + pool.one_shot_count().await,
            max_warm: pool.max(),
        }
    }

    /// Add `text` to the session's running turn (`turn/steer`); answered once codex took it.
    /// Refused when no turn runs on it (a session without a live actor runs none).
    pub async fn steer(
        &self,
        id: &SessionId,
        text: crate::security::prompt::Prompt,
        client: Arc<ClientContext>,
    ) -> Result<()> {
        self.ask_registry(|reply| RegistryMessage::Steer {
            id: id.clone(),
            text,
            client,
            reply,
        })
        .await
    }

    /// Fork a session into a new one at its current state (see the session actor's `Fork`).
    pub async fn fork(
        &self,
        id: &SessionId,
        client: Arc<ClientContext>,
        timeout: Duration,
    ) -> Result<SessionView> {
        let forked = self
            .ask_registry(|reply| RegistryMessage::Fork {
                id: id.clone(),
                client,
                timeout,
                reply,
            })
            .await;
        if let Ok(view) = &forked {
            self.list_changed_in(view.codex_home.as_deref());
        }
        forked
    }

    /// Name a session (and its codex thread, where it has one), or drop its thread's last
    /// turns, between turns.
    pub async fn thread_op(
        &self,
        id: &SessionId,
        op: ThreadOp,
        client: Arc<ClientContext>,
        timeout: Duration,
    ) -> Result<SessionView> {
        self.ask_registry(|reply| RegistryMessage::ThreadOp {
            id: id.clone(),
            op,
            client,
            timeout,
            reply,
        })
        .await
    }

    /// Send the registry the message `make` builds around a reply channel, and wait for the
    /// answer (the session's actor or the registry answers; a dropped reply is said so).
    async fn ask_registry<T>(
        &self,
        make: impl FnOnce(tokio::sync::oneshot::Sender<Result<T>>) -> RegistryMessage,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.registry
            .cast(make(tx))
            .map_err(|_| Error::Busy("the session registry is not running".into()))?;
        rx.await.unwrap_or_else(|_| {
            Err(Error::SessionFailed(
                "the session's actor stopped before it answered".into(),
            ))
        })
    }

    /// A session, as the session tools show it: a live session's record is its actor's, so the
    /// registry asks the actor; a stored one without a live actor is read from the store by
    /// the registry.
    pub async fn session(&self, id: &SessionId) -> Result<Option<SessionView>> {
        self.session_for(id, false).await
    }

    /// [`Bridge::session`]; with `let_go`, a live session first lets go of its thread between
    /// turns (its warm process closes), so that codex's own app can open it.
    pub async fn session_for(&self, id: &SessionId, let_go: bool) -> Result<Option<SessionView>> {
        self.ask_registry(|reply| RegistryMessage::Get {
            id: id.clone(),
            let_go,
            reply,
        })
        .await
    }

    /// A page of sessions, newest first, as the session tools show them. It reads the store's
    /// index (`last_used`), which is the registry's: each record in it is flushed by its
    /// session's actor on every change that matters, so a page never asks the actors.
    pub fn sessions(&self, cursor: Option<&str>, limit: usize) -> Result<SessionPage> {
        let page = self.shared.store.list(cursor, limit)?;
        Ok(SessionPage {
            sessions: page
                .sessions
                .iter()
                .map(|r| SessionView::of(r, self.is_live(&r.session_id)))
                .collect(),
            next: page.next,
        })
    }

    /// [`Bridge::close`] by a client of `host` (the MCP layer's key of it): refused, naming
    /// `sessionId`, while the session runs or has queued a call of another host
    /// ([`TurnCall::host`]); answered as the session tools show a session.
    pub async fn close_session(
        &self,
        id: &SessionId,
        (delete_thread, drop_changes): (bool, bool),
        client: Arc<ClientContext>,
        host: Option<String>,
    ) -> Result<Option<SessionView>> {
        let how = (delete_thread, drop_changes);
        let removed = self.close_by(id, how, Some(client), host).await?;
        Ok(removed.map(|r| SessionView::of(&r, false)))
    }

    /// A session view with its worktree's changed files read (+/-; a worktree removed by hand
    /// is said to be gone).
    pub async fn with_changes(&self, mut view: SessionView) -> SessionView {
        if view.worktree.is_some()
            && let Ok(id) = SessionId::parse("sessionId", &view.session_id)
            && let Ok(Some(rec)) = self.shared.store.get(&id)
            && let Some(wt) = &rec.worktree
        {
            view.worktree = Some(worktree::view(&self.shared, wt).await);
        }
        view
    }

    /// Session `id`'s changes in its own worktree against its base, file by file, with the
    /// digest of the patch an apply would land now. A session of another `CODEX_HOME` than
    /// `client`'s is refused exactly as one that does not exist.
    pub async fn session_diff(
        &self,
        id: &SessionId,
        client: &ClientContext,
    ) -> Result<SessionDiff> {
        let rec = self.stored_for(id, client)?;
        worktree::diff(&self.shared, id, rec.worktree.as_ref()).await
    }

    /// Apply session `id`'s changes onto the checkout it came from: all or nothing, never
    /// staged or committed. Refused, naming `sessionId`, while the session runs a turn (its
    /// changes are half made), and exactly as an unknown session for a `client` of another
    /// `CODEX_HOME`; with `digest` (a `diffSession`'s), refused naming `digest` when the
    /// changes are no longer the ones it was taken of.
    pub async fn apply_session(
        &self,
        id: &SessionId,
        client: &ClientContext,
        digest: Option<&str>,
    ) -> Result<ApplyOutcome> {
        let rec = self.stored_for(id, client)?;
        if rec.last_status == Some(TurnStatus::Running) {
            return Err(Error::invalid(
                "sessionId",
                format!(
                    "session {id} is running a turn: its changes are not done; apply them once \
                     the turn has ended (nothing was applied)"
                ),
            ));
        }
        worktree::apply(&self.shared, id, rec.worktree.as_ref(), digest).await
    }

    /// Session `id`'s record for `client`: one of another `CODEX_HOME` (which `client` may not
    /// continue) is refused exactly as one that does not exist, naming `sessionId`.
    fn stored_for(&self, id: &SessionId, client: &ClientContext) -> Result<SessionRecord> {
        let rec = self.stored(id)?;
        if client.check_codex_home(&rec).is_err() {
            return Err(no_session(id));
        }
        Ok(rec)
    }

    /// Session `id`'s record, or a refusal naming `sessionId`.
    fn stored(&self, id: &SessionId) -> Result<SessionRecord> {
        self.shared.store.get(id)?.ok_or_else(|| no_session(id))
    }

    /// A session's record as stored (tests and the `sessions` command; the session tools go
    /// through [`Bridge::session`]).
    pub fn get(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        Ok(self.shared.store.get(id)?)
    }

    /// Sessions, newest first.
    pub fn list(&self, cursor: Option<&str>, limit: usize) -> Result<Page> {
        self.shared.store.list(cursor, limit).map_err(|e| match e {
            // the caller's argument, not the store, is at fault
            crate::store::StoreError::BadCursor => {
                Error::invalid("cursor", "is not a cursor from a previous page")
            }
            e => e.into(),
        })
    }

    /// Close (forget) a session: cancels its turn first; optionally deletes codex's thread files
    /// (with `client`'s codex and environment; `None`: the owning process's own).
    /// This is the operator's close (the `sessions` command): it ends any turn. A session's
    /// worktree holding changes not applied is kept: the close is refused, naming
    /// `dropChanges`.
    pub async fn close(
        &self,
        id: &SessionId,
        delete_thread: bool,
        client: Option<Arc<ClientContext>>,
    ) -> Result<Option<SessionRecord>> {
        self.close_by(id, (delete_thread, false), client, None)
            .await
    }

    /// [`Bridge::close`] (the operator's), removing the session's own worktree even while it
    /// holds changes not applied when `drop_changes`.
    pub async fn close_dropping(
        &self,
        id: &SessionId,
        drop_changes: bool,
    ) -> Result<Option<SessionRecord>> {
        self.close_by(id, (false, drop_changes), None, None).await
    }

    /// [`Bridge::close`] by `host` (`None`: the operator).
    async fn close_by(
        &self,
        id: &SessionId,
        (delete_thread, drop_changes): (bool, bool),
        client: Option<Arc<ClientContext>>,
        host: Option<String>,
    ) -> Result<Option<SessionRecord>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.registry
            .cast(RegistryMessage::Close {
                id: id.clone(),
                delete_thread,
                drop_changes,
                client: client.unwrap_or_else(|| self.own.clone()),
                host,
                reply: tx,
            })
            .map_err(|_| Error::Busy("the session registry is not running".into()))?;
        let closed = rx
            .await
            .unwrap_or_else(|_| Err(Error::SessionFailed("closing the session failed".into())));
        if let Ok(Some(rec)) = &closed {
            self.list_changed_in(rec.codex_home.as_deref());
        }
        closed
    }

    /// Live counts.
    pub fn counts(&self) -> Counts {
        Counts {
            live_sessions: self.live.len(),
            stored_sessions: self.shared.store.len(),
            active_turns: self.shared.limiter.active(),
            queued_turns: self.shared.limiter.queued(),
            max_concurrent: self.shared.limiter.max(),
        }
    }

    /// The MCP client of this process closed its connection and [`Bridge::shutdown`] comes
    /// next: every process on record in flight is marked so (the store writes the marks, as it
    /// writes every `inflight` record), so that what a stopped turn leaves behind is logged and
    /// recorded at the next start as cut off by its client, not as a crash. Whatever this
    /// process runs is marked, a relayed client's turn too: this process's stop ends it.
    pub async fn client_closed(&self) {
        match crate::actors::inflight::client_closed(&self.shared.store) {
            Ok(0) => {}
            Ok(marked) => {
                tracing::info!(marked, "processes in flight as the client left: marked so")
            }
            Err(e) => tracing::warn!(error = %e, "could not mark the turns in flight"),
        }
        let _ = self.shared.store.flush().await;
    }

    /// Forget stored sessions unused for longer than `ttl`, never one with a live actor (the
    /// registry's sweep, which runs every [`EXPIRY_EVERY`] when `session_ttl` is set); how
    /// many were forgotten.
    pub async fn expire(&self, ttl: Duration) -> Result<usize> {
        expire_through(&self.registry, ttl).await
    }

    /// Stop every session and one-shot (each kills its subprocess), then the registry; flush
    /// the store.
    pub async fn shutdown(&self) {
        let actors: Vec<ActorRef<SessionMessage>> = self.live.actors();
        // at once: each closes its warm app-server, if any (EOF, then a kill)
        futures::future::join_all(
            actors
                .iter()
                .map(|a| a.stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))),
        )
        .await;
        // the pool's keeper handles what is on its way to it, then closes the spare and the
        // idle one-shot servers
        self.shared.warm.close().await;
        // the one-shots (and any session started meanwhile)
        self.registry
            .stop_children_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        let _ = self
            .registry
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        let _ = self.shared.store.flush().await;
    }

    /// The live actor of session `id`, if any (the unit tests' probes).
    #[cfg(test)]
    pub(crate) fn live_actor(&self, id: &SessionId) -> Option<ActorRef<SessionMessage>> {
        self.live.get(id)
    }

    /// Test-only: is a session actor live?
    pub fn is_live(&self, id: &SessionId) -> bool {
        self.live.contains(id)
    }
}

/// How often sessions past their time-to-live are looked for.
pub const EXPIRY_EVERY: Duration = Duration::from_secs(3600);
/// How long after the start the first expiry sweep runs.
pub const EXPIRY_FIRST_AFTER: Duration = Duration::from_secs(5);

/// Ask `registry` for the expiry sweep ([`RegistryMessage::Expire`]); how many sessions it
/// forgot. `SessionFailed` when the registry is gone.
async fn expire_through(registry: &ActorRef<RegistryMessage>, ttl: Duration) -> Result<usize> {
    let gone = || Error::SessionFailed("the session registry is gone".into());
    let (reply, rx) = tokio::sync::oneshot::channel();
    registry
        .cast(RegistryMessage::Expire {
            ttl,
            forgotten: 0,
            reply,
        })
        .map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?
}

/// What a session's record says of a turn the server stopped under because its client closed
/// the connection (the log says it too).
pub const CLIENT_CLOSED: &str = "the client closed its connection during the turn";
/// What it says of a turn left in flight by a server that died (a crash, a SIGKILL).
pub const SERVER_STOPPED: &str = "the server stopped while this turn ran";

/// Kill what is left of turns that were in flight when the server died or stopped as its
/// client left, and mark them interrupted in their sessions, saying which (a one-shot's entry
/// has no session: it is only killed).
pub async fn recover_interrupted(store: &Store) -> Result<()> {
    for (id, turn) in store.inflight()? {
        let killed = crate::codex::process::kill_leftover(
            turn.pid,
            turn.start_ticks,
            turn.argv_hash,
            turn.cgroup.as_deref(),
        );
        let why = if turn.client_closed {
            tracing::warn!(session = %id, pid = turn.pid, killed, "a turn was interrupted: {CLIENT_CLOSED}");
            CLIENT_CLOSED
        } else {
            tracing::warn!(session = %id, pid = turn.pid, killed, "a turn was interrupted by a server crash");
            SERVER_STOPPED
        };
        // a warm app-server is recorded while it lives, between turns too: only a session
        // whose turn was running has an interrupted turn
        if let Some(mut rec) = store.get(&id)?
            && rec.last_status == Some(TurnStatus::Running)
        {
            rec.last_status = Some(TurnStatus::Interrupted);
            rec.last_error = Some(why.into());
            store.put(&rec)?;
        }
        crate::actors::inflight::off_record(store, &id)?;
    }
    Ok(store.flush().await?)
}

/// The refusal for a session that does not exist (or, to a client of another `CODEX_HOME`,
/// one that is not its to see), naming `sessionId`.
fn no_session(id: &SessionId) -> Error {
    Error::invalid(
        "sessionId",
        format!("no session {id}; start one with the `codex` tool"),
    )
}
