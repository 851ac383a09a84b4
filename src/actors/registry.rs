//! The registry actor: routes each call to its session actor, spawning it (linked) or
//! rehydrating it from the store, and supervises them.
//!
//! Architecture invariants: the registry never awaits a session's work inside a handler (it
//! forwards with `cast`, and the reply goes straight from the session to the caller), so one
//! slow session never stalls the others; a dashmap guard is never held across an `.await`.
//! ractor's default supervision stops a supervisor when a child stops: overridden here, a
//! failed child is forgotten and comes back from its stored record on the next call.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;

use crate::actors::session::{SessionActor, SessionArgs, SessionMessage, TurnDriver};
use crate::actors::shared::Shared;
use crate::calls::Answer;
use crate::calls::TurnCall;
use crate::error::{Error, Result};
use crate::security::ids::SessionId;
use crate::store::SessionRecord;

/// Where a session's view goes (`forkSession`, `renameSession`, `rewindSession`).
type ViewReply = oneshot::Sender<Result<crate::calls::SessionView>>;

/// Messages to the registry.
pub enum RegistryMessage {
    /// Route a turn to its session.
    Turn {
        call: Box<TurnCall>,
        reply: oneshot::Sender<Result<Answer>>,
    },
    /// A session's record as the session tools show it: asked of its actor when it is live
    /// (the record is its actor's), else read from the store.
    Get {
        id: SessionId,
        /// The session lets go of its thread first (its warm process closes between turns).
        let_go: bool,
        reply: oneshot::Sender<Result<Option<crate::calls::SessionView>>>,
    },
    /// Close a session (live or stored).
    Close {
        id: SessionId,
        delete_thread: bool,
        /// Remove its worktree even while it holds changes not applied.
        drop_changes: bool,
        /// Whose codex deletes the thread.
        client: Arc<crate::actors::client::ClientContext>,
        /// The host that closes (it ends no turn of another host); `None`: the operator's.
        host: Option<String>,
        reply: oneshot::Sender<Result<Option<SessionRecord>>>,
    },
    /// Add a message to a live session's running turn.
    Steer {
        id: SessionId,
        text: crate::security::prompt::Prompt,
        client: Arc<crate::actors::client::ClientContext>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Fork a session (its actor is started from the store when it is not live).
    Fork {
        id: SessionId,
        client: Arc<crate::actors::client::ClientContext>,
        timeout: std::time::Duration,
        reply: oneshot::Sender<Result<crate::calls::SessionView>>,
    },
    /// Name a session, or drop its thread's last turns (its actor is started from the store
    /// when it is not live).
    ThreadOp {
        id: SessionId,
        op: crate::calls::ThreadOp,
        client: Arc<crate::actors::client::ClientContext>,
        timeout: std::time::Duration,
        reply: oneshot::Sender<Result<crate::calls::SessionView>>,
    },
    /// Forget stored sessions unused for longer than `ttl`, never one with a live actor: one
    /// batch per message (the registry's other messages are handled between batches), each
    /// serialised with the registry bringing a session back. Answered with how many were
    /// forgotten in all.
    Expire {
        ttl: std::time::Duration,
        forgotten: usize,
        reply: oneshot::Sender<Result<usize>>,
    },
}

/// The registry's behaviour (its state is [`Shared`]), with what runs the session actors'
/// turns and forks: codex ([`TurnDriver::default`]), or a unit test's fake; and the live
/// session actors, which only the registry writes.
pub struct RegistryActor {
    pub driver: TurnDriver,
    pub live: Arc<Live>,
}

/// The live session actors by session id: written by the registry alone (as it starts an
/// actor, and as it learns one stopped), read by the bridge for its counts and its shutdown.
#[derive(Default)]
pub struct Live(dashmap::DashMap<SessionId, ActorRef<SessionMessage>>);

impl Live {
    /// The live actor of session `id`, if any.
    pub(crate) fn get(&self, id: &SessionId) -> Option<ActorRef<SessionMessage>> {
        self.0.get(id).map(|e| e.value().clone())
    }

    /// Whether session `id` has a live actor.
    pub fn contains(&self, id: &SessionId) -> bool {
        self.0.contains_key(id)
    }

