//! Conversations as actors (ractor): a [`registry::RegistryActor`] routes every call to the
//! [`session::SessionActor`] of its session id, spawning it linked or rehydrating it from the
//! store; each session actor owns the codex subprocess of its current turn. [`Bridge`] is the
//! typed handle the MCP layer uses: callers never build messages or reply ports.

pub mod limiter;
pub mod registry;
pub mod session;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use tokio_util::sync::CancellationToken;

use crate::codex::argv::{Common, ReasoningEffort, SandboxLevel};
use crate::codex::process::TurnOutcome;
use crate::codex::rollout::TurnContext;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::Confined;
use crate::security::redact::ClientSecrets;
use crate::store::{Page, SessionRecord, Store, TurnStatus};

pub use limiter::Limiter;
use registry::{RegistryActor, RegistryMessage};
use session::SessionMessage;

/// A progress callback: one human-readable line about what codex is doing.
pub type Progress = Arc<dyn Fn(String) + Send + Sync>;

/// What one client connection brings: its operator settings, the codex invocation built from
/// its own allowlisted environment (API keys and CODEX_HOME differ between hosts), and its
/// CODEX_HOME. A turn runs with the context of the connection that asked for it, so one host's
/// credentials never reach another host's codex process.
#[derive(Debug, Clone)]
pub struct ClientContext {
    pub config: Arc<Config>,
    /// Program, filtered environment, operator overrides, danger switch.
    pub common: Common,
    /// Where codex keeps this client's threads.
    pub codex_home: PathBuf,
    /// Its host's literal secrets, redacted from its turns and answers on top of the
    /// process-wide redactor (none for the owning process's own client: they are in it).
    pub secrets: ClientSecrets,
}

impl ClientContext {
    /// The context of a client whose process has `config` and the environment `vars`.
    pub fn new(config: Config, vars: &[(String, String)]) -> ClientContext {
        ClientContext {
            common: Common {
                program: config.codex_bin.clone(),
                env: crate::security::env::filter_env(
                    vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ),
                overrides: config.codex_overrides.clone(),
                allow_danger: config.allow_danger,
                disable_mcp_servers: vec![],
            },
            codex_home: crate::codex::home::codex_home(vars),
            config: Arc::new(config),
            secrets: ClientSecrets::default(),
        }
    }

    /// This context, for a client whose host has the literal `secrets`.
    pub fn with_secrets(mut self, secrets: ClientSecrets) -> ClientContext {
        self.secrets = secrets;
        self
    }

