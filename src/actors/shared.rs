//! What every actor shares ([`Shared`]): the settings, the store, the limiter, the live
//! session actors, the warm pool. It names no actor's code, only the session actor's message
//! type and the pool, so every actor can name it without an import cycle.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::actors::client::{ClientContext, ClientId};
use crate::actors::credentials::{Credentials, HeldCredentials};
use crate::actors::pool::warm::WarmPool;
use crate::codex::argv::Common;
use crate::codex::process::git::Git;
use crate::config::Config;
use crate::security::redact::ClientSecrets;
use crate::store::Store;
use crate::turn::limiter::Limiter;

/// Everything the actors share; read-only after start. `config`, `common` and `codex_home`
/// are the owning process's own client context ([`crate::actors::Bridge::own_context`]); the
/// limiter, the store and the timeouts are the owner's for every connection. Its fields are the
/// crate's: outside it, one is built with [`Shared::new`] and read through its methods.
pub struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) store: Store,
    pub(crate) limiter: Limiter,
    /// Invocation settings (program, filtered environment, operator overrides).
    pub(crate) common: Common,
    /// Where codex keeps threads (for rollout checks and `codex delete`).
    pub(crate) codex_home: PathBuf,
    /// How long an idle session actor lives before it stops (it comes back from the store).
    pub(crate) idle_timeout: Duration,
    /// How long a call may wait for a turn slot.
    pub(crate) queue_timeout: Duration,
    /// Test-only fault hooks (a prompt that makes the session actor panic).
    pub(crate) fault_injection: bool,
    /// The cap on warm app-server processes, and who holds one.
    pub(crate) warm: WarmPool,
    /// Whose credentials are held now (the owning process's own for its life, each open
    /// connection's while it lasts): a warm process started with credentials nobody holds
    /// is closed.
    pub(crate) credentials: Arc<HeldCredentials>,
    /// The git this server runs for sessions' own worktrees (`None`: no git on the server's
    /// `PATH`; a session asking for a worktree is refused).
    pub(crate) git: Option<Git>,
    /// The `CODEX_HOME` of each session made or closed ([`crate::actors::Bridge::session_list_changes`]):
    /// a new session's is sent once its record is stored, a closed one's once it is gone.
    pub(crate) list_changed: tokio::sync::broadcast::Sender<PathBuf>,
}

/// How many made or closed sessions a slow listener of [`Shared::list_changed`] may lag behind.
const LIST_CHANGES_BACKLOG: usize = 256;

impl Shared {
    /// The state for a process whose own client has `config`, `common` and `codex_home`, over
    /// `store`: limits, timeouts and the warm cap from `config`, no fault injection.
    pub fn new(config: Arc<Config>, common: Common, codex_home: PathBuf, store: Store) -> Shared {
        Shared {
            list_changed: tokio::sync::broadcast::channel(LIST_CHANGES_BACKLOG).0,
            limiter: Limiter::new(config.max_concurrent),
            warm: WarmPool::new(config.max_warm),
            idle_timeout: config.idle_timeout,
            queue_timeout: config.queue_timeout,
            fault_injection: false,
            credentials: HeldCredentials::new(Credentials::of_env(&common.env)),
            git: Git::find(&std::env::var("PATH").unwrap_or_default())
                .map(|git| git.with_scratch(config.store_dir.join("git-scratch"))),
            common,
            codex_home,
            store,
            config,
        }
    }

    /// The same, with session actors that stop after `idle` without a call.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Shared {
        self.idle_timeout = idle;
        self
    }

    /// The same, with calls that wait at most `wait` for a turn slot.
    pub fn with_queue_timeout(mut self, wait: Duration) -> Shared {
        self.queue_timeout = wait;
        self
    }

    /// The same, with the test-only fault hooks on or off.
    pub fn with_fault_injection(mut self, on: bool) -> Shared {
        self.fault_injection = on;
        self
    }

    /// The store every actor writes through.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The warm app-server pool (its cap; the spare through its keeper).
    pub fn warm_pool(&self) -> &WarmPool {
        &self.warm
    }

    /// Whose credentials are held now.
    pub fn credentials(&self) -> &Arc<HeldCredentials> {
        &self.credentials
    }

    /// How long a call may wait for a turn slot.
    pub fn queue_timeout(&self) -> Duration {
        self.queue_timeout
    }

    /// The owning process's own client context, with an identity of its own.
    pub fn own_context(&self) -> ClientContext {
        ClientContext {
            id: ClientId::fresh(),
            config: self.config.clone(),
            common: self.common.clone(),
            codex_home: self.codex_home.clone(),
            secrets: ClientSecrets::default(),
        }
    }
}
