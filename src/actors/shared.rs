//! What every actor shares ([`Shared`]): the settings, the store, the limiter, the live
//! session actors, the warm pool. It names no actor's code, only the session actor's message
//! type and the pool, so every actor can name it without an import cycle.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use ractor::ActorRef;

use crate::actors::client::{ClientContext, ClientId};
use crate::actors::limiter::Limiter;
use crate::actors::session::message::SessionMessage;
use crate::actors::warm::WarmPool;
use crate::codex::argv::Common;
use crate::config::Config;
use crate::security::ids::SessionId;
use crate::security::redact::ClientSecrets;
use crate::store::Store;

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
    /// The cap on warm app-server processes, and who holds one.
    pub warm: WarmPool,
}

impl Shared {
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
