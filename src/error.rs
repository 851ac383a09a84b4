//! The crate error: the enums of the layers below it folded into [`Error`] with the same words.
//! Every message is a user-facing sentence that names the setting, argument or file at fault
//! and never echoes a secret or file contents; messages are redacted again by the layer that
//! sends them out.
//!
//! A layer of its own, above `config` and below `actors`: `codex`, `store`, `confine`,
//! `security` and `config` return their own enums and never name this module, and the hub
//! above carries it in its own `HubError`, so no import cycle runs through it (the layering
//! test checks both). Code decides by variant, never by message text.

use std::time::Duration;

use crate::codex::process::error::ProcessError;
use crate::codex::process::git::GitError;
use crate::codex::process::{Ending, TurnOutcome};
use crate::config::error::ConfigError;
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

    /// Starting or waiting for a codex process failed (codex missing, the OS refused). Built
    /// only through `From<ProcessError>`, so it never holds `ProcessError::Invalid`, `Codex`
    /// or `TimedOut` (those become the variants of the same name).
    #[error(transparent)]
    Process(ProcessError),

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

/// A turn's outcome as a result: the outcome when it completed; otherwise the matching error,
/// carrying the partial answer of a timeout or a cancellation.
pub fn turn_result(outcome: TurnOutcome) -> Result<TurnOutcome> {
    match outcome.ending.clone() {
        Ending::Completed => Ok(outcome),
        Ending::Failed { kind, message } => Err(Error::Codex { kind, message }),
        Ending::TimedOut { after } => Err(Error::TimedOut {
            after,
            partial: outcome.message,
        }),
        Ending::Cancelled => Err(Error::Cancelled {
            partial: outcome.message,
        }),
        Ending::OutputCapExceeded { limit } => Err(Error::OutputCap {
            what: "output",
            limit,
        }),
    }
}

/// The process layer's error: a refusal of an argument, a codex failure and a timeout become the
/// crate's variants of the same name (same words), so a caller reads the field and code matches
/// one variant wherever it was raised; the rest stays [`Error::Process`].
impl From<ProcessError> for Error {
    fn from(e: ProcessError) -> Self {
        match e {
            ProcessError::Invalid(e) => e.into(),
            ProcessError::Codex { kind, message } => Error::Codex { kind, message },
            ProcessError::TimedOut { after } => Error::TimedOut {
                after,
                partial: None,
            },
            other => Error::Process(other),
        }
    }
}

/// The git runner's error (a session's own worktree): a directory outside any repository and
/// a ref that names no commit are refusals of the argument named; the rest fails the call with
/// git's words.
impl From<GitError> for Error {
    fn from(e: GitError) -> Self {
        match e {
            GitError::NotARepository { field, path } => Error::invalid(
                field,
                format!(
                    "the working directory {path} is not inside a git repository's working tree"
                ),
            ),
            GitError::UnknownRevision { field, rev } => {
                Error::invalid(field, format!("`{rev}` names no commit of the repository"))
            }
            other => Error::SessionFailed(other.to_string()),
        }
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

    /// The process layer's error folds into the variant a caller matches wherever it was
    /// raised (an argument, a codex failure, a timeout), with the same words; the rest stays
    /// the process variant.
    #[test]
    fn the_process_layers_error_folds_in_by_variant() {
        let p = ProcessError::from(InvalidArgument::new("workingDirectory", "changed"));
        let words = p.to_string();
        let e = Error::from(p);
        assert!(matches!(&e, Error::InvalidArgument { field, .. } if field == "workingDirectory"));
        assert_eq!(e.to_string(), words);
        let p = ProcessError::Codex {
            kind: FailureKind::Crashed,
            message: "did not start".into(),
        };
        let words = p.to_string();
        let e = Error::from(p);
        assert!(matches!(
            &e,
            Error::Codex {
                kind: FailureKind::Crashed,
                ..
            }
        ));
        assert_eq!(e.to_string(), words);
        let after = Duration::from_secs(7);
        let words = ProcessError::TimedOut { after }.to_string();
        let e = Error::from(ProcessError::TimedOut { after });
        assert!(matches!(&e, Error::TimedOut { partial: None, .. }));
        assert_eq!(e.to_string(), words);
        let e = Error::from(ProcessError::KilledAtStart { signal: 9 });
        assert!(matches!(
            &e,
            Error::Process(ProcessError::KilledAtStart { signal: 9 })
        ));
    }
}
