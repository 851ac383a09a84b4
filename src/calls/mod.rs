//! What the MCP layer and the actors exchange: the typed requests the MCP layer hands to
//! [`crate::actors::Bridge`] and the answers it gets back. They name no process or store type:
//! the MCP layer shapes an [`Answer`] or a [`SessionView`] without knowing how codex ran or
//! where a session is kept; `report.rs` makes them from a turn's outcome and a record.

mod report;

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::actors::client::{ClientContext, Progress};
use crate::codex::events::{CommandRun, Usage};
use crate::codex::rollout::TurnContext;
use crate::config::CodexSupport;
use crate::error::Error;
use crate::plan::review::ReviewTarget;
use crate::plan::values::{ReasoningEffort, SandboxLevel};
use crate::security::ids::{ModelId, SessionId, ThreadId};
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;
use crate::turn::schema::SchemaUse;

/// The working directory of a session turn.
#[derive(Debug, Clone)]
pub enum WorkDir {
    /// Named by the caller: a stored session must be bound to it.
    Given(Confined),
    /// The caller named none: a stored session's own directory (checked again against the
    /// client's roots by the session actor), else this default.
    Default(Confined),
}

impl WorkDir {
    /// The directory itself, whichever way it was chosen.
    pub fn confined(&self) -> &Confined {
        match self {
            WorkDir::Given(c) | WorkDir::Default(c) => c,
        }
    }
}

/// A session-less turn, as asked for by a tool.
pub enum OneShot {
    /// A question, with optional context, in a fresh empty read-only directory.
    Query {
        prompt: Prompt,
        context: Option<String>,
        model: Option<ModelId>,
        reasoning_effort: Option<ReasoningEffort>,
    },
    /// A web search, in a fresh empty read-only directory.
    Search {
        query: Prompt,
        model: Option<ModelId>,
    },
    /// Codex's review of a repository.
    Review {
        target: ReviewTarget,
        model: Option<ModelId>,
        cwd: Confined,
    },
    /// An answer checked against a JSON Schema, asked once more when it does not validate.
    Structured {
        prompt: Prompt,
        /// Attached inside `cwd`.
        files: Vec<String>,
        plan: Box<SchemaUse>,
        model: Option<ModelId>,
        cwd: Confined,
    },
}

/// One session-less call: the request, its limits, and whose it is.
pub struct OneShotCall {
    pub request: OneShot,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    /// One sink for the whole call (progress keeps increasing across a re-ask).
    pub progress: Option<Progress>,
    /// The asking connection's context.
    pub client: Arc<ClientContext>,
}

/// One review finding: `[P1] title — path:lines` (the `review` tool's answer shows it as it
/// is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// `P0` (most severe) to `P3`.
    pub priority: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// What a turn (session or one-shot) answered, for the MCP layer to shape: the one answer
/// between codex's turn ([`crate::codex::process::TurnOutcome`], made into it once in
/// `report.rs`) and the tool's result.
#[derive(Debug, Default)]
pub struct Answer {
    /// The session the turn was of (`codex`'s turns only).
    pub session_id: Option<SessionId>,
    /// The session existed with a thread, and this turn continued it.
    pub resumed: bool,
    /// The session's record was created by this call.
    pub created: bool,
    /// Codex's final message (on a timeout or a cancellation: the partial one).
    pub response: String,
    pub thread_id: Option<ThreadId>,
    pub turn_usage: Option<Usage>,
    pub thread_usage: Option<Usage>,
    pub duration: Duration,
    /// Time spent waiting for the session and for a slot.
    pub queued: Duration,
    pub timed_out: bool,
    pub commands: Vec<CommandRun>,
    pub files_changed: Vec<String>,
    /// The level the turn ran with (`None` only for an answer that never ran).
    pub sandbox: Option<SandboxLevel>,
    /// What codex recorded for the turn, when it keeps a rollout.
    pub recorded: Option<TurnContext>,
    /// The model: as codex recorded it for a session turn, else the one asked for.
    pub model: Option<String>,
    /// `structured`: the validated (and redacted) JSON.
    pub data: Option<Value>,
    /// `review`: the findings parsed from codex's rendering.
    pub findings: Option<Vec<Finding>>,
    /// Why the call failed, with this answer as its partial result; `None`: it succeeded.
    pub error: Option<Error>,
    /// Codex's questions during the turn and what was decided.
    pub approvals: Vec<crate::approval::DecisionRecord>,
    /// Messages that joined the running turn (`steer`).
    pub steered: Vec<String>,
}

/// One stored session, as the session tools show it.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub session_id: String,
    pub thread_id: Option<ThreadId>,
    pub working_directory: String,
    pub model: Option<String>,
    pub created_ms: u64,
    pub last_used_ms: u64,
    pub turn_count: u64,
    pub usage: Usage,
    pub last_status: Option<TurnStatus>,
    pub last_error: Option<String>,
    /// The last turn's answer (redacted, cut).
    pub last_response: Option<String>,
    /// The name a person gave it.
    pub name: Option<String>,
    /// How many turns `rewindSession` dropped from its threads in all.
    pub dropped_turns: u64,
    /// How many times `compactSession` compacted it, and codex's token counts of the last
    /// compaction (before, after).
    pub compactions: u64,
    pub last_compaction: Option<(u64, u64)>,
    /// The CODEX_HOME its thread lives in.
    pub codex_home: Option<String>,
    /// Whether its actor is live right now.
    pub live: bool,
    /// Its own git worktree, when it has one.
    pub worktree: Option<WorktreeView>,
}

