//! The crate error: one enum per layer, folded into [`Error`] with `#[from]`. Every message is a
//! user-facing sentence that names the setting, argument or file at fault and never echoes a
//! secret or file contents; messages are redacted again by the layer that sends them out.
//!
//! The layers' own enums live beside their code ([`crate::config::ConfigError`],
//! [`crate::store::StoreError`]); this module is the one place that names them all (the
//! layering test allows it exactly that). Code decides by variant, never by message text.

use std::fmt;
use std::time::Duration;

use crate::config::ConfigError;
use crate::store::StoreError;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a turn failed, classified from codex's own messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Auth,
    RateLimit,
    ContextLength,
    TurnFailed,
    Crashed,
    /// Codex recorded another sandbox level or approval mode than the bridge asked for.
    PolicyMismatch,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Auth => "authentication failed",
            FailureKind::RateLimit => "rate limit or quota exceeded",
            FailureKind::ContextLength => "context length exceeded",
            FailureKind::TurnFailed => "codex turn failed",
            FailureKind::Crashed => "codex exited with an error",
            FailureKind::PolicyMismatch => "sandbox or approval mismatch",
        })
    }
}

/// Everything that can go wrong between a tool call and a Codex turn.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller argument failed validation; nothing was spawned.
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },

    /// An operator setting or the config file failed validation.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The session store failed, or refused its directory.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// Starting or waiting for a codex process failed (codex missing, the OS refused).
    #[error(transparent)]
    Process(#[from] crate::codex::process::ProcessError),

    /// The turn ran past its timeout; `partial` holds what Codex had said so far.
    #[error("codex turn timed out after {}s", .after.as_secs())]
    TimedOut {
        after: Duration,
        partial: Option<String>,
    },

    /// The turn was cancelled by the caller.
    #[error("codex turn was cancelled")]
    Cancelled { partial: Option<String> },

    /// Codex reported a failure (auth, rate limit, context length, failed turn, crash).
    #[error("{kind}: {message}")]
    Codex { kind: FailureKind, message: String },

    /// Output went past a safety cap.
    #[error("codex output exceeded the {what} cap of {limit} bytes; the turn was stopped")]
    OutputCap { what: &'static str, limit: usize },

    /// No capacity: the session is busy, or no turn slot became free in time.
    #[error("{0}")]
    Busy(String),

    /// A session actor failed or stopped under a call.
    #[error("{0}")]
    SessionFailed(String),

    /// Electing, joining, serving or leaving the store's owner failed.
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),

    /// An operating-system call outside the store failed; `doing` says what it was for
    /// ("running codex", "creating the schema's temporary directory", ...).
    #[error("{doing} failed: {source}")]
    Io {
        doing: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Shorthand for an [`Error::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for an invalid operator setting ([`ConfigError::Invalid`]).
    pub fn setting(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config(ConfigError::Invalid {
            setting: setting.into(),
            reason: reason.into(),
        })
    }

    /// An IO failure while `doing` something, for `map_err`: `.map_err(Error::io("..."))`.
    pub fn io(doing: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { doing, source }
    }
}