    /// Refuse a stored session whose thread lives in another CODEX_HOME: codex could not find
    /// it there.
    pub fn check_codex_home(&self, rec: &SessionRecord) -> Result<()> {
        let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
        match &rec.codex_home {
            Some(h) if canonical(std::path::Path::new(h)) != canonical(&self.codex_home) => {
                Err(Error::invalid(
                    "sessionId",
                    format!(
                        "session {} was started by a client with another CODEX_HOME, where Codex keeps \
                     its thread; it can only be continued by a client using that CODEX_HOME",
                        rec.session_id
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Everything the actors share; read-only after start. `config`, `common` and `codex_home`
/// are the owning process's own client context ([`Bridge::own_context`]); the limiter, the
/// store and the timeouts are the owner's for every connection.
pub struct Shared {
    pub config: Arc<Config>,
    pub store: Store,
    pub limiter: Limiter,
    /// Invocation settings (program, filtered environment, operator overrides).
    pub common: Common,
    /// Where codex keeps threads (for rollout checks and `codex delete`).
    pub codex_home: PathBuf,
    /// How long an idle session actor lives before it stops (it comes back from the store).
    pub idle_timeout: Duration,
    /// How long a call may wait for a turn slot.
    pub queue_timeout: Duration,
    /// Test-only fault hooks (a prompt that makes the session actor panic).
    pub fault_injection: bool,
    /// Live session actors by session id.
    pub live: DashMap<SessionId, ActorRef<SessionMessage>>,
}

impl Shared {
    /// The owning process's own client context.
    pub fn own_context(&self) -> ClientContext {
        ClientContext {
            config: self.config.clone(),
            common: self.common.clone(),
            codex_home: self.codex_home.clone(),
            secrets: ClientSecrets::default(),
        }
    }
}

/// One turn asked for by a tool call.
pub struct TurnCall {
    /// `None`: a new session with a generated id.
    pub session_id: Option<SessionId>,
    /// Start a new Codex thread under the same session id.
    pub reset: bool,
    pub prompt: String,
    pub sandbox: Option<SandboxLevel>,
    pub model: Option<String>,
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The confined working directory (the session's, for a resumed session).
    pub cwd: Confined,
    pub images: Vec<Confined>,
    pub timeout: Duration,
    /// On a busy session: wait for its turn (true) or fail at once.
    pub wait_if_busy: bool,
    pub cancel: CancellationToken,
    pub progress: Option<Progress>,
    /// `structured`: codex's `--output-schema` and `-o` files (made by the bridge).
    pub output_schema: Option<PathBuf>,
    pub output_last_message: Option<PathBuf>,
    /// The asking connection's context; `None`: the owning process's own.
    pub client: Option<Arc<ClientContext>>,
}

/// What a turn did, for the MCP layer.
#[derive(Debug, Clone)]
pub struct TurnReport {
    pub session_id: SessionId,
    /// The session existed with a thread, and this turn continued it.
    pub resumed: bool,
    /// The session record was created by this call.
    pub created: bool,
    pub outcome: TurnOutcome,
    /// Time spent waiting for the session and for a slot.
    pub queued: Duration,
    /// The level asked for (after defaulting).
    pub sandbox: SandboxLevel,
    /// What codex recorded for the turn (approval, reviewer, sandbox), when it keeps a rollout.
    pub recorded: Option<TurnContext>,
    /// The model codex recorded it ran with, else the one asked for.
    pub model: Option<String>,
    /// The session's record after the turn.
    pub record: Option<SessionRecord>,
}

/// Live counts for status tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub live_sessions: usize,
    pub stored_sessions: usize,
    pub active_turns: usize,
    pub queued_turns: usize,
    pub max_concurrent: usize,
}

/// The typed handle over the registry.
#[derive(Clone)]
pub struct Bridge {
    registry: ActorRef<RegistryMessage>,
    shared: Arc<Shared>,
    own: Arc<ClientContext>,
}

impl Bridge {
    /// Recover from a previous crash (kill leftover turns, mark them interrupted), then start
    /// the registry.
    pub async fn start(shared: Shared) -> Result<Bridge> {
        recover_interrupted(&shared.store).await?;
        let shared = Arc::new(shared);
        let (registry, _) = Actor::spawn(None, RegistryActor, shared.clone())
            .await
            .map_err(|e| Error::Store(format!("could not start the session registry: {e}")))?;
        if let Some(ttl) = shared.config.session_ttl {
            let s = shared.clone();
            tokio::spawn(async move {
                loop {
                    if let Err(e) = expire_sessions(&s, ttl).await {
                        tracing::warn!(error = %e, "could not expire old sessions");
                    }
                    tokio::time::sleep(EXPIRY_EVERY).await;
                }
            });
        }
        let own = Arc::new(shared.own_context());
        Ok(Bridge {
            registry,
            shared,
            own,
        })
    }

    /// The shared settings and store.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The owning process's own client context.
    pub fn own_context(&self) -> &Arc<ClientContext> {
        &self.own
    }

    /// Run one turn; resolves when it ended (or failed to start).
    pub async fn turn(&self, call: TurnCall) -> Result<TurnReport> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.registry
            .cast(RegistryMessage::Turn {
                call: Box::new(call),
                reply: tx,
            })
            .map_err(|_| Error::Busy("the session registry is not running".into()))?;
        rx.await.unwrap_or_else(|_| {
            Err(Error::SessionFailed(
                "the session's actor failed during the turn; its processes were stopped and it \
                 restarts from its stored record on the next call"
                    .into(),
            ))
        })
    }

    /// Run a session-less turn (`query`, `search`, `review`, `structured`) under the global
    /// limit. Returns the outcome and the time spent queued.
    pub async fn one_shot(
        &self,
        spec: crate::codex::argv::SpawnSpec,
        limits: crate::config::Limits,
        timeout: Duration,
        cancel: CancellationToken,
        progress: Option<Progress>,
        secrets: &ClientSecrets,
    ) -> Result<(TurnOutcome, Duration)> {
        let since = std::time::Instant::now();
        let p = progress.clone();
        let slot = self
            .shared
            .limiter
            .acquire(self.shared.queue_timeout, &cancel, |ahead| {
                if let Some(p) = &p {
                    p(format!(
                        "queued behind {} turn(s) waiting for a codex slot",
                        ahead + self.shared.limiter.active()
                    ));
                }
            })
            .await?;
        let queued = since.elapsed();
        let mut opts = crate::codex::process::RunOptions::new(timeout, limits);
        opts.cancel = cancel;
        opts.secrets = secrets.clone();
        let outcome = crate::codex::process::run(spec, opts, move |ev| {
            if let (Some(p), Some(line)) = (&progress, crate::codex::events::describe(ev)) {
                p(secrets.redact(&line).into_owned());
            }
        })
        .await?;
        drop(slot);
        Ok((outcome, queued))
    }

    /// A stored session.
    pub fn get(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        self.shared.store.get(id)
    }

    /// Sessions, newest first.
    pub fn list(&self, cursor: Option<&str>, limit: usize) -> Result<Page> {
        self.shared.store.list(cursor, limit)
    }

    /// Close (forget) a session: cancels its turn first; optionally deletes codex's thread files
    /// (with `client`'s codex and environment; `None`: the owning process's own).
    pub async fn close(
        &self,
        id: &SessionId,
        delete_thread: bool,
        client: Option<Arc<ClientContext>>,
    ) -> Result<Option<SessionRecord>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.registry
            .cast(RegistryMessage::Close {
                id: id.clone(),
                delete_thread,
                client: client.unwrap_or_else(|| self.own.clone()),
                reply: tx,
            })
            .map_err(|_| Error::Busy("the session registry is not running".into()))?;
        rx.await
            .unwrap_or_else(|_| Err(Error::SessionFailed("closing the session failed".into())))
    }

    /// Live counts.
    pub fn counts(&self) -> Counts {
        Counts {
            live_sessions: self.shared.live.len(),
            stored_sessions: self.shared.store.len(),
            active_turns: self.shared.limiter.active(),
            queued_turns: self.shared.limiter.queued(),
            max_concurrent: self.shared.limiter.max(),
        }
    }

    /// Stop every session (each kills its subprocess), then the registry; flush the store.
    pub async fn shutdown(&self) {
        let actors: Vec<ActorRef<SessionMessage>> =
            self.shared.live.iter().map(|e| e.value().clone()).collect();
        for a in actors {
            let _ = a
                .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
                .await;
        }
        let _ = self
            .registry
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        let _ = self.shared.store.flush().await;
    }

    /// Test-only: is a session actor live?
    pub fn is_live(&self, id: &SessionId) -> bool {
        self.shared.live.contains_key(id)
    }
}

/// How often sessions past their time-to-live are looked for.
pub const EXPIRY_EVERY: Duration = Duration::from_secs(3600);

/// Forget stored sessions unused for longer than `ttl` (never one with a live actor).
pub async fn expire_sessions(shared: &Shared, ttl: Duration) -> Result<usize> {
    let cutoff = crate::store::now_ms().saturating_sub(ttl.as_millis() as u64);
    let mut forgotten = 0;
    // sled's calls block: each pass runs on the blocking pool, so a large aged store never
    // holds a runtime worker for seconds, and the other calls run between passes
    let blocking =
        |e: tokio::task::JoinError| Error::Store(format!("the expiry sweep stopped: {e}"));
    loop {
        let store = shared.store.clone();
        let batch = tokio::task::spawn_blocking(move || store.unused_since(cutoff, EXPIRY_BATCH))
            .await
            .map_err(blocking)??;
        let batch: Vec<SessionId> = batch
            .into_iter()
            .filter(|id| !shared.live.contains_key(id))
            .collect();
        if batch.is_empty() {
            break;
        }
        let n = batch.len();
        let store = shared.store.clone();
        tokio::task::spawn_blocking(move || {
            batch.iter().try_for_each(|id| store.remove(id).map(drop))
        })
        .await
        .map_err(blocking)??;
        forgotten += n;
        tokio::task::yield_now().await;
    }
    if forgotten > 0 {
        shared.store.flush().await?;
        tracing::info!(forgotten, "forgot sessions past their time-to-live");
    }
    Ok(forgotten)
}

/// How many expired sessions one pass of the sweep forgets.
const EXPIRY_BATCH: usize = 1000;

/// Kill what is left of turns that were in flight when the server died, and mark them
/// interrupted in their sessions.
pub async fn recover_interrupted(store: &Store) -> Result<()> {
    for (id, turn) in store.inflight()? {
        let killed = crate::codex::process::kill_leftover(
            turn.pid,
            turn.start_ticks,
            turn.argv_hash,
            turn.cgroup.as_deref(),
        );
        tracing::warn!(session = %id, pid = turn.pid, killed, "a turn was interrupted by a server crash");
        if let Some(mut rec) = store.get(&id)? {
            rec.last_status = Some(TurnStatus::Interrupted);
            rec.last_error = Some("the server stopped while this turn ran".into());
            store.put(&rec)?;
        }
        store.clear_inflight(&id)?;
    }
    store.flush().await
}

/// Parse a stored thread id.
pub(crate) fn stored_thread(rec: &SessionRecord) -> Option<ThreadId> {
    rec.thread_id
        .as_deref()
        .and_then(|t| ThreadId::parse(t).ok())
}