    /// How many sessions have a live actor.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no session has a live actor.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every live actor, at this moment.
    pub(crate) fn actors(&self) -> Vec<ActorRef<SessionMessage>> {
        self.0.iter().map(|e| e.value().clone()).collect()
    }

    fn insert(&self, id: SessionId, actor: ActorRef<SessionMessage>) {
        self.0.insert(id, actor);
    }

    fn remove(&self, id: &SessionId) {
        self.0.remove(id);
    }

    /// Forget the actor whose cell is `cell` (it stopped).
    fn forget(&self, cell: ractor::ActorId) {
        self.0.retain(|_, a| a.get_id() != cell);
    }
}

impl RegistryActor {
    async fn session(
        &self,
        myself: &ActorRef<RegistryMessage>,
        shared: &Arc<Shared>,
        id: &SessionId,
    ) -> Result<ActorRef<SessionMessage>> {
        let existing = self.live.get(id);
        if let Some(a) = existing {
            return Ok(a);
        }
        let record = shared.store.get(id)?;
        let (actor, _) = Actor::spawn_linked(
            None,
            SessionActor,
            SessionArgs {
                shared: shared.clone(),
                driver: self.driver.clone(),
                id: id.clone(),
                record,
            },
            myself.get_cell(),
        )
        .await
        .map_err(|e| Error::SessionFailed(format!("could not start session {id}: {e}")))?;
        self.live.insert(id.clone(), actor.clone());
        Ok(actor)
    }