/// A session's own git worktree, as the session tools show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeView {
    /// Where it is: the session works there.
    pub path: String,
    /// Its branch (`codex-bridge/<session>`).
    pub branch: String,
    /// The commit it started from, which its changes are against.
    pub base_commit: String,
    /// The checkout it came from, onto which `apply` lands its changes.
    pub origin: String,
    /// Its directory is gone (removed by hand): nothing to show or apply; `closeSession`
    /// forgets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
    /// The files changed against the base (absent when they could not be read: `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<ChangedFile>>,
    /// Why its changes could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One file a session changed in its worktree, against its base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// Relative to the top of the worktree, `/`-separated.
    pub path: String,
    /// `added`, `modified`, `deleted` or `typeChanged`.
    pub status: String,
    /// Lines added and removed (absent for a binary file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
    /// A binary file: named, its content never shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// A session's changes against its base: the files and, in the same order, each file's part
/// of the unified diff (a binary file's is one line naming it).
#[derive(Debug, Clone)]
pub struct SessionDiff {
    pub worktree: WorktreeView,
    pub files: Vec<ChangedFile>,
    pub parts: Vec<String>,
    /// The SHA-256 (hex) of the whole patch an apply would land now.
    pub digest: String,
}

/// What `apply` did to the checkout a session came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Every change landed (not staged, not committed): these files were written.
    Landed(Vec<String>),
    /// Nothing landed: these files conflict.
    Refused(Vec<String>),
}

pub use crate::status::TurnStatus;

/// A page of sessions, newest first.
#[derive(Debug, Clone)]
pub struct SessionPage {
    pub sessions: Vec<SessionView>,
    pub next: Option<String>,
}

/// The server's health, for `ping`.
#[derive(Debug, Clone)]
pub struct Status {
    /// `codex --version`, when codex could be run.
    pub codex_version: Option<String>,
    pub codex_support: Option<CodexSupport>,
    pub store_path: String,
    pub schema_version: u64,
    /// How a turn's processes are contained (`cgroup` or `process-group`).
    pub containment: String,
    pub counts: Counts,
    /// The backend set, the one session turns use, and why they differ.
    pub backend: BackendStatus,
}

/// How session turns run: the operator's setting, what is in effect, and a warning when the
/// two differ (codex has no usable app-server).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    /// `exec` or `app-server`, as set.
    pub configured: String,
    /// The one session turns use now.
    pub effective: String,
    /// Why they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// Warm app-server processes now, and the cap.
    pub warm_processes: usize,
    pub max_warm: usize,
}

/// One turn asked for by a tool call.
pub struct TurnCall {
    /// `None`: a new session with a generated id.
    pub session_id: Option<SessionId>,
    /// Start a new Codex thread under the same session id.
    pub reset: bool,
    /// Checked where the call was parsed; moved, not copied, into codex's invocation (`None`
    /// once it has moved into the turn: the call itself stays whole for the turn's task).
    pub prompt: Option<Prompt>,
    /// `files` attachments, resolved inside the session's working directory.
    pub files: Vec<String>,
    pub sandbox: Option<SandboxLevel>,
    pub model: Option<ModelId>,
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The confined working directory; the session actor holds a stored session to its own.
    pub cwd: WorkDir,
    pub timeout: Duration,
    /// On a busy session: wait for its turn (true) or fail at once.
    pub wait_if_busy: bool,
    pub cancel: CancellationToken,
    pub progress: Option<Progress>,
    /// The asking connection's context; `None`: the owning process's own.
    pub client: Option<Arc<ClientContext>>,
    /// Asks codex's questions of this turn of the person behind the connection that started it
    /// (`approvals = ask`, a client that can be asked); `None`: every question is declined.
    pub asker: Option<crate::approval::Asker>,
    /// The host that made the call (the MCP layer's key of it, opaque here): a close by
    /// another host does not end it, running or queued ([`crate::actors::Bridge::close`]);
    /// `None`: the owning process's own call, which any close ends.
    pub host: Option<String>,
    /// A new session's own git worktree, asked for: `Some(base)` (`None`: the repository's
    /// `HEAD`). Refused, naming `worktree`, on a session that exists.
    pub worktree: Option<Option<String>>,
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

/// What `renameSession`, `rewindSession` and `compactSession` do to a session's thread
/// (codex's record of it, by a one-off app-server), and to its record.
#[derive(Debug, Clone)]
pub enum ThreadOp {
    /// Name it.
    Name(crate::security::ids::SessionName),
    /// Drop its last turns.
    Rewind(u32),
    /// Compact its context; codex's token counts before and after, once done.
    Compact(Option<(u64, u64)>),
}

impl ThreadOp {
    /// The verb, for a refusal's words and the logs ("rename it once …").
    pub fn verb(&self) -> &'static str {
        match self {
            ThreadOp::Name(_) => "rename",
            ThreadOp::Rewind(_) => "rewind",
            ThreadOp::Compact(_) => "compact",
        }
    }
}
