//! The types of one turn: its options and limits ([`RunOptions`], [`Limits`]), what identifies
//! its process ([`SpawnInfo`]), and how it ended ([`TurnOutcome`]). A leaf: the files of
//! `process/` name these here, never through `process/mod.rs`.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::codex::events::{CommandRun, FailureKind, Usage};
use crate::security::ids::ThreadId;
use crate::security::redact::ClientSecrets;

/// Output caps of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest stdout line parsed; a longer one is skipped and counted.
    pub max_line_bytes: usize,
    /// Most stdout bytes read per turn; past it the turn is stopped with an error.
    pub max_output_bytes: usize,
    /// Bytes of stderr kept (the tail), for error messages.
    pub stderr_tail_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // a command's aggregated output arrives inside one line; 8 MiB holds any sane one
            max_line_bytes: 8 * 1024 * 1024,
            // 64 MiB of JSONL is far beyond a real turn; an endless printer stops here
            max_output_bytes: 64 * 1024 * 1024,
            // enough for the last error codex printed, small enough to keep per turn
            stderr_tail_bytes: 64 * 1024,
        }
    }
}

/// Grace between SIGTERM and SIGKILL on a timeout (the security model's 5 s).
pub const TIMEOUT_GRACE: Duration = Duration::from_secs(5);
/// Grace on cancellation: short, so a cancelled call frees its slot well within 1 s.
pub const CANCEL_GRACE: Duration = Duration::from_millis(300);

/// How one turn runs.
#[derive(Clone)]
pub struct RunOptions {
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub limits: Limits,
    /// The thread's usage total before this turn (zero for a new thread), to compute the
    /// turn's own usage from codex's running total.
    pub prior_thread_usage: Usage,
    pub timeout_grace: Duration,
    pub cancel_grace: Duration,
    /// Called once codex runs, with what identifies its process (for crash recovery).
    pub on_spawn: Option<SpawnHook>,
    /// The asking client's own literal secrets, redacted from the outcome on top of the
    /// process-wide redactor (none for this process's own client).
    pub secrets: ClientSecrets,
}

/// Called once codex runs (see [`RunOptions::on_spawn`]).
pub type SpawnHook = std::sync::Arc<dyn Fn(&SpawnInfo) + Send + Sync>;

/// What identifies a running codex child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnInfo {
    pub pid: i32,
    /// /proc/PID/stat field 22: with the pid, identifies the process across pid reuse.
    pub start_ticks: u64,
    /// Hash of the argv, to recognise the process later from /proc/PID/cmdline.
    pub argv_hash: u64,
    pub cgroup: Option<PathBuf>,
}

impl RunOptions {
    /// Defaults for a turn with this timeout.
    pub fn new(timeout: Duration, limits: Limits) -> Self {
        RunOptions {
            timeout,
            cancel: CancellationToken::new(),
            limits,
            prior_thread_usage: Usage::default(),
            timeout_grace: TIMEOUT_GRACE,
            cancel_grace: CANCEL_GRACE,
            on_spawn: None,
            secrets: ClientSecrets::default(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Completed,
    Failed { kind: FailureKind, message: String },
    TimedOut { after: Duration },
    Cancelled,
    OutputCapExceeded { limit: usize },
}

/// For logs: `completed`, `failed (KIND): MESSAGE`, `timed out after Ns`, ….
impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Completed => f.write_str("completed"),
            Ending::Failed { kind, message } => write!(f, "failed ({kind}): {message}"),
            Ending::TimedOut { after } => write!(f, "timed out after {}s", after.as_secs()),
            Ending::Cancelled => f.write_str("cancelled"),
            Ending::OutputCapExceeded { limit } => {
                write!(f, "stopped at the output cap of {limit} bytes")
            }
        }
    }
}

/// What only an exec turn's process tells: its exit status and the redacted tail of its
/// stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecExit {
    /// `None`: killed by a signal.
    pub exit_code: Option<i32>,
    pub stderr_tail: String,
}

/// How the turn's processes were contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Containment {
    /// A cgroup v2 of its own: every descendant is killed at the end.
    Cgroup,
    /// The process group plus a walk of codex's descendants.
    #[default]
    ProcessGroup,
}

/// How a turn ended and what it produced, redacted: the result of [`run`](super::run) and of a
/// warm process's turn, the one turn path's answer. What it produced is there on every
/// ending, so a timeout still carries the partial answer.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    pub ending: Ending,
    pub thread_id: Option<ThreadId>,
    /// The last agent message (the answer, or the partial answer).
    pub message: Option<String>,
    pub thread_usage: Option<Usage>,
    pub turn_usage: Option<Usage>,
    pub commands: Vec<CommandRun>,
    pub files_changed: Vec<String>,
    pub duration: Duration,
    /// How an exec turn's process exited; `None` for a warm turn (its app-server lives on and
    /// serves the next turn: it has no exit status or stderr of its own to show).
    pub exec: Option<ExecExit>,
    pub unknown_events: u64,
    pub malformed_lines: u64,
    pub retries: u64,
    /// Which containment the turn ran under.
    pub containment: Containment,
    /// Codex's questions during the turn and what was decided (warm turns whose caller can be
    /// asked; otherwise none are asked).
    pub approvals: Vec<crate::approval::DecisionRecord>,
    /// The messages that joined the running turn (`steer`), redacted.
    pub steered: Vec<String>,
    /// What codex recorded of the turn in its rollout (approval, reviewer, sandbox, model),
    /// read by the turn path once the turn ended (a session's turns only).
    pub recorded: Option<crate::codex::rollout::TurnContext>,
}

impl TurnOutcome {
    /// A turn that ended so, having produced nothing (yet): what it produced is filled in by
    /// whoever ran it.
    pub fn ended(ending: Ending) -> TurnOutcome {
        TurnOutcome {
            ending,
            thread_id: None,
            message: None,
            thread_usage: None,
            turn_usage: None,
            commands: Vec::new(),
            files_changed: Vec::new(),
            duration: Duration::ZERO,
            exec: None,
            unknown_events: 0,
            malformed_lines: 0,
            retries: 0,
            containment: Containment::default(),
            approvals: Vec::new(),
            steered: Vec::new(),
            recorded: None,
        }
    }

    /// Whether `codex exec` ran it (its process's exit is known), not a warm app-server: what
    /// codex may have recorded of it is judged by that (exec never asks a person).
    pub fn ran_with_exec(&self) -> bool {
        self.exec.is_some()
    }
}
