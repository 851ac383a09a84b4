//! What can go wrong in the process layer itself, before or around a codex process: a turn's
//! own outcomes (a turn that timed out, failed or was cancelled) are [`super::Ending`]s, not
//! errors; `Codex` and `TimedOut` here are failures outside a turn (an app-server's start, a
//! fork). Each message is a sentence that says what was being done. The layer returns this enum and
//! never the crate error: `crate::error` folds it in, with the same words.

use std::io;
use std::time::Duration;

use crate::codex::versions::NEWEST_TESTED_CODEX_VERSION;
use crate::failure::FailureKind;
use crate::invalid::InvalidArgument;

/// An error of the process layer.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The codex binary is not there, or not executable.
    #[error(
        "codex CLI not found at `{program}`: install it with `npm install -g @openai/codex@{version}` \
         or point CODEX_BIN at the binary"
    )]
    CodexNotFound {
        program: String,
        version: &'static str,
    },

    /// The OS refused to start the process (out of processes, memory, file descriptors).
    #[error("could not start codex ({program}): {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },

    /// The thread that starts every codex process is gone (it never exits while the server
    /// runs; this is a bug or the process is shutting down).
    #[error("could not start codex: the server's process spawner is not running")]
    SpawnerGone,

    /// A child's stdout or stderr was not piped (a bug: every child's are).
    #[error("could not start codex: its {0} could not be captured")]
    NotPiped(&'static str),

    /// Waiting for a short codex command to exit failed.
    #[error("could not wait for `codex {what}` to exit: {source}")]
    Wait {
        what: &'static str,
        #[source]
        source: io::Error,
    },

    /// A `codex app-server` was killed by a signal before it answered `initialize` (from
    /// outside, or by the OOM killer): the next start may well work.
    #[error("codex app-server was killed by a signal ({signal}) before it answered `initialize`")]
    KilledAtStart { signal: i32 },

    /// A short codex command ran past its time limit; it and its process group were killed.
    #[error("`codex {what}` did not finish within {secs}s and was stopped")]
    CommandTimedOut { what: &'static str, secs: u64 },

    /// An argument no longer holds when the process is started (a directory that changed
    /// since it was checked), or the invocation is not the kind asked for: nothing ran.
    #[error(transparent)]
    Invalid(#[from] InvalidArgument),

    /// Codex failed before a turn ran: an app-server that did not start or answer, a fork it
    /// refused, a thread whose reported policy is not the one asked for.
    #[error("{kind}: {message}")]
    Codex { kind: FailureKind, message: String },

    /// Codex did not answer a request that opens a thread (a fork) within its time.
    #[error("codex turn timed out after {}s", .after.as_secs())]
    TimedOut { after: Duration },
}

impl ProcessError {
    /// Whether codex itself is missing or not executable (the tool result's `codex_not_found`,
    /// with the install hint), rather than the OS failing under a codex that exists.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ProcessError::CodexNotFound { .. })
    }

    /// The error for a failed spawn of `program`: a missing or non-executable binary gets the
    /// install hint, anything else says the OS refused.
    pub(super) fn from_spawn(program: &std::path::Path, e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::NotFound => ProcessError::CodexNotFound {
                program: program.display().to_string(),
                version: NEWEST_TESTED_CODEX_VERSION,
            },
            io::ErrorKind::PermissionDenied => ProcessError::CodexNotFound {
                program: format!("{} (not executable)", program.display()),
                version: NEWEST_TESTED_CODEX_VERSION,
            },
            _ => ProcessError::Spawn {
                program: program.display().to_string(),
                source: e,
            },
        }
    }
}
