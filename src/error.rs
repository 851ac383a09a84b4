//! The crate error. Every variant's message is a user-facing sentence that names the field or
//! setting at fault and never echoes a secret or file contents; messages are redacted again by
//! the layer that sends them out.

use std::time::Duration;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between a tool call and a Codex turn.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller argument failed validation; nothing was spawned.
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },

    /// An operator setting failed validation at start.
    #[error("invalid setting {setting}: {reason}")]
    InvalidSetting { setting: String, reason: String },

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
    Codex {
        kind: crate::codex::events::FailureKind,
        message: String,
    },

    /// Output went past a safety cap.
    #[error("codex output exceeded the {what} cap of {limit} bytes; the turn was stopped")]
    OutputCap { what: &'static str, limit: usize },

    /// No capacity: the session is busy, or no turn slot became free in time.
    #[error("{0}")]
    Busy(String),

    /// A session actor failed or stopped under a call.
    #[error("{0}")]
    SessionFailed(String),

    /// The session store failed (disk full, read-only, corrupted, deleted).
    #[error("session store error: {0}")]
    Store(String),

    /// Spawning or waiting for the child failed at the OS level.
    #[error("could not run codex: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Shorthand for an [`Error::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for an [`Error::InvalidSetting`].
    pub fn setting(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidSetting {
            setting: setting.into(),
            reason: reason.into(),
        }
    }
}
