//! The JSON-RPC of `codex app-server`, typed. Pure: serde only, no IO.
//!
//! The wire: one JSON object per line on the child's stdin/stdout, no `jsonrpc` field. A request
//! has `id` + `method` + `params`, a notification no `id`, a response `id` + `result` or `error`.
//! Server→client request ids are integers that start at 0 (0 is an id, not "none").
//!
//! Every rule here answers one of the five defaults of `codex app-server` that change for the
//! worse against `codex exec` (each pinned by a test in tests/suite/app_server.rs):
//! - **A whitelist of methods.** A [`Message`] can only be built by the functions of this module:
//!   `initialize` + `initialized`, `thread/start`, `thread/resume`, `turn/start`,
//!   `turn/interrupt` and `thread/backgroundTerminals/clean` (present on 0.145.0 and 0.171.0
//!   behind `capabilities.experimentalApi`, which `initialize` therefore declares), and
//!   `thread/fork` / `turn/steer` (both versions; fork under the thread-level template), and
//!   `thread/unsubscribe` (both versions: a one-shot's ephemeral thread let go). Nothing else
//!   (`thread/shellCommand`, `command/exec`, `fs/*`, `config/*`) can be sent.
//! - **Fixed templates, no caller keys.** `thread/start` / `thread/resume` carry `cwd`,
//!   `sandbox: "read-only"`, `approvalPolicy: "never"`, `approvalsReviewer: "user"` (and an
//!   optional model), never `config` (it beats the process's `-c` pins and can spawn MCP
//!   servers) and never a writable `sandbox` (that writes the cwd into `config.toml` as trusted).
//! - **Nothing sticky.** Every `turn/start` carries `sandboxPolicy` (read-only when the caller
//!   gave none), `approvalPolicy`, `approvalsReviewer` and `cwd`: each of these is sticky on a
//!   thread, so one left out inherits the previous turn's value.
//! - **Every server request is answered.** [`ServerRequest::decline`] builds the refusal of
//!   each kind (an unanswered request blocks the turn forever); kinds this module does not know
//!   get a JSON-RPC error. Every answer is a typed shape of this module: besides the refusals,
//!   only an accept once, a grant for the turn, typed answers and a form's primitive content.
//! - **The effective policy is checked.** [`EffectivePolicy`] is what codex reports (the
//!   `thread/start`/`thread/resume` result, then `thread/settings/updated`, which both versions
//!   send before `turn/started` when a `turn/start` changed a setting); [`EffectivePolicy::check`]
//!   compares it with what the template sent, so a caller can fail closed on a mismatch.
//!
//! Shapes were checked against `codex app-server generate-json-schema` of 0.145.0 and 0.171.0 and
//! against lines measured on both (the tests of each file quote them). Version differences that
//! matter here: 0.171.0 sends `thread/settings/updated` before the `turn/start` response, 0.145.0
//! after it (both before `turn/started`); 0.145.0's `turn/completed` has `items: []` (0.171.0 a
//! summary), so the agent's message is taken from `item/completed`; 0.171.0 adds fields
//! everywhere (ignored).
//!
//! The files, by topic (as codex's own `app-server-protocol` crate is split), each naming only
//! those before it: `frame.rs` (the error, the method whitelist, the sealed message traits, the
//! ids, the handshake), `policy.rs` (sandbox and approval policy, sent and reported), `turn.rs`
//! (`turn/*` and a turn as codex reports it), `items.rs` (items and notifications), `thread.rs`
//! (`thread/*` and the policy watch), `requests.rs` (codex's requests and their answers) and
//! `incoming.rs` (one line from codex, read). This file only re-exports them.

mod frame;
mod incoming;
mod items;
mod policy;
mod requests;
mod thread;
mod turn;

/// A thread id: the bridge's one thread id type (a UUID, parsed once), in every message
/// written and read here.
pub use crate::security::ids::ThreadId;

/// The state of a command or file-change item: the bridge's own ([`ItemStatus`]), read from
/// the app-server's camel-case spelling.
pub use crate::codex::events::ItemStatus;

pub use frame::{
    CLIENT_NAME, Initialize, InitializeResponse, Initialized, Message, Method, ProtocolError,
    Request, RequestId, RpcError, TurnRef, initialize, initialized,
};
pub use incoming::{Incoming, parse_line};
pub use items::{AnnouncedChange, AnnouncedKind, Item, Notification, TokenUsage, UnreadableChange};
pub use policy::{Approvals, EffectivePolicy, PolicyMismatch, ReportedSandbox, sandbox_policy};
pub use requests::{
    CommandApprovalParams, CommandKind, ElicitationParams, ElicitationRequest,
    FileChangeApprovalParams, FileSystemPermissions, InputOption, NetworkApprovalContext,
    NetworkPermissions, PermissionEntry, PermissionsApprovalParams, QuestionParams, RequestHead,
    RequestKind, RequestedPermissions, ServerRequest, UNSUPPORTED_REQUEST_CODE, UserInputParams,
    WireInputQuestion,
};
pub use thread::{
    PolicyWatch, Reverted, RolledBack, ThreadCompactStart, ThreadFork, ThreadOpened, ThreadResume,
    ThreadRevert, ThreadRollback, ThreadSetName, ThreadStart, ThreadTurnsList, ThreadUnsubscribe,
    TurnsPage, UnsubscribeStatus, Unsubscribed, parse_thread_opened, parse_unsubscribed,
    thread_compact_start, thread_fork, thread_resume, thread_revert, thread_rollback,
    thread_set_name, thread_start, thread_turns_list, thread_unsubscribe,
};
pub use turn::{
    CleanBackgroundTerminals, Empty, StartedTurn, Steered, TurnInterrupt, TurnParams, TurnStart,
    TurnStatus, TurnSteer, clean_background_terminals, parse_steered, parse_turn_started,
    turn_interrupt, turn_start, turn_start_with, turn_start_with_schema, turn_steer,
};

/// What the tests of every file share: a thread and a turn id as codex prints them, a prompt,
/// and the params and line a template writes.
#[cfg(test)]
mod fixtures {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::{Message, ThreadId, TurnRef};
    use crate::security::prompt::Prompt;

    pub(super) const THREAD: &str = "01a22759-e393-7f71-bea4-35a12106bc11";
    pub(super) const TURN: &str = "01a22753-3cfc-7740-b25a-145bedef01df";

    pub(super) fn thread() -> ThreadId {
        ThreadId::parse(THREAD).unwrap()
    }

    pub(super) fn turn() -> TurnRef {
        TurnRef::parse(TURN).unwrap()
    }

    /// A measured line with its thread and turn ids (`"T"`, `"U"`) as the UUIDs codex prints.
    pub(super) fn with_ids(line: &str) -> String {
        line.replace("\"T\"", &format!("\"{THREAD}\""))
            .replace("\"U\"", &format!("\"{TURN}\""))
    }

    pub(super) fn text(s: &str) -> Prompt {
        Prompt::parse("prompt", s.into()).unwrap()
    }

    pub(super) fn keys(o: &impl Message) -> BTreeSet<String> {
        o.params()
            .as_ref()
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn line(o: &impl Message, id: i64) -> Value {
        serde_json::from_str(&o.to_line(id).unwrap()).unwrap()
    }
}
