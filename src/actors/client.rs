//! Who asks: one MCP connection's context ([`ClientContext`]: its settings, its codex
//! invocation and CODEX_HOME, its secrets) and identity ([`ClientId`]), and where its progress
//! lines go ([`Progress`]). A leaf of `actors/`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::codex::argv::Common;
use crate::codex::home::{disableable, nested_servers};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::security::redact::ClientSecrets;
use crate::store::SessionRecord;

/// A progress callback: one human-readable line about what codex is doing.
pub type Progress = Arc<dyn Fn(String) + Send + Sync>;

/// The one progress sink of a codex run: each event's description
/// ([`describe`](crate::codex::events::describe)) to `progress`, redacted with `secrets`.
pub fn progress_sink(
    progress: Option<Progress>,
    secrets: ClientSecrets,
) -> impl FnMut(&crate::codex::events::Event) + Send + use<> {
    move |ev| {
        if let (Some(p), Some(line)) = (&progress, crate::codex::events::describe(ev)) {
            p(secrets.redact(&line).into_owned());
        }
    }
}

/// What one client connection brings: its operator settings, the codex invocation built from
/// its own allowlisted environment (API keys and CODEX_HOME differ between hosts), and its
/// CODEX_HOME. A turn runs with the context of the connection that asked for it, so one host's
/// credentials never reach another host's codex process.
#[derive(Debug, Clone)]
pub struct ClientContext {
    /// Which MCP connection this is: a stdio or socket connection, one Streamable HTTP session,
    /// or one session-less HTTP request. What only the client that started a turn may do
    /// (steer it) is decided by this, never by the settings, which connections share.
    pub id: ClientId,
    pub config: Arc<Config>,
    /// Program, filtered environment, operator overrides, danger switch.
    pub common: Common,
    /// Where codex keeps this client's threads.
    pub codex_home: PathBuf,
    /// Its host's literal secrets, redacted from its turns and answers on top of the
    /// process-wide redactor (none for the owning process's own client: they are in it).
    pub secrets: ClientSecrets,
}

/// The identity of one MCP connection, unique in this process (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(u64);

impl ClientId {
    /// A new identity, different from every other of this process.
    pub fn fresh() -> ClientId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        ClientId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl ClientContext {
    /// The options of one codex run for this client: its deadline, cancel, limits and secrets
    /// (the one place they are put together).
    pub fn run_options(
        &self,
        timeout: std::time::Duration,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> crate::codex::process::RunOptions {
        let mut opts = crate::codex::process::RunOptions::new(timeout, self.config.limits);
        opts.cancel = cancel.clone();
        opts.secrets = self.secrets.clone();
        opts
    }

    /// The codex binary this client's turns run.
    pub fn codex_program(&self) -> &std::path::Path {
        &self.common.program
    }

    /// The context of a client whose process has `config` and the environment `vars`.
    pub fn new(config: Config, vars: &[(String, String)]) -> ClientContext {
        ClientContext {
            id: ClientId::fresh(),
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

    /// The same settings and environment for another connection, with an identity of its own
    /// (the owning process's stdio client and each of its HTTP sessions share the settings).
    pub fn for_connection(&self) -> ClientContext {
        ClientContext {
            id: ClientId::fresh(),
            ..self.clone()
        }
    }

    /// This context, for a client whose host has the literal `secrets`.
    pub fn with_secrets(mut self, secrets: ClientSecrets) -> ClientContext {
        self.secrets = secrets;
        self
    }

    /// The invocation settings of a turn: nested MCP servers disabled when `disable_nested`
    /// (`query`, `search`) or when the operator said so.
    pub fn common_for(&self, disable_nested: bool) -> Common {
        let mut c = self.common.clone();
        if disable_nested || self.config.nested_mcp == crate::config::NestedMcp::Disable {
            c.disable_mcp_servers = disableable(&nested_servers(&self.codex_home));
        }
        c
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
