//! The crate error: one enum per layer, folded into [`Error`] with `#[from]`. Every message is a
//! user-facing sentence that names the setting, argument or file at fault and never echoes a
//! secret or file contents; messages are redacted again by the layer that sends them out.
//!
//! The layers' own enums live in leaf files of their layers (`config/error.rs`,
//! `store/error.rs`, `codex/process/error.rs`, `hub/error.rs`), which name nothing of the crate
//! but other leaves: this module names those leaves and nothing else of the crate, so no
//! import cycle runs through it (the layering test checks both). Code decides by variant,
//! never by message text.

use std::time::Duration;

use crate::codex::process::error::ProcessError;
use crate::config::error::ConfigError;
use crate::hub::error::HubError;
use crate::invalid::{InvalidArgument, InvalidSetting};
use crate::store::error::StoreError;

pub use crate::failure::FailureKind;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    Process(#[from] ProcessError),

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
    Hub(#[from] HubError),

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

/// The pure layers' refusal of an argument, as the crate error's variant (same words).
impl From<InvalidArgument> for Error {
    fn from(e: InvalidArgument) -> Self {
        Error::InvalidArgument {
            field: e.field,
            reason: e.reason,
        }
    }
}

/// The pure layers' refusal of a setting: a config error (same words).
impl From<InvalidSetting> for Error {
    fn from(e: InvalidSetting) -> Self {
        Error::Config(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pure layer's refusal becomes the crate error's variant with the same words, so a
    /// caller still reads the field (or setting) and the reason, and code still matches the
    /// variant.
    #[test]
    fn the_pure_layers_refusals_fold_in_with_the_same_words() {
        let e: Error = InvalidArgument::new("workingDirectory", "does not exist").into();
        assert_eq!(
            e.to_string(),
            "invalid argument `workingDirectory`: does not exist"
        );
        assert!(
            matches!(&e, Error::InvalidArgument { field, reason }
                if field == "workingDirectory" && reason == "does not exist"),
            "{e:?}"
        );
        let e: Error = InvalidSetting::new("CODEX_BRIDGE_CODEX_CONFIG (-c)", "is denied").into();
        assert_eq!(
            e.to_string(),
            "invalid setting CODEX_BRIDGE_CODEX_CONFIG (-c): is denied"
        );
        assert!(
            matches!(&e, Error::Config(ConfigError::Invalid { setting, .. })
                if setting == "CODEX_BRIDGE_CODEX_CONFIG (-c)"),
            "{e:?}"
        );
        // the crate's own shorthands say the same
        assert_eq!(
            Error::invalid("workingDirectory", "does not exist").to_string(),
            InvalidArgument::new("workingDirectory", "does not exist").to_string()
        );
        assert_eq!(
            Error::setting("S", "r").to_string(),
            InvalidSetting::new("S", "r").to_string()
        );
    }
}
