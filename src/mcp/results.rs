//! The tool results several tools share: `structuredContent` shapes (each declared as the
//! tool's `outputSchema`), plus the text block for clients that ignore structured content. A
//! turn's result ([`TurnResult`] and its parts) is every turn tool's, and an error's too
//! (`super::answer`); a session as the session tools show it ([`SessionInfo`]), and
//! [`SessionResult`], `getSession`'s and `closeSession`'s. A result only one tool returns is
//! in that tool's file under `super::tools`.

use schemars::JsonSchema;
use serde::Serialize;

use crate::failure::FailureKind;
use crate::usage::Usage;

/// The result of a codex turn (`codex`, `query`, `search`, `structured`, `review`).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnResult {
    /// Codex's final answer (on a timeout: the partial answer so far).
    pub response: String,
    /// The session id to pass back to continue (`codex` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Codex's thread id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Whether this turn continued an existing Codex thread (`codex` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    /// The model: for `codex`, the one codex recorded it ran with; else the one asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub usage: UsageReport,
    pub duration_ms: u64,
    /// Time spent waiting for the session and a codex slot.
    pub queued_ms: u64,
    pub timed_out: bool,
    /// Commands Codex ran (redacted).
    pub commands: Vec<CommandReport>,
    /// Files Codex changed.
    pub files_changed: Vec<String>,
    /// The sandbox level of this turn.
    pub sandbox: String,
    /// The approval mode codex recorded for the turn (`never`), when it keeps a record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// Who approves escalations, as codex recorded it (`user`: nobody, so none happen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_reviewer: Option<String>,
    /// Whether the sandbox and approval were confirmed from codex's own record of the turn.
    pub policy_verified: bool,
    /// The response was cut to `maxResponseLength`.
    pub truncated: bool,
    /// Review findings parsed from Codex's review (`review` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Finding>>,
    /// The validated JSON answer (`structured` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Codex's questions during the turn (approvals, input) and what was decided, in order
    /// (`approvals = ask`; without it every question is declined and none is listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Vec<ApprovalReport>>,
    /// The messages that joined this turn while it ran (`steer`), in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steered: Option<Vec<String>>,
    /// What went wrong, on an error result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
    /// A background turn's state (`background: true`, `wait`): `running`, `completed`,
    /// `failed`, `cancelled` or `interrupted` (the process running it stopped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The handle of a background review, for `wait` (`review` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_id: Option<String>,
    /// What codex is doing now, while a background turn runs (`wait`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
}

/// One of codex's questions and its answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalReport {
    /// The question as the person saw it (redacted, cut).
    pub asked: String,
    /// `acceptOnce` or `decline`: there is no lasting approval.
    pub decision: String,
    /// Whether a person decided (not a timeout, an error, or a client that cannot be asked).
    pub by_person: bool,
    /// Why it is a decline when no person decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Token usage of the turn and of the whole thread.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<Usage>,
}

/// One command Codex ran.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandReport {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub status: String,
}

pub use crate::actors::Finding;

/// An error's kind and message (redacted).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    pub kind: ErrorKind,
    pub message: String,
}

/// The bridge's own error kinds, one list: the enum and [`ErrorKind::OWN`] are made from it,
/// so the schema's list cannot miss one.
macro_rules! error_kinds {
    ($($kind:ident,)*) => {
        /// What kind of error ended a call: the bridge's own kinds, or why codex failed the
        /// turn (a [`FailureKind`], shown by its own name: `auth`, `rate_limit`, …). Its schema
        /// is one list of names, the two kinds together.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorKind {
            $($kind,)*
            /// Codex failed the turn, and why.
            #[serde(untagged)]
            Codex(FailureKind),
        }

        impl ErrorKind {
            /// The bridge's own kinds (the others are codex's, [`FailureKind::ALL`]).
            const OWN: &'static [ErrorKind] = &[$(ErrorKind::$kind),*];
        }
    };
}

error_kinds! {
    InvalidArgument,
    InvalidSetting,
    CodexNotFound,
    TimedOut,
    Cancelled,
    OutputCap,
    Busy,
    SessionFailed,
    Store,
    Io,
}

impl ErrorKind {
    /// Every kind, as a result names it: the bridge's own, then codex's.
    fn names() -> Vec<serde_json::Value> {
        let codex = FailureKind::ALL.iter().map(|f| ErrorKind::Codex(*f));
        ErrorKind::OWN
            .iter()
            .copied()
            .chain(codex)
            .filter_map(|k| serde_json::to_value(k).ok())
            .collect()
    }
}

impl JsonSchema for ErrorKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "What kind of error ended a call.",
            "type": "string",
            "enum": ErrorKind::names(),
        })
    }
}

/// One stored session, as the session tools show it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    pub working_directory: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub created_ms: u64,
    pub last_used_ms: u64,
    pub turn_count: u64,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<TurnStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last turn's answer (redacted; its first 4000 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_response: Option<String>,
    /// The name a person gave it (`renameSession`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many turns `rewindSession` dropped from its conversation in all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_turns: u64,
    /// How many times `compactSession` compacted its conversation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u64,
    /// Codex's token counts of the last compaction, when codex reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<Compaction>,
    /// The command a person runs in a terminal to continue this conversation in codex's own
    /// app (its CODEX_HOME and working directory included), one line that sh, bash, zsh and
    /// fish read alike. The server does not write the thread while that app holds it open
    /// with this command. Absent when a path in it holds a character a terminal does not
    /// show as it is (`handOffUnavailable` says which and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hand_off: Option<String>,
    /// Why there is no `handOff` for a session with a thread: the path (working directory,
    /// CODEX_HOME or codex program) and the character in it that a terminal does not show as
    /// it is (a control, newline or tab, a bidirectional or zero-width character...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hand_off_unavailable: Option<String>,
    /// Whether an actor for it is live right now.
    pub live: bool,
    /// Its own git worktree (`codex` with `worktree: true`): path, branch, base commit, the
    /// checkout it came from and the files changed (+/-); `gone` when removed by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeView>,
}

pub use crate::actors::{ChangedFile, WorktreeView};
pub use crate::status::TurnStatus;

/// `getSession` and `closeSession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionResult {
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionInfo>,
    /// `closeSession`: the session was forgotten.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed: Option<bool>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A compaction's context size in tokens before and after, as codex reported it (its
/// `last.totalTokens` when the compaction started and once it was done).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    pub tokens_before: u64,
    pub tokens_after: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_every_kind_once_each_as_a_result_shows_it() {
        let names = ErrorKind::names();
        assert_eq!(names.len(), ErrorKind::OWN.len() + FailureKind::ALL.len());
        let mut unique = names.clone();
        unique.sort_by_key(|v| v.to_string());
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name twice: {names:?}");
        // a codex failure is shown by its own name, not nested
        for f in FailureKind::ALL {
            let shown = serde_json::to_value(ErrorKind::Codex(*f)).unwrap();
            assert_eq!(shown, serde_json::to_value(f).unwrap());
            assert!(names.contains(&shown));
        }
        for own in ["invalid_argument", "timed_out", "io"] {
            assert!(names.contains(&serde_json::json!(own)), "{own}");
        }
        assert!(names.contains(&serde_json::json!("policy_mismatch")));
    }
}