    /// One batch of the expiry sweep ([`RegistryMessage::Expire`]): the next batch is sent to
    /// itself while some were forgotten (the registry's other messages are handled between
    /// batches), and the sweep's caller is answered with the total once none is left.
    async fn expire(
        &self,
        myself: &ActorRef<RegistryMessage>,
        shared: &Arc<Shared>,
        (ttl, forgotten): (std::time::Duration, usize),
        reply: oneshot::Sender<Result<usize>>,
    ) {
        match expire_batch(shared, &self.live, ttl).await {
            Ok(0) => {
                let flushed = match forgotten {
                    0 => Ok(()),
                    n => {
                        tracing::info!(forgotten = n, "forgot sessions past their time-to-live");
                        shared.store.flush().await.map_err(Error::from)
                    }
                };
                let _ = reply.send(flushed.map(|()| forgotten));
            }
            Ok(n) => {
                // the next batch after whatever else came meanwhile
                let next = RegistryMessage::Expire {
                    ttl,
                    forgotten: forgotten + n,
                    reply,
                };
                if let Err(ractor::MessagingErr::SendErr(RegistryMessage::Expire {
                    reply, ..
                })) = myself.cast(next)
                {
                    let _ = reply.send(Err(Error::SessionFailed(
                        "the session registry stopped during the expiry sweep".into(),
                    )));
                }
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// Send a stored session's actor (started from the store when it is not live) the message
    /// `msg` makes around `reply`: a fork or a rename (`what`, for the words of a refusal).
    async fn to_stored(
        &self,
        (myself, shared): (&ActorRef<RegistryMessage>, &Arc<Shared>),
        id: SessionId,
        what: &str,
        msg: impl FnOnce(ViewReply) -> SessionMessage,
        reply: ViewReply,
    ) {
        if !self.live.contains(&id) && !matches!(shared.store.get(&id), Ok(Some(_))) {
            let _ = reply.send(Err(Error::invalid(
                "sessionId",
                format!("no session {id}; start one with the `codex` tool"),
            )));
            return;
        }
        match self.session(myself, shared, &id).await {
            Ok(actor) => {
                if let Err(ractor::MessagingErr::SendErr(back)) = actor.cast(msg(reply)) {
                    self.live.remove(&id);
                    if let SessionMessage::Fork { reply, .. }
                    | SessionMessage::ThreadOp { reply, .. } = back
                    {
                        let _ = reply.send(Err(Error::Busy(format!(
                            "session {id} was stopping; {what} it again"
                        ))));
                    }
                }
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// Route a turn to its session's actor (a new one when it stopped meanwhile).
    async fn turn(
        &self,
        myself: &ActorRef<RegistryMessage>,
        shared: &Arc<Shared>,
        mut call: Box<TurnCall>,
        reply: oneshot::Sender<Result<Answer>>,
    ) {
        let id = call
            .session_id
            .get_or_insert_with(SessionId::generate)
            .clone();
        match self.session(myself, shared, &id).await {
            Ok(actor) => {
                if let Err(e) = actor.cast(SessionMessage::StartTurn { call, reply }) {
                    // the actor stopped between lookup and cast (idle): forget it; the
                    // caller retries through a fresh actor
                    self.live.remove(&id);
                    let ractor::MessagingErr::SendErr(SessionMessage::StartTurn { call, reply }) =
                        e
                    else {
                        return;
                    };
                    match self.session(myself, shared, &id).await {
                        Ok(actor) => {
                            let _ = actor.cast(SessionMessage::StartTurn { call, reply });
                        }
                        Err(err) => {
                            let _ = reply.send(Err(err));
                        }
                    }
                }
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

impl Actor for RegistryActor {
    type Msg = RegistryMessage;
    type State = Arc<Shared>;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Arc<Shared>,
    ) -> Result<Arc<Shared>, ActorProcessingErr> {
        Ok(shared)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        shared: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RegistryMessage::Turn { call, reply } => self.turn(&myself, shared, call, reply).await,
            RegistryMessage::Get { id, let_go, reply } => {
                get(shared, &self.live, (id, let_go), reply)
            }
            RegistryMessage::Close {
                id,
                delete_thread,
                drop_changes,
                client,
                host,
                reply,
            } => {
                let how = (delete_thread, drop_changes, host);
                close(self, &myself, shared, id, how, client, reply).await
            }
            RegistryMessage::Steer {
                id,
                text,
                client,
                reply,
            } => steer(&self.live, id, text, client, reply),
            RegistryMessage::Fork {
                id,
                client,
                timeout,
                reply,
            } => {
                let msg = |reply| SessionMessage::Fork {
                    client,
                    timeout,
                    reply,
                };
                let to = (&myself, &*shared);
                self.to_stored(to, id, "fork", msg, reply).await
            }
            RegistryMessage::ThreadOp {
                id,
                op,
                client,
                timeout,
                reply,
            } => {
                let what = op.verb();
                let msg = |reply| SessionMessage::ThreadOp {
                    op,
                    client,
                    timeout,
                    reply,
                };
                let to = (&myself, &*shared);
                self.to_stored(to, id, what, msg, reply).await
            }
            RegistryMessage::Expire {
                ttl,
                forgotten,
                reply,
            } => self.expire(&myself, shared, (ttl, forgotten), reply).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        _shared: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                self.live.forget(cell.get_id());
                tracing::debug!(?reason, "session or one-shot actor stopped");
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                self.live.forget(cell.get_id());
                tracing::error!(error = %crate::security::redact::redact(&err.to_string()), "session or one-shot actor failed; a session restarts from its stored record on the next call");
            }
            _ => {}
        }
        Ok(())
    }
}

/// Hand a steer to a live session's actor; a session without one runs no turn.
fn steer(
    live: &Live,
    id: SessionId,
    text: crate::security::prompt::Prompt,
    client: Arc<crate::actors::client::ClientContext>,
    reply: oneshot::Sender<Result<()>>,
) {
    let unsent = match live.get(&id) {
        Some(actor) => match actor.cast(SessionMessage::Steer {
            text,
            client,
            reply,
        }) {
            Ok(()) => None,
            Err(ractor::MessagingErr::SendErr(SessionMessage::Steer { reply, .. })) => Some(reply),
            Err(_) => None,
        },
        None => Some(reply),
    };
    if let Some(reply) = unsent {
        let _ = reply.send(Err(Error::invalid(
            "sessionId",
            format!(
                "no turn is running on session {id}; send the message as a new turn \
                 with the `codex` tool"
            ),
        )));
    }
}

/// Answer `getSession`: a live session's actor answers from its record; one without a live
/// actor (or whose actor stopped meanwhile, leaving its record flushed) is read from the store.
fn get(
    shared: &Arc<Shared>,
    live: &Live,
    (id, let_go): (SessionId, bool),
    reply: oneshot::Sender<Result<Option<crate::calls::SessionView>>>,
) {
    let existing = live.get(&id);
    if let (true, Some(actor)) = (let_go, &existing) {
        // handled before the `Get` behind it (one mailbox): the answer comes once it let go
        let _ = actor.cast(SessionMessage::CloseWarm);
    }
    // a live actor answers from its record; one that stopped meanwhile left its
    // record flushed in the store
    let reply = match existing {
        Some(actor) => match actor.cast(SessionMessage::Get { reply }) {
            Ok(()) => return,
            Err(ractor::MessagingErr::SendErr(SessionMessage::Get { reply })) => {
                live.remove(&id);
                reply
            }
            Err(_) => return,
        },
        None => reply,
    };
    let stored = shared.store.get(&id).map_err(Error::from);
    let _ = reply.send(stored.map(|r| r.map(|r| crate::calls::SessionView::of(&r, false))));
}

/// Close a session, always through its actor (a stored session's is started from its record
/// for it): a turn sent behind the close reaches the same actor after it, so no turn can read
/// the record before the close forgets it and write it back afterwards. An actor that stopped
/// (idle) or drained as the close arrived gives the message back, and a fresh one takes it.
async fn close(
    registry: &RegistryActor,
    myself: &ActorRef<RegistryMessage>,
    shared: &Arc<Shared>,
    id: SessionId,
    (delete_thread, drop_changes, host): (bool, bool, Option<String>),
    client: Arc<crate::actors::client::ClientContext>,
    reply: oneshot::Sender<Result<Option<SessionRecord>>>,
) {
    let mut msg = SessionMessage::Close {
        delete_thread,
        drop_changes,
        client,
        host,
        reply,
    };
    // a second attempt always reaches a fresh actor (the stale one is forgotten first)
    for _ in 0..2 {
        let actor = match registry.session(myself, shared, &id).await {
            Ok(a) => a,
            Err(e) => {
                if let SessionMessage::Close { reply, .. } = msg {
                    let _ = reply.send(Err(e));
                }
                return;
            }
        };
        match actor.cast(msg) {
            Ok(()) => return,
            Err(ractor::MessagingErr::SendErr(back)) => {
                registry.live.remove(&id);
                msg = back;
            }
            // the message is gone with the actor; its caller sees the failure
            Err(_) => {
                registry.live.remove(&id);
                return;
            }
        }
    }
    if let SessionMessage::Close { reply, .. } = msg {
        let _ = reply.send(Err(Error::Busy(format!(
            "session {id} was stopping; close it again"
        ))));
    }
}

/// One batch of the expiry sweep, run by the registry ([`RegistryMessage::Expire`]): forget
/// up to [`EXPIRY_BATCH`] stored sessions unused for longer than `ttl` that have no live
/// actor; how many were forgotten (0: none left). Each `CODEX_HOME` that lost a session is
/// told its list changed ([`Shared::list_changed`]: a host's `@` menu drops them at once).
/// Not flushed: the sweep flushes once at its end.
async fn expire_batch(shared: &Shared, live: &Live, ttl: std::time::Duration) -> Result<usize> {
    let cutoff = crate::store::now_ms().saturating_sub(ttl.as_millis() as u64);
    // sled's calls block: each batch runs on the blocking pool, so a large aged store never
    // holds a runtime worker for seconds
    let blocking = |e: tokio::task::JoinError| {
        Error::io("running a pass of the expiry sweep")(std::io::Error::other(e))
    };
    let store = shared.store.clone();
    let batch = tokio::task::spawn_blocking(move || store.unused_since(cutoff, EXPIRY_BATCH))
        .await
        .map_err(blocking)??;
    // a session with a worktree of its own holds work: only a close removes it (the
    // worktree with it), never the expiry
    let batch: Vec<SessionId> = batch
        .into_iter()
        .filter(|id| !live.contains(id))
        .filter(|id| !matches!(shared.store.get(id), Ok(Some(r)) if r.worktree.is_some()))
        .collect();
    let n = batch.len();
    if n > 0 {
        let store = shared.store.clone();
        let homes = tokio::task::spawn_blocking(move || {
            let mut homes = std::collections::BTreeSet::new();
            for id in &batch {
                if let Some(home) = store.remove(id)?.and_then(|r| r.codex_home) {
                    homes.insert(home);
                }
            }
            Ok::<_, crate::store::StoreError>(homes)
        })
        .await
        .map_err(blocking)??;
        for home in homes {
            let _ = shared.list_changed.send(home.into());
        }
    }
    Ok(n)
}

/// How many expired sessions one pass of the sweep forgets.
const EXPIRY_BATCH: usize = 1000;
