//! One conversation with a `codex app-server`, over its [`Client`]: the thread it has loaded
//! (opened from the fixed templates, its reported policy checked), and each turn driven from
//! `turn/start` to `turn/completed`: codex's notifications mapped to the bridge's turn events
//! ([`super::translate`]), the policy it reports watched, its questions handed to the turn's
//! asker (screened by whoever runs the process), steers sent, the usage summed. Nothing here
//! spawns, waits for or kills a process: `codex::process` owns the process around it, and ends
//! it when a [`Stop`] says so. Tested over an in-memory duplex, as [`Client`] is.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::client::{Client, ClientError, Event};
use super::protocol::{
    self, Approvals, Notification, PolicyWatch, ThreadOpened, TurnParams, TurnRef,
};
use super::translate;
use crate::approval::Asker;
use crate::approval::DecisionRecord;
use crate::approval::from_codex::CodexQuestion;
use crate::codex::argv::WarmTurn;
use crate::codex::events::{self, Transcript, describe};
use crate::codex::process::turn::RunOptions;
use crate::confine;
use crate::plan::values::SandboxLevel;
use crate::security::ids::{SessionName, ThreadId};

/// How long a request that ends a turn or lets go of a thread may take (`turn/interrupt`,
/// `thread/backgroundTerminals/clean`; `thread/unsubscribe` five times as long).
pub const STOP_STEP: Duration = Duration::from_millis(200);
/// Most questions of one turn asked at once; more are declined.
const MAX_OPEN_QUESTIONS: usize = 4;
/// How long codex's `turn/steer` may take to be accepted.
pub const STEER_TIMEOUT: Duration = Duration::from_secs(5);
/// A message to add to the running turn, and where to say whether codex took it.
pub struct Steer {
    pub text: crate::security::prompt::Prompt,
    pub reply: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// What reaches a warm turn while it runs, besides codex's own events.
#[derive(Default)]
pub struct TurnControl {
    /// Answers codex's questions of this turn, and makes the turn go with approval policy
    /// `on-request`. `None`: the turn goes with `never`, and any question is declined at once.
    pub asker: Option<Asker>,
    /// Messages for `turn/steer`, taken once codex has started the turn.
    pub steers: Option<mpsc::UnboundedReceiver<Steer>>,
}

impl TurnControl {
    /// The approval policy the turn is sent with.
    pub fn approvals(&self) -> Approvals {
        match self.asker {
            Some(_) => Approvals::OnRequest,
            None => Approvals::Never,
        }
    }
}

/// Which thread a turn runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadWanted {
    /// A new thread.
    Start,
    /// The session's stored thread (loaded already, or resumed from its rollout).
    Resume(ThreadId),
}

/// The thread a process has loaded, and the policy codex last reported for it.
struct Loaded {
    thread: ThreadId,
    watch: PolicyWatch,
    /// Codex's rollout file of the thread (`None`: ephemeral), where the model's calls are.
    rollout: Option<std::path::PathBuf>,
}

