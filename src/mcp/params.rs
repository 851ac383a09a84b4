//! Tool arguments. Field docs become the schema descriptions hosts show their models; names
//! follow the reference bridge so a host can switch by changing one line of config. Unknown
//! fields are refused (`additionalProperties: false`).

use schemars::JsonSchema;
use serde::Deserialize;

pub use crate::codex::argv::{ReasoningEffort, ReviewMode, SandboxLevel};

/// `codex`: a turn in a persistent session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodexParams {
    /// The task or question for Codex. Sent over stdin, never on the command line.
    pub prompt: String,
    /// Continue this session (letters, digits, `_`, `-`; up to 256). Omit to start a new one;
    /// an unknown id starts a new session under that id. The id is returned in every result.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Start a new Codex thread under the same session id.
    #[serde(default)]
    pub reset_session: Option<bool>,
    /// Sandbox for the commands Codex runs: `read-only` (default, every turn, including resumed
    /// ones), `workspace-write`, or `full-auto` (alias of workspace-write). `danger-full-access`
    /// only when the operator enabled it. Never remembered between turns.
    #[serde(default)]
    pub sandbox: Option<SandboxLevel>,
    /// Model id (any provider's; passed to codex as `--model=`).
    #[serde(default)]
    pub model: Option<String>,
    /// Reasoning effort for this turn.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Working directory, inside the server's allowed roots. A session stays bound to the
    /// directory it started in; omit it to continue there.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Files to attach, relative to the working directory: `path`, or `path:START-END` for a
    /// line range. Images (png, jpg, jpeg, gif, webp) are attached as images.
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// Timeout of the turn in milliseconds (default and cap set by the operator).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Truncate the response to this many characters.
    #[serde(default)]
    pub max_response_length: Option<u64>,
    /// When the session is busy with another turn: wait for it (default true), or fail at once.
    #[serde(default)]
    pub wait_if_busy: Option<bool>,
}

/// `query`: a one-off question, no session, no repository.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryParams {
    /// The question.
    pub prompt: String,
    /// Extra context placed before the question.
    #[serde(default)]
    pub context: Option<String>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Reasoning effort.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `search`: a web search synthesised by Codex.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchParams {
    /// What to search the web for.
    pub query: String,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `structured`: an answer that validates against a JSON Schema.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StructuredParams {
    /// The task.
    pub prompt: String,
    /// The JSON Schema the answer must satisfy (an object, or a string holding one).
    pub schema: serde_json::Value,
    /// Files to attach (as for `codex`).
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Working directory, inside the allowed roots.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Timeout in milliseconds (covers the re-ask too).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `review`: Codex's code review of a repository's changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewParams {
    /// What to review: `uncommitted` changes (default), changes against a `base` branch, or one
    /// `commit`.
    #[serde(default)]
    pub mode: Option<ReviewMode>,
    /// The base branch (mode `base`).
    #[serde(default)]
    pub base: Option<String>,
    /// The commit (mode `commit`).
    #[serde(default)]
    pub commit: Option<String>,
    /// A title for the commit review (mode `commit` only).
    #[serde(default)]
    pub title: Option<String>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// The repository, inside the allowed roots.
    pub working_directory: String,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `listSessions`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListSessionsParams {
    /// The `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Sessions per page (1-200, default 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `getSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetSessionParams {
    /// The session id.
    pub session_id: String,
}

/// `closeSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloseSessionParams {
    /// The session id. A running turn is cancelled first.
    pub session_id: String,
    /// Also delete Codex's own thread files (`codex delete`).
    #[serde(default)]
    pub delete_thread: Option<bool>,
}

/// `forkSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkSessionParams {
    /// The session to fork, between turns. The fork gets a new sessionId, the same working
    /// directory and a copy of the conversation so far; each then goes its own way.
    pub session_id: String,
}

/// `steer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteerParams {
    /// The session whose running turn takes the message (the turn must be running).
    pub session_id: String,
    /// What to add to the running turn, e.g. a correction; the turn goes on with it.
    pub prompt: String,
}

/// `ping`: no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PingParams {}