/// How a question of the running turn reaches its asker: screened by whoever runs the process
/// (the turn's working directory given, what resolves outside it marked, a file change held
/// back until checked again), given the asker, the question, the thread's rollout and where
/// the `fileChange` items codex reports done are announced.
pub type Screen = dyn Fn(
        Asker,
        CodexQuestion,
        Option<PathBuf>,
        tokio::sync::broadcast::Sender<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = DecisionRecord> + Send>>
    + Send
    + Sync;

/// A conversation with one app-server: its client, what codex sends, the thread it has loaded.
pub struct Conversation<W> {
    /// `None` once closed.
    client: Option<Client<W>>,
    events: UnboundedReceiver<Event>,
    /// Codex's questions (approvals, input, nested servers' forms): answered only by the
    /// running turn's asker, else declined.
    asked: UnboundedReceiver<CodexQuestion>,
    loaded: Option<Loaded>,
    /// Whether codex accepted the last turn (`turn/start` answered).
    accepted: bool,
    /// Its output ended, or codex did not let go of a thread: never used again.
    spent: bool,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Conversation<W> {
    /// A conversation over a client, its events and the questions it hands over
    /// ([`Client::with_answerer`]).
    pub fn new(
        client: Client<W>,
        events: UnboundedReceiver<Event>,
        asked: UnboundedReceiver<CodexQuestion>,
    ) -> Self {
        Conversation {
            client: Some(client),
            events,
            asked,
            loaded: None,
            accepted: false,
            spent: false,
        }
    }

    /// The `initialize` handshake.
    pub async fn handshake(&self, version: &str) -> Result<(), ClientError> {
        match &self.client {
            Some(c) => c.handshake(version).await.map(|_| ()),
            None => Err(ClientError::Closed),
        }
    }

    /// Take in what came since the last turn: a late notification updates the policy watch, an
    /// end of output marks it spent, a question is declined (no turn waits for it).
    pub fn take_in(&mut self) {
        while let Ok(ev) = self.events.try_recv() {
            match ev {
                Event::Notification(n) => {
                    if let Some(l) = &mut self.loaded {
                        l.watch.observe(&n);
                    }
                }
                Event::Declined(req) => {
                    tracing::warn!(method = %req.method, "declined a request from codex app-server between turns");
                }
                Event::Closed(_) => self.spent = true,
            }
        }
        while let Ok(asking) = self.asked.try_recv() {
            tracing::info!(method = %asking.request.method, "declined a question from codex app-server between turns");
            asking.asked.decline();
        }
    }

    /// Whether its output ended or a thread was not let go of.
    pub fn spent(&self) -> bool {
        self.spent
    }

    /// Whether codex accepted the last turn ([`Conversation::drive`] clears it first).
    pub fn accepted(&self) -> bool {
        self.accepted
    }

    /// Forget whether the last turn was accepted, before the next one.
    pub fn start_turn(&mut self) {
        self.accepted = false;
    }

    /// The rollout file codex reported for the thread it has loaded (`None`: none loaded, or
    /// an ephemeral thread).
    pub fn rollout(&self) -> Option<&std::path::Path> {
        self.loaded.as_ref().and_then(|l| l.rollout.as_deref())
    }

    /// `turn/interrupt` on `turn` of the loaded thread, bounded by [`STOP_STEP`]: codex records
    /// the turn as interrupted (the process is killed afterwards all the same).
    pub async fn interrupt(&self, turn: TurnRef) {
        if let (Some(l), Some(client)) = (&self.loaded, &self.client) {
            let _ = tokio::time::timeout(
                STOP_STEP,
                client.request(&protocol::turn_interrupt(&l.thread, &turn)),
            )
            .await;
        }
    }

    /// `thread/backgroundTerminals/clean` on the loaded thread, bounded by [`STOP_STEP`].
    pub async fn clean_terminals(&self) {
        if let (Some(l), Some(client)) = (&self.loaded, &self.client) {
            let _ = tokio::time::timeout(
                STOP_STEP,
                client.request(&protocol::clean_background_terminals(&l.thread)),
            )
            .await;
        }
    }

    /// End it cleanly: EOF on stdin, and up to `grace` for the output to end.
    pub async fn close(&mut self, grace: Duration) {
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(grace, client.close()).await;
        }
    }

    /// Fork the stored `thread` (`thread/fork`) within `timeout`; the fork is loaded
    /// afterwards. Its reported policy is checked by the caller ([`Forked::policy`]).
    pub async fn fork(
        &mut self,
        thread: ThreadId,
        cwd: &std::path::Path,
        model: Option<&crate::security::ids::ModelId>,
        timeout: Duration,
    ) -> Result<ThreadId, ThreadOpFailed> {
        let msg = protocol::thread_fork(&thread, cwd, model)
            .map_err(|e| ThreadOpFailed::Refused(e.to_string()))?;
        let client = self.client.as_ref().ok_or(ThreadOpFailed::Closed)?;
        let opened = match tokio::time::timeout(timeout, client.open_thread(&msg)).await {
            Err(_) => return Err(ThreadOpFailed::TimedOut),
            Ok(Err(e)) => {
                return Err(ThreadOpFailed::Refused(format!(
                    "codex could not fork the thread: {e}"
                )));
            }
            Ok(Ok(o)) => o,
        };
        if let Err(m) = opened.policy.check(SandboxLevel::ReadOnly, cwd) {
            return Err(ThreadOpFailed::Policy(m.to_string()));
        }
        let forked = opened.thread;
        self.loaded = Some(Loaded {
            thread: forked,
            watch: PolicyWatch::new(&opened),
            rollout: opened.path.as_ref().map(PathBuf::from),
        });
        Ok(forked)
    }
    /// Load the stored `thread` (of the working directory `cwd`) for a one-off operation:
    /// `thread/resume` from the read-only template unless it is the thread loaded, within
    /// `timeout`; the client to send the operation on.
    async fn load(
        &mut self,
        thread: ThreadId,
        cwd: &std::path::Path,
        timeout: Duration,
    ) -> Result<&Client<W>, ThreadOpFailed> {
        let client = self.client.as_ref().ok_or(ThreadOpFailed::Closed)?;
        if self.loaded.as_ref().is_none_or(|l| l.thread != thread) {
            let msg = protocol::thread_resume(&thread, cwd, None)
                .map_err(|e| ThreadOpFailed::Refused(e.to_string()))?;
            let opened = tokio::time::timeout(timeout, client.open_thread(&msg))
                .await
                .map_err(|_| ThreadOpFailed::TimedOut)?
                .map_err(|e| refused("open the thread", e))?;
            if let Err(m) = opened.policy.check(SandboxLevel::ReadOnly, cwd) {
                return Err(ThreadOpFailed::Policy(m.to_string()));
            }
            self.loaded = Some(Loaded {
                thread,
                watch: PolicyWatch::new(&opened),
                rollout: opened.path.as_ref().map(PathBuf::from),
            });
        }
        Ok(client)
    }

    /// Give the stored `thread` (of the working directory `cwd`) the name `name`
    /// (`thread/name/set`, the thread loaded first: [`Conversation::load`]), within `timeout`.
    pub async fn set_name(
        &mut self,
        thread: ThreadId,
        cwd: &std::path::Path,
        name: &SessionName,
        timeout: Duration,
    ) -> Result<(), ThreadOpFailed> {
        let t0 = Instant::now();
        let client = self.load(thread, cwd, timeout).await?;
        let left = timeout.saturating_sub(t0.elapsed());
        let named = tokio::time::timeout(
            left,
            client.request(&protocol::thread_set_name(&thread, name)),
        )
        .await
        .map_err(|_| ThreadOpFailed::TimedOut)?;
        named.map(drop).map_err(|e| refused("name the thread", e))
    }

    /// Drop the last `turns` turns of the stored `thread` (of `cwd`) from its history, the
    /// thread loaded first, within `timeout`: `thread/rollback` (codex 0.145.0), else, where
    /// codex no longer has it, `thread/turns/list` and `thread/revert` to before the oldest of
    /// those turns (0.171.0). Files codex changed stay as they are.
    pub async fn rewind(
        &mut self,
        thread: ThreadId,
        cwd: &std::path::Path,
        turns: u32,
        timeout: Duration,
    ) -> Result<(), ThreadOpFailed> {
        let t0 = Instant::now();
        let left = |t0: Instant| timeout.saturating_sub(t0.elapsed());
        let client = self.load(thread, cwd, timeout).await?;
        let rolled = tokio::time::timeout(
            left(t0),
            client.request(&protocol::thread_rollback(&thread, turns)),
        )
        .await
        .map_err(|_| ThreadOpFailed::TimedOut)?;
        let gone = match rolled {
            Ok(_) => return Ok(()),
            // the method is gone (0.171.0): a refusal that names it as unknown
            Err(ClientError::Refused { error, .. })
                if error.code == -32601 || error.code == -32600 =>
            {
                error
            }
            Err(e) => return Err(refused("rewind the thread", e)),
        };
        let page = tokio::time::timeout(
            left(t0),
            client.request(&protocol::thread_turns_list(&thread, turns)),
        )
        .await
        .map_err(|_| ThreadOpFailed::TimedOut)?
        .map_err(|e| {
            ThreadOpFailed::Refused(format!(
                "codex has neither `thread/rollback` ({}) nor a list of the thread's turns: {e}",
                gone.message
            ))
        })?;
        let ids = page.ids();
        let Some(oldest) = ids.get(turns as usize - 1) else {
            return Err(ThreadOpFailed::Refused(format!(
                "the thread has {} turn(s); it cannot go back {turns}",
                ids.len()
            )));
        };
        let reverted = tokio::time::timeout(
            left(t0),
            client.request(&protocol::thread_revert(&thread, oldest)),
        )
        .await
        .map_err(|_| ThreadOpFailed::TimedOut)?;
        reverted
            .map(drop)
            .map_err(|e| refused("rewind the thread", e))
    }

    /// Compact the stored `thread` (of `cwd`): `thread/compact/start`, the thread loaded
    /// first, then the compaction's turn read to its `turn/completed` within `timeout`, each of
    /// its events given to `on_event` (progress). The context's size in tokens before and
    /// after, as codex reports it (`last.totalTokens` of its first and last token report of
    /// the compaction), when it does.
    pub async fn compact(
        &mut self,
        thread: ThreadId,
        cwd: &std::path::Path,
        timeout: Duration,
        on_event: &mut (dyn FnMut(&events::Event) + Send),
    ) -> Result<Option<(u64, u64)>, ThreadOpFailed> {
        let deadline = tokio::time::Instant::now() + timeout;
        let client = self.load(thread, cwd, timeout).await?;
        tokio::time::timeout_at(
            deadline,
            client.request(&protocol::thread_compact_start(&thread)),
        )
        .await
        .map_err(|_| ThreadOpFailed::TimedOut)?
        .map_err(|e| refused("compact the thread", e))?;
        let mut counts = None;
        loop {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .map_err(|_| ThreadOpFailed::TimedOut)?;
            let n = match ev {
                Some(Event::Notification(n)) => n,
                Some(_) => continue,
                None => return Err(ThreadOpFailed::Closed),
            };
            match n {
                Notification::TurnStarted { thread_id, .. } if thread_id == thread => {
                    on_event(&events::Event::TurnStarted);
                }
                // the context's size as codex counts it (`last.totalTokens`): the first
                // report is the compaction's own request (the whole context), the last the
                // compacted context
                Notification::TokenUsage {
                    thread_id, last, ..
                } if thread_id == thread => {
                    counts = Some(match counts {
                        None => (last.total, last.total),
                        Some((before, _)) => (before, last.total),
                    });
                }
                Notification::TurnCompleted {
                    thread_id,
                    status,
                    error,
                    ..
                } if thread_id == thread => {
                    return match status {
                        protocol::TurnStatus::Completed => Ok(counts),
                        other => Err(ThreadOpFailed::Refused(format!(
                            "codex's compaction ended {other:?}{}",
                            error.map(|e| format!(": {e}")).unwrap_or_default()
                        ))),
                    };
                }
                _ => {}
            }
        }
    }

    /// Drive one turn from `turn/start` to `turn/completed`: each notification of this turn
    /// mapped to the bridge's turn events (folded into `t`, shown through `on_event`), codex's
    /// questions and the steers served meanwhile, the reported policy checked at the start and
    /// at the end.
    ///
    /// One piece on purpose: one `select!` loop whose arms share the turn's state (the policy
    /// watch, the usage sum, the transcript and the questions in flight), and every exit of
    /// which is a [`Stop`] or the turn's end, read in one place.
    #[allow(clippy::too_many_arguments)]
    pub async fn drive(
        &mut self,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        opts: &RunOptions,
        deadline: tokio::time::Instant,
        (ctl, asks, screen): (&mut TurnControl, &mut Asks, &Screen),
        t: &mut Transcript,
        on_event: &mut (impl FnMut(&events::Event) + Send),
    ) -> Result<(), Stop> {
        confine::recheck(turn.cwd()).map_err(|e| Stop::Refused(e.to_string()))?;
        let cwd = turn.cwd().path();
        let t0 = Instant::now();
        let thread = self.open(wanted, turn, opts, deadline).await?;
        tracing::debug!(
            open_ms = t0.elapsed().as_millis() as u64,
            "warm thread open"
        );
        // the id was parsed as codex's result was read: one that is not a UUID was refused
        let opened = events::Event::ThreadStarted { thread_id: thread };
        t.apply_event(&opened);
        on_event(&opened);
        let params = TurnParams {
            thread: &thread,
            prompt: turn.prompt(),
            sandbox: Some(turn.sandbox()),
            cwd,
            model: turn.model(),
            effort: turn.effort(),
        };
        let approvals = ctl.approvals();
        let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
        let started_turn = client.start_turn_with_schema(&params, approvals, turn.output_schema());
        let turn_id = bounded(opts, deadline, started_turn).await?;
        self.accepted = true;
        // what the turn may print, counted from here (a resumed thread's history is not)
        let read_at_start = client.bytes_read();
        let cap = opts.limits.max_output_bytes as u64;
        let mut usage = opts.prior_thread_usage;
        let mut answering = FuturesUnordered::new();
        // the `fileChange` items codex reports done, for an accepted change's freeze
        let (applied, _) = tokio::sync::broadcast::channel::<String>(64);
        loop {
            let ev = tokio::select! {
                biased;
                _ = opts.cancel.cancelled() => return Err(Stop::Cancelled(Some(turn_id))),
                _ = tokio::time::sleep_until(deadline) => return Err(Stop::TimedOut(Some(turn_id))),
                Some(record) = answering.next(), if !answering.is_empty() => {
                    asks.records.push(record);
                    continue;
                }
                Some(asking) = self.asked.recv() => {
                    // only a question of this turn (its thread, and its turn when codex names
                    // one), while it runs, goes to its asker; a few at once at most
                    let ours = asking.request.is_of(&thread, &turn_id);
                    match (&ctl.asker, ours) {
                        (Some(ask), true) if answering.len() < MAX_OPEN_QUESTIONS => {
                            let rollout = self.loaded.as_ref().and_then(|l| l.rollout.clone());
                            answering.push(screen(ask.clone(), asking, rollout, applied.clone()))
                        }
                        _ => {
                            tracing::info!(method = %asking.request.method, ours, "declined a question from codex app-server");
                            asking.asked.decline();
                        }
                    }
                    continue;
                }
                Some(steer) = next_steer(&mut ctl.steers) => {
                    if steer.reply.is_closed() {
                        // its caller gave up waiting: not sent
                        continue;
                    }
                    let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                    let taken = steer_turn(client, &thread, &turn_id, &steer.text).await;
                    if taken.is_ok() {
                        asks.steered.push(steer.text.into_string());
                    }
                    let _ = steer.reply.send(taken);
                    continue;
                }
                ev = self.events.recv() => ev,
            };
            if let Some(c) = &self.client
                && c.bytes_read().saturating_sub(read_at_start) > cap
            {
                return Err(Stop::OutputCap(Some(turn_id)));
            }
            let n = match ev {
                Some(Event::Notification(n)) => n,
                Some(Event::Declined(req)) => {
                    tracing::warn!(method = %req.method, "declined a request from codex app-server");
                    continue;
                }
                Some(Event::Closed(e)) => return Err(Stop::Closed(e.flatten_closed())),
                None => return Err(Stop::Closed(None)),
            };
            let loaded = self
                .loaded
                .as_mut()
                .ok_or_else(|| Stop::Refused("no thread is loaded".into()))?;
            loaded.watch.observe(&n);
            let ours = |th: &ThreadId, tu: &TurnRef| *th == thread && *tu == turn_id;
            match &n {
                Notification::TurnStarted {
                    thread_id,
                    turn_id: tu,
                } if ours(thread_id, tu) => {
                    if let Err(m) =
                        loaded
                            .watch
                            .current()
                            .check_with(turn.sandbox(), cwd, approvals)
                    {
                        return Err(Stop::Policy(m.to_string(), Some(turn_id)));
                    }
                    let ev = events::Event::TurnStarted;
                    on_event(&ev);
                }
                Notification::TokenUsage {
                    thread_id,
                    turn_id: tu,
                    last,
                    ..
                } if ours(thread_id, tu) => {
                    usage = usage.plus(&translate::usage(last));
                }
                Notification::ItemStarted {
                    thread_id,
                    turn_id: tu,
                    item,
                } if ours(thread_id, tu) => {
                    if let Some(ev) = translate::started(item) {
                        t.apply_event(&ev);
                        on_event(&ev);
                    }
                }
                Notification::ItemCompleted {
                    thread_id,
                    turn_id: tu,
                    item,
                } if ours(thread_id, tu) => {
                    if let protocol::Item::FileChange { id, .. } = item {
                        let _ = applied.send(id.clone());
                    }
                    if let Some(ev) = translate::completed(item) {
                        t.apply_event(&ev);
                        on_event(&ev);
                    }
                }
                Notification::Error {
                    thread_id,
                    turn_id: tu,
                    message,
                    will_retry,
                } if ours(thread_id, tu) => {
                    // a retry is its own variant: nothing downstream reads the message's text
                    let ev = if *will_retry {
                        events::Event::Retrying {
                            message: message.clone(),
                        }
                    } else {
                        events::Event::Error {
                            message: message.clone(),
                        }
                    };
                    t.apply_event(&ev);
                    if describe(&ev).is_some() {
                        on_event(&ev);
                    }
                }
                Notification::TurnCompleted {
                    thread_id,
                    turn_id: tu,
                    status,
                    error,
                } if ours(thread_id, tu) => {
                    // checked again at the end: a `turn/started` that never came (or came in
                    // a shape not read), or a settings change after it, fails closed here
                    if let Err(m) =
                        loaded
                            .watch
                            .current()
                            .check_with(turn.sandbox(), cwd, approvals)
                    {
                        return Err(Stop::Policy(m.to_string(), None));
                    }
                    let ev = translate::turn_completed(*status, error.as_deref(), usage);
                    if let events::Event::TurnCompleted { .. } = ev {
                        t.apply_event(&ev);
                        on_event(&ev);
                    } else {
                        t.thread_usage = Some(usage);
                        t.apply_event(&ev);
                    }
                    return Ok(());
                }
                _ => {}
            }
        }
    }

    /// The thread a turn runs on: the loaded one when it is the one wanted, else opened from
    /// the templates, its reported policy checked.
    async fn open(
        &mut self,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        opts: &RunOptions,
        deadline: tokio::time::Instant,
    ) -> Result<ThreadId, Stop> {
        let cwd = turn.cwd().path();
        let refused = |e: protocol::ProtocolError| Stop::Refused(e.to_string());
        let opened: ThreadOpened = match wanted {
            ThreadWanted::Resume(thread) => {
                if let Some(l) = &self.loaded
                    && l.thread == thread
                {
                    return Ok(thread);
                }
                let msg = protocol::thread_resume(&thread, cwd, turn.model()).map_err(refused)?;
                let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                bounded(opts, deadline, client.open_thread(&msg)).await?
            }
            ThreadWanted::Start => {
                let msg =
                    protocol::thread_start(cwd, turn.model(), turn.ephemeral()).map_err(refused)?;
                let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                bounded(opts, deadline, client.open_thread(&msg)).await?
            }
        };
        if let Err(m) = opened.policy.check(SandboxLevel::ReadOnly, cwd) {
            return Err(Stop::Policy(m.to_string(), None));
        }
        let thread = opened.thread;
        self.loaded = Some(Loaded {
            thread,
            watch: PolicyWatch::new(&opened),
            rollout: opened.path.as_ref().map(std::path::PathBuf::from),
        });
        Ok(thread)
    }

    /// Let go of the loaded thread (`thread/unsubscribe`, bounded by [`STOP_STEP`]): a
    /// one-shot call's ephemeral thread is gone with it, so the next call on this process
    /// starts from nothing. Whether codex confirmed it; a process that did not is not reused
    /// (it is marked spent).
    pub async fn forget_thread(&mut self) -> bool {
        let (Some(l), Some(client)) = (self.loaded.take(), &self.client) else {
            return true;
        };
        let answer = tokio::time::timeout(
            STOP_STEP * 5,
            client.request(&protocol::thread_unsubscribe(&l.thread)),
        )
        .await;
        let gone = matches!(&answer, Ok(Ok(u)) if u.unloaded());
        if !gone {
            tracing::warn!(
                ?answer,
                "codex app-server did not let go of a one-shot thread"
            );
            self.spent = true;
        }
        gone
    }
}

/// Codex refused a one-off operation (`what`).
fn refused(what: &str, e: ClientError) -> ThreadOpFailed {
    ThreadOpFailed::Refused(format!("codex could not {what}: {e}"))
}

/// Why a fork (or another one-off operation on a thread) did not happen.
#[derive(Debug)]
pub enum ThreadOpFailed {
    /// No answer within the time given.
    TimedOut,
    /// Codex refused it, or the bridge refused to send it.
    Refused(String),
    /// The process's input is closed.
    Closed,
    /// The policy codex reports for the fork is not the template's.
    Policy(String),
}

/// What a turn's questions and steers left for its result.
#[derive(Default)]
pub struct Asks {
    pub records: Vec<DecisionRecord>,
    pub steered: Vec<String>,
}

/// The next steer, when the turn has a steer inbox (never, otherwise).
async fn next_steer(steers: &mut Option<mpsc::UnboundedReceiver<Steer>>) -> Option<Steer> {
    match steers {
        Some(rx) => match rx.recv().await {
            Some(s) => Some(s),
            None => {
                *steers = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// `turn/steer` on the running turn, bounded; codex's refusal as a sentence.
async fn steer_turn<W: tokio::io::AsyncWrite + Unpin + Send + 'static>(
    client: &Client<W>,
    thread: &ThreadId,
    turn: &TurnRef,
    text: &crate::security::prompt::Prompt,
) -> Result<(), String> {
    let msg = protocol::turn_steer(thread, turn, text).map_err(|e| e.to_string())?;
    match tokio::time::timeout(STEER_TIMEOUT, client.request(&msg)).await {
        Err(_) => Err(format!(
            "codex did not take the message within {}s",
            STEER_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(format!("codex refused the message: {e}")),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Why a turn did not run to `turn/completed`.
pub enum Stop {
    Cancelled(Option<TurnRef>),
    TimedOut(Option<TurnRef>),
    /// The turn printed more than `max_output_bytes`.
    OutputCap(Option<TurnRef>),
    /// The policy codex reports is not the one sent.
    Policy(String, Option<TurnRef>),
    /// Codex refused a request, or the bridge refused to send one.
    Refused(String),
    /// The process ended (or its output could not be read).
    Closed(Option<ClientError>),
}

/// `Closed(Some(ClientError::Closed))` is the plain end of output.
pub trait FlattenClosed {
    fn flatten_closed(self) -> Option<ClientError>;
}

impl FlattenClosed for Option<ClientError> {
    fn flatten_closed(self) -> Option<ClientError> {
        match self {
            Some(ClientError::Closed) | None => None,
            other => other,
        }
    }
}

/// A request's answer, unless a cancel, the deadline or the end of the process comes first.
pub async fn bounded<T>(
    opts: &RunOptions,
    deadline: tokio::time::Instant,
    fut: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, Stop> {
    tokio::select! {
        biased;
        _ = opts.cancel.cancelled() => Err(Stop::Cancelled(None)),
        _ = tokio::time::sleep_until(deadline) => Err(Stop::TimedOut(None)),
        r = fut => r.map_err(|e| match e {
            ClientError::Closed => Stop::Closed(None),
            ClientError::Refused { .. } => Stop::Refused(e.to_string()),
            other => Stop::Closed(Some(other)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::path::Path;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, duplex};

    const THREAD: &str = "01a22759-e393-7f71-bea4-35a12106bc11";
    const FORKED: &str = "01a22759-e393-7f71-bea4-35a12106bc22";

    /// A conversation over two in-memory pipes, and the scripted app-server's ends.
    fn conversation() -> (
        Conversation<tokio::io::DuplexStream>,
        tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
        tokio::io::DuplexStream,
    ) {
        let (client_out, server_in) = duplex(1 << 16);
        let (server_out, client_in) = duplex(1 << 16);
        let (client, events, asked) =
            Client::with_answerer(client_in, client_out, 1 << 16, Duration::from_secs(5));
        (
            Conversation::new(client, events, asked),
            BufReader::new(server_in).lines(),
            server_out,
        )
    }

    /// `thread/fork`'s result as codex 0.171.0 writes it, in `cwd` with `sandbox`.
    fn forked(id: u64, cwd: &str, sandbox: Value) -> String {
        json!({"id": id, "result": {"thread": {"id": FORKED, "ephemeral": false,
            "historyMode": "paginated", "path": "/h/sessions/rollout-f.jsonl", "cwd": cwd,
            "cliVersion": "0.171.0", "source": "vscode", "turns": []},
            "model": "m", "modelProvider": "mock", "serviceTier": null, "cwd": cwd,
            "runtimeWorkspaceRoots": [cwd], "instructionSources": [], "approvalPolicy": "never",
            "approvalsReviewer": "user", "sandbox": sandbox, "activePermissionProfile": null,
            "reasoningEffort": null, "multiAgentMode": "explicitRequestOnly",
            "disabledPluginIds": []}})
        .to_string()
    }

    /// The scripted server: read the fork request, check it is one, answer with `answer(id)`.
    async fn answer_fork(
        lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
        out: &mut tokio::io::DuplexStream,
        answer: impl FnOnce(u64) -> String,
    ) {
        let line = lines.next_line().await.unwrap().unwrap();
        let req: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(req["method"], "thread/fork", "{line}");
        assert_eq!(req["params"]["threadId"], THREAD, "{line}");
        let id = req["id"].as_u64().unwrap();
        out.write_all(answer(id).as_bytes()).await.unwrap();
        out.write_all(b"\n").await.unwrap();
    }

    #[tokio::test]
    async fn a_fork_is_loaded_only_when_codex_reports_the_template_policy() {
        let thread = ThreadId::parse(THREAD).unwrap();
        let read_only = json!({"type": "readOnly", "networkAccess": false});
        let (mut conv, mut lines, mut out) = conversation();
        let asked = conv.fork(thread, Path::new("/w"), None, Duration::from_secs(5));
        let (got, ()) = tokio::join!(
            asked,
            answer_fork(&mut lines, &mut out, |id| forked(
                id,
                "/w",
                read_only.clone()
            ))
        );
        assert_eq!(got.unwrap(), ThreadId::parse(FORKED).unwrap());
        assert_eq!(
            conv.rollout(),
            Some(Path::new("/h/sessions/rollout-f.jsonl")),
            "the fork is the loaded thread"
        );

        // codex reports another sandbox (or directory) than the template's: refused, not loaded
        let (mut conv, mut lines, mut out) = conversation();
        let writable = json!({"type": "workspaceWrite", "writableRoots": ["/w"],
            "networkAccess": false, "excludeTmpdirEnvVar": false, "excludeSlashTmp": false});
        let asked = conv.fork(thread, Path::new("/w"), None, Duration::from_secs(5));
        let (got, ()) = tokio::join!(
            asked,
            answer_fork(&mut lines, &mut out, |id| forked(id, "/w", writable))
        );
        assert!(matches!(got, Err(ThreadOpFailed::Policy(_))), "{got:?}");
        assert_eq!(conv.rollout(), None, "a refused fork is not loaded");
        let (mut conv, mut lines, mut out) = conversation();
        let asked = conv.fork(thread, Path::new("/w"), None, Duration::from_secs(5));
        let (got, ()) = tokio::join!(
            asked,
            answer_fork(&mut lines, &mut out, |id| forked(
                id,
                "/elsewhere",
                read_only
            ))
        );
        assert!(matches!(got, Err(ThreadOpFailed::Policy(_))), "{got:?}");
    }

    #[tokio::test]
    async fn a_fork_codex_does_not_answer_in_time_or_refuses_is_told_so() {
        let thread = ThreadId::parse(THREAD).unwrap();
        let (mut conv, mut lines, _out) = conversation();
        let asked = conv.fork(thread, Path::new("/w"), None, Duration::from_millis(200));
        let (got, line) = tokio::join!(asked, lines.next_line());
        assert!(line.unwrap().unwrap().contains("thread/fork"));
        assert!(matches!(got, Err(ThreadOpFailed::TimedOut)), "{got:?}");

        let (mut conv, mut lines, mut out) = conversation();
        let asked = conv.fork(thread, Path::new("/w"), None, Duration::from_secs(5));
        let refuse = |id: u64| {
            json!({"id": id, "error": {"code": -32600, "message": "no rollout found"}}).to_string()
        };
        let (got, ()) = tokio::join!(asked, answer_fork(&mut lines, &mut out, refuse));
        match got {
            Err(ThreadOpFailed::Refused(m)) => assert!(m.contains("could not fork"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    const TURN: &str = "01a22753-3cfc-7740-b25a-145bedef01df";

    /// A warm turn in `dir` (read-only, no model), as a session's would be built.
    fn warm_turn(dir: &Path) -> WarmTurn {
        let d = dir.to_str().unwrap();
        let common = crate::codex::argv::Common {
            program: "codex".into(),
            env: vec![],
            overrides: vec![],
            allow_danger: false,
            disable_mcp_servers: vec![],
        };
        let req = crate::codex::argv::TurnRequest {
            prompt: crate::security::prompt::Prompt::parse("prompt", "hi".into()).unwrap(),
            sandbox: None,
            model: None,
            reasoning_effort: None,
            cwd: crate::security::paths::Confined::unchecked(
                d,
                d,
                crate::security::paths::Kind::Dir,
                "workingDirectory",
            ),
            images: vec![],
            resume: None,
            output_schema: None,
            output_last_message: None,
        };
        crate::codex::argv::build_warm_turn(&common, req).unwrap()
    }

    /// The scripted server's half of a turn: answer `thread/start` (the template policy in
    /// `dir`) and `turn/start`, then write `after` (notification lines).
    async fn serve_turn(
        lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
        out: &mut tokio::io::DuplexStream,
        dir: &str,
        after: &[String],
    ) {
        for (method, result) in [
            ("thread/start", None),
            (
                "turn/start",
                Some(
                    json!({"turn": {"id": TURN, "items": [], "status": "inProgress", "error": null}}),
                ),
            ),
        ] {
            let line = lines.next_line().await.unwrap().unwrap();
            let req: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(req["method"], method, "{line}");
            let id = req["id"].as_u64().unwrap();
            let answer = match result {
                Some(r) => json!({"id": id, "result": r}).to_string(),
                None => forked(id, dir, json!({"type": "readOnly", "networkAccess": false}))
                    .replace(FORKED, THREAD),
            };
            out.write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
        }
        for l in after {
            out.write_all(format!("{l}\n").as_bytes()).await.unwrap();
        }
    }

    /// A notification of the turn: `method` with `params` plus its thread and turn.
    fn of_turn(method: &str, mut params: Value) -> String {
        params["threadId"] = json!(THREAD);
        if params.get("turn").is_none() {
            params["turnId"] = json!(TURN);
        }
        json!({"method": method, "params": params}).to_string()
    }

    /// Drive one turn of `conv` on a new thread in `dir`; with `cancel_at_start`, its caller
    /// cancels it once codex started it (the sink sees `TurnStarted`).
    async fn drive_once(
        conv: &mut Conversation<tokio::io::DuplexStream>,
        dir: &Path,
        cancel_at_start: bool,
    ) -> (Result<(), Stop>, Transcript, Vec<events::Event>) {
        let cancel = tokio_util::sync::CancellationToken::new();
        let turn = warm_turn(dir);
        let mut opts = RunOptions::new(Duration::from_secs(10), Default::default());
        opts.cancel = cancel.clone();
        let deadline = tokio::time::Instant::now() + opts.timeout;
        let mut ctl = TurnControl::default();
        let mut asks = Asks::default();
        let screen: Box<Screen> = Box::new(|_, asking, _, _| {
            Box::pin(async move {
                asking.asked.decline();
                DecisionRecord {
                    asked: String::new(),
                    decision: crate::approval::Decision::Decline,
                    by_person: false,
                    reason: None,
                }
            })
        });
        let mut t = Transcript::default();
        let mut seen = Vec::new();
        let ended = conv
            .drive(
                ThreadWanted::Start,
                &turn,
                &opts,
                deadline,
                (&mut ctl, &mut asks, &*screen),
                &mut t,
                &mut |ev: &events::Event| {
                    if cancel_at_start && matches!(ev, events::Event::TurnStarted) {
                        cancel.cancel();
                    }
                    seen.push(ev.clone())
                },
            )
            .await;
        (ended, t, seen)
    }

    #[tokio::test]
    async fn a_turn_is_driven_from_turn_start_to_turn_completed_over_a_duplex() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let d = dir.to_str().unwrap().to_owned();
        let (mut conv, mut lines, mut out) = conversation();
        let after = [
            of_turn(
                "turn/started",
                json!({"turn": {"id": TURN, "items": [], "status": "inProgress"}}),
            ),
            of_turn(
                "item/completed",
                json!({"item": {"type": "agentMessage", "id": "msg_1", "text": "hello"}}),
            ),
            // another turn's item is not this turn's
            json!({"method": "item/completed", "params": {"threadId": THREAD,
                "turnId": "01a22753-3cfc-7740-b25a-145bedef0000",
                "item": {"type": "agentMessage", "id": "msg_2", "text": "not ours"}}})
            .to_string(),
            of_turn(
                "turn/completed",
                json!({"turn": {"id": TURN, "items": [], "status": "completed"}}),
            ),
        ];
        let ((ended, t, seen), ()) = tokio::join!(
            drive_once(&mut conv, &dir, false),
            serve_turn(&mut lines, &mut out, &d, &after)
        );
        assert!(ended.is_ok(), "{:?}", ended.err().map(|_| "stopped"));
        assert!(conv.accepted(), "codex accepted the turn");
        assert_eq!(t.thread_id, Some(ThreadId::parse(THREAD).unwrap()));
        assert_eq!(t.last_message.as_deref(), Some("hello"));
        assert!(
            seen.iter().any(|e| matches!(e, events::Event::TurnStarted)),
            "{seen:?}"
        );
    }

    #[tokio::test]
    async fn a_cancelled_turn_stops_with_its_turn_for_the_interrupt() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let d = dir.to_str().unwrap().to_owned();
        let (mut conv, mut lines, mut out) = conversation();
        let started = [of_turn(
            "turn/started",
            json!({"turn": {"id": TURN, "items": [], "status": "inProgress"}}),
        )];
        let ((ended, _, _), ()) = tokio::join!(
            drive_once(&mut conv, &dir, true),
            serve_turn(&mut lines, &mut out, &d, &started)
        );
        match ended {
            Err(Stop::Cancelled(Some(turn))) => assert_eq!(turn.to_string(), TURN),
            Err(Stop::Cancelled(None)) => panic!("cancelled without its turn"),
            Err(Stop::Closed(e)) => panic!("closed: {e:?}"),
            Err(Stop::Refused(m)) => panic!("refused: {m}"),
            Err(_) => panic!("stopped for another reason"),
            Ok(()) => panic!("a cancelled turn completed"),
        }
    }
}
