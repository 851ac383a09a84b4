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
//! against lines measured on both (the tests below quote them). Version differences that matter
//! here: 0.171.0 sends `thread/settings/updated` before the `turn/start` response, 0.145.0 after it
//! (both before `turn/started`); 0.145.0's `turn/completed` has `items: []` (0.171.0 a summary), so
//! the agent's message is taken from `item/completed`; 0.171.0 adds fields everywhere (ignored).

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::codex::argv::{ReasoningEffort, SandboxLevel};

/// What goes in `clientInfo.name` (codex uses it as the `originator` of threads it creates).
pub const CLIENT_NAME: &str = "codex_mcp_bridge";

/// Why a message could not be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A value the template needs was refused.
    #[error("invalid {field} for codex app-server: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// A line from codex was not a JSON-RPC message.
    #[error("codex app-server sent a line that is not a JSON-RPC message: {0}")]
    Malformed(String),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ProtocolError {
    ProtocolError::Invalid {
        field,
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Outgoing

/// The methods the bridge ever sends: this enum is the whitelist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Initialize,
    /// The notification that completes the handshake.
    Initialized,
    ThreadStart,
    ThreadResume,
    TurnStart,
    TurnInterrupt,
    /// `thread/backgroundTerminals/clean`: kills the commands an interrupted turn left running.
    CleanBackgroundTerminals,
    /// `thread/fork`: a new thread with a copy of a stored thread's history.
    ThreadFork,
    /// `turn/steer`: more input for the running turn.
    TurnSteer,
    /// `thread/unsubscribe`: the process lets go of a loaded thread (an ephemeral one is gone
    /// with it), so nothing of a one-shot call stays loaded for the next.
    ThreadUnsubscribe,
}

impl Method {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::Initialized => "initialized",
            Method::ThreadStart => "thread/start",
            Method::ThreadResume => "thread/resume",
            Method::TurnStart => "turn/start",
            Method::TurnInterrupt => "turn/interrupt",
            Method::CleanBackgroundTerminals => "thread/backgroundTerminals/clean",
            Method::ThreadFork => "thread/fork",
            Method::TurnSteer => "turn/steer",
            Method::ThreadUnsubscribe => "thread/unsubscribe",
        }
    }

    /// Whether this is a notification (sent without an id, never answered).
    pub fn is_notification(self) -> bool {
        self == Method::Initialized
    }
}

mod sealed {
    /// Only this module's templates are messages.
    pub trait Sealed {}
}

/// A message the bridge writes: one of the whitelisted [`Method`]s with its typed params. Only
/// this module's templates implement it (the trait is sealed) and their fields are private, so
/// the template functions below are the only way to build one.
pub trait Message: Serialize + sealed::Sealed {
    /// The method: the whitelist is [`Method`].
    const METHOD: Method;
    /// Whether the message carries `params` (`initialized` carries none).
    const HAS_PARAMS: bool = true;

    /// The method.
    fn method(&self) -> Method {
        Self::METHOD
    }

    /// The params as JSON (for tests and logs); `None` for a message without params.
    fn params(&self) -> Option<Value> {
        if !Self::HAS_PARAMS {
            return None;
        }
        serde_json::to_value(self).ok()
    }

    /// The JSON line (without the newline). `id` is ignored for a notification.
    fn to_line(&self, id: i64) -> Result<String, ProtocolError> {
        #[derive(Serialize)]
        struct Envelope<'a, M: ?Sized> {
            method: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<i64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<&'a M>,
        }
        let line = Envelope {
            method: Self::METHOD.as_str(),
            id: (!Self::METHOD.is_notification()).then_some(id),
            params: Self::HAS_PARAMS.then_some(self),
        };
        serde_json::to_string(&line).map_err(|e| invalid("params", e.to_string()))
    }
}

/// A [`Message`] that codex answers, and the type its result is read as (a missing or mistyped
/// field of the result is an error, never a default).
pub trait Request: Message {
    type Response: DeserializeOwned;
}

/// Make `$t` a [`Message`] of `$method` (and a [`Request`] answered by `$response`).
macro_rules! message {
    ($t:ty, $method:expr) => {
        impl sealed::Sealed for $t {}
        impl Message for $t {
            const METHOD: Method = $method;
        }
    };
    ($t:ty, $method:expr, $response:ty) => {
        message!($t, $method);
        impl Request for $t {
            type Response = $response;
        }
    };
}

/// A thread id: the bridge's one thread id type (a UUID, parsed once), in every message
/// written and read here.
pub use crate::security::ids::ThreadId;
pub use crate::security::prompt::Prompt;

/// A turn id as codex printed it (a UUID).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TurnRef(String);

fn check_uuid(field: &'static str, raw: &str) -> Result<String, ProtocolError> {
    let ok = raw.len() == 36
        && raw.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !ok {
        return Err(invalid(field, "is not a UUID"));
    }
    Ok(raw.to_ascii_lowercase())
}

impl TurnRef {
    /// Parse a turn id (anything but a plain UUID is refused).
    pub fn parse(raw: &str) -> Result<Self, ProtocolError> {
        check_uuid("turnId", raw).map(TurnRef)
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for TurnRef {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TurnRef {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// The id's text (read only: a `TurnRef` is built only by [`TurnRef::parse`]).
impl std::ops::Deref for TurnRef {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<TurnRef> for str {
    fn eq(&self, other: &TurnRef) -> bool {
        self == other.0
    }
}

impl<'de> Deserialize<'de> for TurnRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = std::borrow::Cow::<str>::deserialize(d)?;
        TurnRef::parse(&raw).map_err(serde::de::Error::custom)
    }
}

fn cwd_value(cwd: &Path) -> Result<String, ProtocolError> {
    let s = cwd
        .to_str()
        .ok_or_else(|| invalid("cwd", "is not valid UTF-8"))?;
    if !cwd.is_absolute() || s.contains('\0') {
        return Err(invalid("cwd", "must be an absolute path without NUL"));
    }
    Ok(s.to_owned())
}

fn model_value(model: Option<&str>) -> Result<Option<String>, ProtocolError> {
    match model {
        None => Ok(None),
        Some(m) => match crate::security::ids::model_problem(m) {
            Some(why) => Err(invalid("model", why)),
            None => Ok(Some(m.to_owned())),
        },
    }
}

/// `clientInfo` of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct ClientInfo {
    name: &'static str,
    title: &'static str,
    version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    experimental_api: bool,
}

/// The params of `initialize` ([`initialize`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Initialize {
    client_info: ClientInfo,
    capabilities: Capabilities,
}

/// The `initialize` result, as far as the bridge reads it (both versions also send
/// `codexHome`, `platformFamily` and `platformOs`, unread).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    pub user_agent: String,
}

message!(Initialize, Method::Initialize, InitializeResponse);

/// `initialized`: a notification without params ([`initialized`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Initialized;

impl sealed::Sealed for Initialized {}
impl Message for Initialized {
    const METHOD: Method = Method::Initialized;
    const HAS_PARAMS: bool = false;
}

/// `initialize`. Declares `experimentalApi`, which `thread/backgroundTerminals/clean` needs.
pub fn initialize(version: &str) -> Initialize {
    Initialize {
        client_info: ClientInfo {
            name: CLIENT_NAME,
            title: "codex-mcp-bridge",
            version: version.to_owned(),
        },
        capabilities: Capabilities {
            experimental_api: true,
        },
    }
}

/// `initialized`, the notification sent after the `initialize` response.
pub fn initialized() -> Initialized {
    Initialized
}

/// A thread-level `sandbox`: never writable (a writable `sandbox` there records the cwd as
/// trusted in `$CODEX_HOME/config.toml`; the turn's level goes in `turn/start.sandboxPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum ThreadSandbox {
    #[serde(rename = "read-only")]
    ReadOnly,
}

/// A thread-level `approvalPolicy`: `never` (a turn may ask, [`Approvals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum ThreadApprovals {
    #[serde(rename = "never")]
    Never,
}

/// `approvalsReviewer`: always a person, never a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum Reviewer {
    #[serde(rename = "user")]
    User,
}

/// The keys every thread-level template carries, and nothing a caller names (never `config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadKeys {
    cwd: String,
    sandbox: ThreadSandbox,
    approval_policy: ThreadApprovals,
    approvals_reviewer: Reviewer,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

fn thread_keys(cwd: &Path, model: Option<&str>) -> Result<ThreadKeys, ProtocolError> {
    Ok(ThreadKeys {
        cwd: cwd_value(cwd)?,
        sandbox: ThreadSandbox::ReadOnly,
        approval_policy: ThreadApprovals::Never,
        approvals_reviewer: Reviewer::User,
        model: model_value(model)?,
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The params of `thread/start` ([`thread_start`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadStart {
    #[serde(flatten)]
    keys: ThreadKeys,
    #[serde(skip_serializing_if = "is_false")]
    ephemeral: bool,
}

message!(ThreadStart, Method::ThreadStart, ThreadOpened);

/// The params of `thread/resume` ([`thread_resume`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResume {
    thread_id: String,
    #[serde(flatten)]
    keys: ThreadKeys,
}

message!(ThreadResume, Method::ThreadResume, ThreadOpened);

/// The params of `thread/fork` ([`thread_fork`]): those of `thread/resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadFork {
    thread_id: String,
    #[serde(flatten)]
    keys: ThreadKeys,
}

message!(ThreadFork, Method::ThreadFork, ThreadOpened);

/// `thread/start`: a new thread in `cwd` (a confined directory). `ephemeral` threads are never
/// written to disk (and cannot be resumed).
pub fn thread_start(
    cwd: &Path,
    model: Option<&str>,
    ephemeral: bool,
) -> Result<ThreadStart, ProtocolError> {
    Ok(ThreadStart {
        keys: thread_keys(cwd, model)?,
        ephemeral,
    })
}

/// `thread/resume` of a stored thread. On a thread the process already has loaded codex ignores
/// `sandbox`: only the next `turn/start`'s `sandboxPolicy` resets it.
pub fn thread_resume(
    thread: &ThreadId,
    cwd: &Path,
    model: Option<&str>,
) -> Result<ThreadResume, ProtocolError> {
    Ok(ThreadResume {
        thread_id: thread.to_arg(),
        keys: thread_keys(cwd, model)?,
    })
}

/// A turn's input: the caller's text, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum UserInput {
    Text { text: String },
}

fn text_input(prompt: &Prompt) -> [UserInput; 1] {
    [UserInput::Text {
        text: (**prompt).to_owned(),
    }]
}

/// The wire `SandboxPolicy` of a turn. Workspace-write gets no extra writable roots (an empty
/// array, always) and no network: the cwd is its only root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum SandboxPolicy {
    ReadOnly,
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        writable_roots: [String; 0],
        network_access: bool,
    },
    DangerFullAccess,
}

impl SandboxPolicy {
    fn of(level: SandboxLevel) -> Self {
        match level {
            SandboxLevel::ReadOnly => SandboxPolicy::ReadOnly,
            SandboxLevel::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
                writable_roots: [],
                network_access: false,
            },
            SandboxLevel::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        }
    }
}

/// The wire `SandboxPolicy` of a turn for a sandbox level, as JSON (what `turn/start` carries).
pub fn sandbox_policy(level: SandboxLevel) -> Value {
    json!(SandboxPolicy::of(level))
}

/// A turn: the caller's text and the few typed values a turn may carry.
#[derive(Debug, Clone)]
pub struct TurnParams<'a> {
    pub thread: &'a ThreadId,
    /// Checked where the call was parsed (never empty, bounded).
    pub prompt: &'a Prompt,
    /// `None` is read-only, whatever the previous turn used.
    pub sandbox: Option<SandboxLevel>,
    /// A confined directory.
    pub cwd: &'a Path,
    pub model: Option<&'a str>,
    pub effort: Option<ReasoningEffort>,
}

/// The params of `turn/start` ([`turn_start`], [`turn_start_with`],
/// [`turn_start_with_schema`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStart {
    thread_id: String,
    input: [UserInput; 1],
    sandbox_policy: SandboxPolicy,
    approval_policy: Approvals,
    approvals_reviewer: Reviewer,
    cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
}

/// The `turn/start` result: the turn it started.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "WireStarted")]
pub struct StartedTurn {
    pub id: TurnRef,
}

#[derive(Deserialize)]
struct WireStarted {
    turn: WireTurn,
}

impl From<WireStarted> for StartedTurn {
    fn from(w: WireStarted) -> Self {
        StartedTurn { id: w.turn.id }
    }
}

message!(TurnStart, Method::TurnStart, StartedTurn);

/// `turn/start`. Always carries `sandboxPolicy`, `approvalPolicy: "never"`,
/// `approvalsReviewer: "user"` and `cwd`: every one of them is sticky on the thread.
pub fn turn_start(t: &TurnParams<'_>) -> Result<TurnStart, ProtocolError> {
    Ok(TurnStart {
        thread_id: t.thread.to_arg(),
        input: text_input(t.prompt),
        sandbox_policy: SandboxPolicy::of(t.sandbox.unwrap_or(SandboxLevel::ReadOnly)),
        approval_policy: Approvals::Never,
        approvals_reviewer: Reviewer::User,
        cwd: cwd_value(t.cwd)?,
        model: model_value(t.model)?,
        effort: t.effort.map(|e| e.as_str()),
        output_schema: None,
    })
}

/// An empty result (`turn/interrupt`, `thread/backgroundTerminals/clean`): an object, its keys
/// (none on both versions) ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Empty {}

/// The params of `turn/interrupt` ([`turn_interrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterrupt {
    thread_id: String,
    turn_id: String,
}

message!(TurnInterrupt, Method::TurnInterrupt, Empty);

/// `turn/interrupt`. It ends the turn (`interrupted`) in a few ms but leaves a running command
/// alive: follow it with [`clean_background_terminals`].
pub fn turn_interrupt(thread: &ThreadId, turn: &TurnRef) -> TurnInterrupt {
    TurnInterrupt {
        thread_id: thread.to_arg(),
        turn_id: turn.as_str().to_owned(),
    }
}

/// The params of `thread/backgroundTerminals/clean` ([`clean_background_terminals`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanBackgroundTerminals {
    thread_id: String,
}

message!(
    CleanBackgroundTerminals,
    Method::CleanBackgroundTerminals,
    Empty
);

/// `thread/backgroundTerminals/clean`: kills the commands the thread's turns left running.
pub fn clean_background_terminals(thread: &ThreadId) -> CleanBackgroundTerminals {
    CleanBackgroundTerminals {
        thread_id: thread.to_arg(),
    }
}

// ---------------------------------------------------------------------------------------------
// The effective policy

/// A sandbox as codex reports it (`sandbox` of a thread result, `sandboxPolicy` of settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportedSandbox {
    ReadOnly {
        network: bool,
    },
    WorkspaceWrite {
        writable_roots: Vec<String>,
        network: bool,
    },
    DangerFullAccess,
    /// `externalSandbox`, a type this module does not know, or a known type in a shape it does
    /// not read: never what the bridge sent.
    Other(String),
}

/// The wire shapes of the sandboxes the bridge sends; any other shape is
/// [`ReportedSandbox::Other`] (a policy union codex may extend: read, never matched).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum WireSandbox {
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        #[serde(default = "network_unknown")]
        network_access: bool,
    },
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default = "network_unknown")]
        network_access: bool,
    },
    DangerFullAccess,
}

/// A sandbox that does not say whether it has network counts as one that has it (so it never
/// matches what the bridge sent).
fn network_unknown() -> bool {
    true
}

impl ReportedSandbox {
    fn from_value(v: &Value) -> Self {
        match WireSandbox::deserialize(v) {
            Ok(WireSandbox::ReadOnly { network_access }) => ReportedSandbox::ReadOnly {
                network: network_access,
            },
            Ok(WireSandbox::WorkspaceWrite {
                writable_roots,
                network_access,
            }) => ReportedSandbox::WorkspaceWrite {
                writable_roots,
                network: network_access,
            },
            Ok(WireSandbox::DangerFullAccess) => ReportedSandbox::DangerFullAccess,
            Err(_) => ReportedSandbox::Other(match v.get("type").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => v.to_string(),
            }),
        }
    }

    /// Whether this is exactly what [`sandbox_policy`] asks for at `level`.
    pub fn matches(&self, level: SandboxLevel) -> bool {
        match (self, level) {
            (ReportedSandbox::ReadOnly { network: false }, SandboxLevel::ReadOnly) => true,
            (
                ReportedSandbox::WorkspaceWrite {
                    writable_roots,
                    network: false,
                },
                SandboxLevel::WorkspaceWrite,
            ) => writable_roots.is_empty(),
            (ReportedSandbox::DangerFullAccess, SandboxLevel::DangerFullAccess) => true,
            _ => false,
        }
    }
}

/// The policy codex says a thread runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    pub sandbox: ReportedSandbox,
    /// `approvalPolicy` as a string (a `granular` object is kept as its JSON text).
    pub approval_policy: String,
    pub approvals_reviewer: String,
    pub cwd: String,
}

/// The policy keys of a thread result and of `threadSettings`, every one required; the sandbox
/// (`sandbox` there, `sandboxPolicy` here) is read by [`ReportedSandbox::from_value`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePolicy {
    #[serde(alias = "sandboxPolicy")]
    sandbox: Value,
    approval_policy: Value,
    approvals_reviewer: String,
    cwd: String,
}

impl From<WirePolicy> for EffectivePolicy {
    fn from(w: WirePolicy) -> Self {
        EffectivePolicy {
            sandbox: ReportedSandbox::from_value(&w.sandbox),
            approval_policy: match w.approval_policy {
                Value::String(s) => s,
                other => other.to_string(),
            },
            approvals_reviewer: w.approvals_reviewer,
            cwd: w.cwd,
        }
    }
}

impl EffectivePolicy {
    /// Compare with what the templates send: `level`, `never`, `user`, `cwd`
    /// ([`crate::codex::applied`]). The error names every difference.
    pub fn check(&self, level: SandboxLevel, cwd: &Path) -> Result<(), PolicyMismatch> {
        self.check_with(level, cwd, Approvals::Never)
    }
}

/// The policy a loaded thread runs with, as codex last reported it: the `thread/start` /
/// `thread/resume` result, then every `thread/settings/updated` of the thread (codex sends one,
/// before `turn/started`, whenever a `turn/start` changed a setting, and none otherwise). Check it
/// at each `turn/started` against what that `turn/start` sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyWatch {
    thread: ThreadId,
    current: EffectivePolicy,
}

impl PolicyWatch {
    /// Start from the policy of a `thread/start` / `thread/resume` result.
    pub fn new(opened: &ThreadOpened) -> Self {
        PolicyWatch {
            thread: opened.thread,
            current: opened.policy.clone(),
        }
    }

    /// Take in a notification (those of other threads and of other kinds change nothing).
    pub fn observe(&mut self, n: &Notification) {
        if let Notification::ThreadSettingsUpdated { thread_id, policy } = n
            && *thread_id == self.thread
        {
            self.current = policy.clone();
        }
    }

    /// The last reported policy.
    pub fn current(&self) -> &EffectivePolicy {
        &self.current
    }

    /// Whether it is what the turn's template sent.
    pub fn check(&self, level: SandboxLevel, cwd: &Path) -> Result<(), PolicyMismatch> {
        self.current.check(level, cwd)
    }
}

/// Codex reports a policy other than the one the bridge sent: the turn must not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("codex app-server reports a policy other than the one the bridge set: {0}")]
pub struct PolicyMismatch(pub String);

/// The `thread/start` / `thread/resume` / `thread/fork` result: the thread and its effective
/// policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "WireOpened")]
pub struct ThreadOpened {
    pub thread: ThreadId,
    pub policy: EffectivePolicy,
    /// `thread.path`: the rollout file (`None` for an ephemeral thread).
    pub path: Option<String>,
    /// How many turns the thread already holds (a resumed thread's history).
    pub turns: usize,
}

/// A thread as the bridge reads it: its id, its rollout and how many turns it holds.
#[derive(Deserialize)]
struct WireThread {
    id: ThreadId,
    path: Option<String>,
    turns: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct WireOpened {
    thread: WireThread,
    #[serde(flatten)]
    policy: WirePolicy,
}

/// A turn as the bridge reads it (`turn/start` result, `turn/started`, `turn/completed`).
#[derive(Deserialize)]
struct WireTurn {
    id: TurnRef,
    status: TurnStatus,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireError {
    message: String,
}

/// Read `v` as the shape `T` of `what`; a missing or mistyped field is an error that names it
/// (serde's message), never a default.
fn typed<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T, ProtocolError> {
    serde_json::from_value(v).map_err(|e| ProtocolError::Malformed(format!("`{what}`: {e}")))
}

fn typed_ref<'a, T: Deserialize<'a>>(what: &str, v: &'a Value) -> Result<T, ProtocolError> {
    T::deserialize(v).map_err(|e| ProtocolError::Malformed(format!("`{what}`: {e}")))
}

/// Read a `thread/start` / `thread/resume` / `thread/fork` result.
pub fn parse_thread_opened(result: &Value) -> Result<ThreadOpened, ProtocolError> {
    typed_ref("thread result", result)
}

impl From<WireOpened> for ThreadOpened {
    fn from(w: WireOpened) -> Self {
        ThreadOpened {
            thread: w.thread.id,
            policy: w.policy.into(),
            path: w.thread.path,
            turns: w.thread.turns.len(),
        }
    }
}

/// Read a `turn/start` result: the id of the turn it started.
pub fn parse_turn_started(result: &Value) -> Result<TurnRef, ProtocolError> {
    typed_ref::<StartedTurn>("turn/start result", result).map(|s| s.id)
}

// ---------------------------------------------------------------------------------------------
// Incoming

/// A request id of codex's (an integer from 0, or a string), echoed back verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RpcError {
    pub code: i64,
    /// Required: both versions always send it (`JSONRPCErrorError` requires `code` and
    /// `message` in the `generate-json-schema` of 0.145.0 and 0.171.0).
    pub message: String,
}

/// One line from codex.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of the bridge's requests.
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    Notification(Notification),
    /// A request codex sends the bridge; answer it at once with [`ServerRequest::decline`].
    Request(ServerRequest),
}

/// The state a turn ended in (a state of a later version reads as `Unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
    InProgress,
    #[serde(other)]
    Unknown,
}

/// The state of a command or file-change item: the bridge's own ([`ItemStatus`]), read from
/// the app-server's camel-case spelling.
pub use crate::codex::events::ItemStatus;

/// [`ItemStatus`] as the app-server spells it (a state of a later version reads as
/// `Unknown`; a missing one is an error).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum WireItemStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
    #[serde(other)]
    Unknown,
}

impl From<WireItemStatus> for ItemStatus {
    fn from(w: WireItemStatus) -> Self {
        match w {
            WireItemStatus::InProgress => ItemStatus::InProgress,
            WireItemStatus::Completed => ItemStatus::Completed,
            WireItemStatus::Failed => ItemStatus::Failed,
            WireItemStatus::Declined => ItemStatus::Declined,
            WireItemStatus::Unknown => ItemStatus::Unknown,
        }
    }
}

/// A thread item the bridge reports on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    AgentMessage {
        id: String,
        text: String,
    },
    CommandExecution {
        id: String,
        command: String,
        status: ItemStatus,
        exit_code: Option<i64>,
    },
    FileChange {
        id: String,
        status: ItemStatus,
        /// The paths changed.
        paths: Vec<String>,
    },
    /// Any other item type (user messages, reasoning, MCP calls, web searches, …).
    Other {
        kind: String,
        id: String,
    },
}

/// Every item's `type` and `id`.
#[derive(Deserialize)]
struct WireItemHead {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

/// The items the bridge reads, each field it reads required.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum WireItem {
    AgentMessage {
        id: String,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        id: String,
        command: String,
        status: WireItemStatus,
        exit_code: Option<i64>,
    },
    FileChange {
        id: String,
        status: WireItemStatus,
        changes: Vec<WirePath>,
    },
}

/// A file change's path (what it writes is read, for a person, by
/// [`super::approval::ChangeBook`]).
#[derive(Deserialize)]
struct WirePath {
    path: String,
}

impl Item {
    fn from_value(v: &Value) -> Result<Self, ProtocolError> {
        let head: WireItemHead = typed_ref("item", v)?;
        if !matches!(
            head.kind.as_str(),
            "agentMessage" | "commandExecution" | "fileChange"
        ) {
            return Ok(Item::Other {
                kind: head.kind,
                id: head.id,
            });
        }
        Ok(match typed_ref::<WireItem>("item", v)? {
            WireItem::AgentMessage { id, text } => Item::AgentMessage { id, text },
            WireItem::CommandExecution {
                id,
                command,
                status,
                exit_code,
            } => Item::CommandExecution {
                id,
                command,
                status: status.into(),
                exit_code,
            },
            WireItem::FileChange {
                id,
                status,
                changes,
            } => Item::FileChange {
                id,
                status: status.into(),
                paths: changes.into_iter().map(|c| c.path).collect(),
            },
        })
    }
}

/// Token counts of the last model call and of the whole thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct TokenUsage {
    #[serde(rename = "inputTokens")]
    pub input: u64,
    #[serde(rename = "cachedInputTokens")]
    pub cached_input: u64,
    #[serde(rename = "outputTokens")]
    pub output: u64,
    #[serde(rename = "reasoningOutputTokens")]
    pub reasoning_output: u64,
    #[serde(rename = "totalTokens")]
    pub total: u64,
}

/// A notification the bridge acts on; the rest are [`Notification::Other`].
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    ThreadStarted {
        thread_id: ThreadId,
    },
    /// A `turn/start` changed the thread's settings: the policy the next turns run with.
    ThreadSettingsUpdated {
        thread_id: ThreadId,
        policy: EffectivePolicy,
    },
    TurnStarted {
        thread_id: ThreadId,
        turn_id: TurnRef,
    },
    TurnCompleted {
        thread_id: ThreadId,
        turn_id: TurnRef,
        status: TurnStatus,
        error: Option<String>,
    },
    ItemStarted {
        thread_id: ThreadId,
        turn_id: TurnRef,
        item: Item,
    },
    ItemCompleted {
        thread_id: ThreadId,
        turn_id: TurnRef,
        item: Item,
    },
    TokenUsage {
        thread_id: ThreadId,
        turn_id: TurnRef,
        last: TokenUsage,
        total: TokenUsage,
    },
    /// A turn error (`willRetry`: codex retries by itself).
    Error {
        thread_id: ThreadId,
        turn_id: TurnRef,
        message: String,
        will_retry: bool,
    },
    Other {
        method: String,
    },
}

impl Notification {
    /// The thread and turn a notification of a turn belongs to (`None` for the others).
    pub fn turn(&self) -> Option<(&ThreadId, &TurnRef)> {
        match self {
            Notification::TurnStarted { thread_id, turn_id }
            | Notification::TurnCompleted {
                thread_id, turn_id, ..
            }
            | Notification::ItemStarted {
                thread_id, turn_id, ..
            }
            | Notification::ItemCompleted {
                thread_id, turn_id, ..
            }
            | Notification::TokenUsage {
                thread_id, turn_id, ..
            }
            | Notification::Error {
                thread_id, turn_id, ..
            } => Some((thread_id, turn_id)),
            Notification::ThreadStarted { .. }
            | Notification::ThreadSettingsUpdated { .. }
            | Notification::Other { .. } => None,
        }
    }
}

/// The params of the notifications the bridge reads, every field it reads required.
mod wire {
    use super::*;

    #[derive(Deserialize)]
    pub(super) struct ThreadStarted {
        pub(super) thread: ThreadHead,
    }

    #[derive(Deserialize)]
    pub(super) struct ThreadHead {
        pub(super) id: ThreadId,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct SettingsUpdated {
        pub(super) thread_id: ThreadId,
        pub(super) thread_settings: WirePolicy,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct OfTurn {
        pub(super) thread_id: ThreadId,
        pub(super) turn: WireTurn,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct OfItem {
        pub(super) thread_id: ThreadId,
        pub(super) turn_id: TurnRef,
        pub(super) item: Value,
    }

    #[derive(Deserialize)]
    pub(super) struct Usages {
        pub(super) last: TokenUsage,
        pub(super) total: TokenUsage,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct UsageUpdated {
        pub(super) thread_id: ThreadId,
        pub(super) turn_id: TurnRef,
        pub(super) token_usage: Usages,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct TurnError {
        pub(super) thread_id: ThreadId,
        pub(super) turn_id: TurnRef,
        pub(super) error: WireError,
        pub(super) will_retry: bool,
    }
}

fn notification(method: &str, p: Value) -> Result<Notification, ProtocolError> {
    Ok(match method {
        "thread/started" => Notification::ThreadStarted {
            thread_id: typed::<wire::ThreadStarted>(method, p)?.thread.id,
        },
        "thread/settings/updated" => {
            let w: wire::SettingsUpdated = typed(method, p)?;
            Notification::ThreadSettingsUpdated {
                thread_id: w.thread_id,
                policy: w.thread_settings.into(),
            }
        }
        "turn/started" => {
            let w: wire::OfTurn = typed(method, p)?;
            Notification::TurnStarted {
                thread_id: w.thread_id,
                turn_id: w.turn.id,
            }
        }
        "turn/completed" => {
            let w: wire::OfTurn = typed(method, p)?;
            Notification::TurnCompleted {
                thread_id: w.thread_id,
                turn_id: w.turn.id,
                status: w.turn.status,
                error: w.turn.error.map(|e| e.message),
            }
        }
        "item/started" | "item/completed" => {
            let w: wire::OfItem = typed(method, p)?;
            let (thread_id, turn_id) = (w.thread_id, w.turn_id);
            let item = Item::from_value(&w.item)
                .map_err(|e| ProtocolError::Malformed(format!("`{method}`: {e}")))?;
            if method == "item/started" {
                Notification::ItemStarted {
                    thread_id,
                    turn_id,
                    item,
                }
            } else {
                Notification::ItemCompleted {
                    thread_id,
                    turn_id,
                    item,
                }
            }
        }
        "thread/tokenUsage/updated" => {
            let w: wire::UsageUpdated = typed(method, p)?;
            Notification::TokenUsage {
                thread_id: w.thread_id,
                turn_id: w.turn_id,
                last: w.token_usage.last,
                total: w.token_usage.total,
            }
        }
        "error" => {
            let w: wire::TurnError = typed(method, p)?;
            Notification::Error {
                thread_id: w.thread_id,
                turn_id: w.turn_id,
                message: w.error.message,
                will_retry: w.will_retry,
            }
        }
        other => Notification::Other {
            method: other.to_owned(),
        },
    })
}

/// What codex asks the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKind {
    /// `item/commandExecution/requestApproval`: run a command outside the sandbox.
    CommandApproval,
    /// `item/fileChange/requestApproval`.
    FileChangeApproval,
    /// `item/permissions/requestApproval`: grant extra filesystem or network permissions.
    PermissionsApproval,
    /// `item/tool/requestUserInput`.
    UserInput,
    /// `mcpServer/elicitation/request`: a nested MCP server asks for input.
    Elicitation,
    /// `item/tool/call`: a client-side (dynamic) tool; the bridge registers none.
    DynamicToolCall,
    /// The v1 `execCommandApproval`.
    LegacyExecApproval,
    /// The v1 `applyPatchApproval`.
    LegacyPatchApproval,
    /// Anything else (token refresh, attestation, methods of future versions).
    Unknown(String),
}

/// Where a request of codex's belongs: the thread, turn and item it names (each `None` when
/// it names none), read typed; or why they could not be read (such a request is never asked
/// of a person, and is declined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub thread_id: Option<ThreadId>,
    pub turn_id: Option<TurnRef>,
    pub item_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireHead {
    #[serde(alias = "conversationId")]
    thread_id: Option<ThreadId>,
    turn_id: Option<TurnRef>,
    item_id: Option<String>,
}

/// A request from codex, with the id its answer must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequest {
    pub id: RequestId,
    pub method: String,
    pub kind: RequestKind,
    /// The thread, turn and item it names, or why they cannot be read.
    pub head: Result<RequestHead, String>,
    /// The params as codex sent them (read typed by [`ServerRequest::question_params`]).
    pub params: Value,
}

/// The JSON-RPC error code of the answer to a request the bridge does not serve.
pub const UNSUPPORTED_REQUEST_CODE: i64 = -32601;

impl ServerRequest {
    fn new(id: RequestId, method: &str, p: Value) -> Self {
        let kind = match method {
            "item/commandExecution/requestApproval" => RequestKind::CommandApproval,
            "item/fileChange/requestApproval" => RequestKind::FileChangeApproval,
            "item/permissions/requestApproval" => RequestKind::PermissionsApproval,
            "item/tool/requestUserInput" => RequestKind::UserInput,
            "mcpServer/elicitation/request" => RequestKind::Elicitation,
            "item/tool/call" => RequestKind::DynamicToolCall,
            "execCommandApproval" => RequestKind::LegacyExecApproval,
            "applyPatchApproval" => RequestKind::LegacyPatchApproval,
            other => RequestKind::Unknown(other.to_owned()),
        };
        let head = match &p {
            Value::Null => Ok(RequestHead {
                thread_id: None,
                turn_id: None,
                item_id: None,
            }),
            v => WireHead::deserialize(v)
                .map(|w| RequestHead {
                    thread_id: w.thread_id,
                    turn_id: w.turn_id,
                    item_id: w.item_id,
                })
                .map_err(|e| e.to_string()),
        };
        ServerRequest {
            id,
            method: method.to_owned(),
            kind,
            head,
            params: p,
        }
    }

    /// The thread the request names, when it names one that could be read.
    pub fn thread_id(&self) -> Option<&ThreadId> {
        self.head.as_ref().ok().and_then(|h| h.thread_id.as_ref())
    }

    /// Whether the request belongs to turn `turn` of `thread`: its head was read, and each of
    /// the thread and turn it names (codex may name neither) is that one.
    pub fn is_of(&self, thread: &ThreadId, turn: &TurnRef) -> bool {
        self.head.as_ref().is_ok_and(|h| {
            h.thread_id.as_ref().is_none_or(|t| t == thread)
                && h.turn_id.as_ref().is_none_or(|t| t == turn)
        })
    }

    /// The refusal of this request, as a JSON line: never an approval, never input.
    ///
    /// - command / file-change approvals: `decline` (the item ends `declined`, the turn goes on);
    /// - permissions: an empty grant, scoped to the turn;
    /// - user input: no answers; elicitation: `decline`; dynamic tool: a failed call;
    /// - v1 approvals: `denied`;
    /// - anything else: a JSON-RPC error.
    pub fn decline(&self) -> String {
        let result = match &self.kind {
            RequestKind::CommandApproval | RequestKind::FileChangeApproval => {
                AnswerResult::Approval {
                    decision: ApprovalDecision::Decline,
                }
            }
            RequestKind::PermissionsApproval => AnswerResult::Permissions {
                permissions: RequestedPermissions::default(),
                scope: GrantScope::Turn,
            },
            RequestKind::UserInput => AnswerResult::UserInput {
                answers: BTreeMap::new(),
            },
            RequestKind::Elicitation => AnswerResult::Elicitation {
                action: ElicitationAction::Decline,
                content: None,
            },
            RequestKind::DynamicToolCall => AnswerResult::DynamicTool {
                content_items: [],
                success: false,
            },
            RequestKind::LegacyExecApproval | RequestKind::LegacyPatchApproval => {
                AnswerResult::Legacy {
                    decision: LegacyDecision::Denied,
                }
            }
            RequestKind::Unknown(method) => {
                return reply_line(&ErrorReply {
                    id: &self.id,
                    error: ErrorBody {
                        code: UNSUPPORTED_REQUEST_CODE,
                        message: format!("codex-mcp-bridge does not serve `{method}`"),
                    },
                });
            }
        };
        self.reply(result)
    }
}

impl ServerRequest {
    /// The params of a request a person may be asked, read typed by its method: `Ok(None)` for
    /// the other kinds; a missing or mistyped field is an error (such a request is declined,
    /// never asked with blanks).
    pub fn question_params(&self) -> Result<Option<QuestionParams>, ProtocolError> {
        let (what, p) = (self.method.as_str(), &self.params);
        Ok(Some(match self.kind {
            RequestKind::CommandApproval => QuestionParams::Command(typed_ref(what, p)?),
            RequestKind::FileChangeApproval => QuestionParams::FileChange(typed_ref(what, p)?),
            RequestKind::PermissionsApproval => QuestionParams::Permissions(typed_ref(what, p)?),
            RequestKind::UserInput => QuestionParams::UserInput(typed_ref(what, p)?),
            RequestKind::Elicitation => QuestionParams::Elicitation(typed_ref(what, p)?),
            RequestKind::DynamicToolCall
            | RequestKind::LegacyExecApproval
            | RequestKind::LegacyPatchApproval
            | RequestKind::Unknown(_) => return Ok(None),
        }))
    }

    fn reply(&self, result: AnswerResult) -> String {
        reply_line(&Reply {
            id: &self.id,
            result,
        })
    }

    /// The accept of a command or file-change approval, this once (`decision: "accept"`);
    /// `None` for any other kind.
    pub fn accept_once(&self) -> Option<String> {
        matches!(
            self.kind,
            RequestKind::CommandApproval | RequestKind::FileChangeApproval
        )
        .then(|| {
            self.reply(AnswerResult::Approval {
                decision: ApprovalDecision::Accept,
            })
        })
    }

    /// The grant of what a permissions approval asks (read again from its params, echoed as it
    /// came), for this turn only; `None` for another kind or params that cannot be read.
    pub fn grant_for_turn(&self) -> Option<String> {
        let Ok(Some(QuestionParams::Permissions(p))) = self.question_params() else {
            return None;
        };
        Some(self.reply(AnswerResult::Permissions {
            permissions: p.permissions,
            scope: GrantScope::Turn,
        }))
    }

    /// The answers of a user-input request, one text per question id; `None` for another kind
    /// or no answer.
    pub fn answer_input(&self, answers: BTreeMap<String, String>) -> Option<String> {
        if self.kind != RequestKind::UserInput || answers.is_empty() {
            return None;
        }
        let answers = answers
            .into_iter()
            .map(|(id, a)| (id, InputAnswer { answers: [a] }))
            .collect();
        Some(self.reply(AnswerResult::UserInput { answers }))
    }

    /// The accept of a nested server's form (`form` mode only) with `content` of primitive
    /// values; `None` otherwise.
    pub fn accept_form(&self, content: Map<String, Value>) -> Option<String> {
        let Ok(Some(QuestionParams::Elicitation(p))) = self.question_params() else {
            return None;
        };
        let primitive = content
            .values()
            .all(|v| v.is_string() || v.is_number() || v.is_boolean());
        (matches!(p.request, ElicitationRequest::Form { .. }) && primitive).then(|| {
            self.reply(AnswerResult::Elicitation {
                action: ElicitationAction::Accept,
                content: Some(content),
            })
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Codex's requests a person may answer: their params, typed

/// `kind` of a command approval (0.171.0; absent on 0.145.0, which means `command`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommandKind {
    Command,
    /// Input to a running terminal.
    WriteStdin,
    /// A managed checkpoint (needs a capability the bridge does not declare).
    HumanCommand,
}

impl CommandKind {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            CommandKind::Command => "command",
            CommandKind::WriteStdin => "writeStdin",
            CommandKind::HumanCommand => "humanCommand",
        }
    }
}

/// `networkApprovalContext` of a command approval: the host codex asks to reach.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NetworkApprovalContext {
    pub host: String,
}

/// The params of `item/commandExecution/requestApproval` that a person is shown (the thread,
/// turn and item are the request's [`RequestHead`]; `availableDecisions`, amendments and
/// parsed actions are never offered). Every field is optional or nullable on both versions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandApprovalParams {
    #[serde(default)]
    pub kind: Option<CommandKind>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub network_approval_context: Option<NetworkApprovalContext>,
    /// Extra permissions riding on an accept (experimental API); read only to refuse them.
    #[serde(default)]
    pub additional_permissions: Option<Map<String, Value>>,
}

/// The params of `item/fileChange/requestApproval` (the files come from the item codex
/// announced, [`super::approval::ChangeBook`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeApprovalParams {
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub grant_root: Option<String>,
}

/// One `fileSystem.entries` entry: an access mode and a path (codex's `FileSystemPath`, a
/// tagged object, kept as it came: shown as its JSON, echoed verbatim).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PermissionEntry {
    pub access: String,
    pub path: Value,
}

/// `permissions.fileSystem`: every key codex knows on both versions but `globScanMaxDepth`
/// (which the form does not show: any key in `other` makes the request unshowable).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct FileSystemPermissions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<PermissionEntry>>,
    #[serde(flatten, skip_serializing)]
    pub other: Map<String, Value>,
}

/// `permissions.network`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct NetworkPermissions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(flatten, skip_serializing)]
    pub other: Map<String, Value>,
}

/// `permissions` of a permissions approval (`RequestPermissionProfile`): what an accept grants,
/// echoed back as it came (for the turn only); the default is the empty grant of a decline.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestedPermissions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system: Option<FileSystemPermissions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkPermissions>,
    #[serde(flatten, skip_serializing)]
    pub other: Map<String, Value>,
}

impl RequestedPermissions {
    /// Whether it holds a key the form does not show (at any level).
    pub fn has_unknown_keys(&self) -> bool {
        !self.other.is_empty()
            || self
                .file_system
                .as_ref()
                .is_some_and(|f| !f.other.is_empty())
            || self.network.as_ref().is_some_and(|n| !n.other.is_empty())
    }
}

/// The params of `item/permissions/requestApproval` (`cwd` and `permissions` required on both
/// versions).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsApprovalParams {
    pub cwd: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub permissions: RequestedPermissions,
}

/// One offered option of a user-input question (its `description` is not shown).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InputOption {
    pub label: String,
}

/// One question of `item/tool/requestUserInput` (`isOther` / `isSecret` default to `false` in
/// codex's own protocol).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireInputQuestion {
    pub id: String,
    pub header: String,
    pub question: String,
    #[serde(default)]
    pub options: Option<Vec<InputOption>>,
    #[serde(default)]
    pub is_other: bool,
    #[serde(default)]
    pub is_secret: bool,
}

/// The params of `item/tool/requestUserInput`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UserInputParams {
    pub questions: Vec<WireInputQuestion>,
}

/// What a nested MCP server asks, by `mode` (0.171.0's `openai/userVerification`, a device
/// proof, is none of these: not read, so declined).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "mode")]
pub enum ElicitationRequest {
    /// A form with a JSON schema.
    #[serde(rename = "form", rename_all = "camelCase")]
    Form {
        message: String,
        requested_schema: Map<String, Value>,
    },
    /// An OpenAI form (its schema is not one the bridge fills in).
    #[serde(rename = "openai/form", alias = "openaiForm")]
    OpenaiForm { message: String },
    /// A link to open.
    #[serde(rename = "url")]
    Url { message: String, url: String },
}

impl ElicitationRequest {
    /// The server's message.
    pub fn message(&self) -> &str {
        match self {
            ElicitationRequest::Form { message, .. }
            | ElicitationRequest::OpenaiForm { message }
            | ElicitationRequest::Url { message, .. } => message,
        }
    }
}

/// The params of `mcpServer/elicitation/request`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationParams {
    pub server_name: String,
    #[serde(flatten)]
    pub request: ElicitationRequest,
}

/// One change of a `fileChange` item, every field required: what it writes is shown whole to a
/// person ([`super::approval::ChangeBook`]), or the change is not asked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AnnouncedChange {
    pub path: String,
    pub kind: AnnouncedKind,
    pub diff: String,
}

/// `kind` of a change: `add`, `delete`, or `update` (with `move_path` when it moves).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AnnouncedKind {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub move_path: Option<String>,
}

/// A `fileChange` item of an `item/started` or `item/completed` line.
#[derive(Debug, Clone, PartialEq)]
pub struct FileChangeItem {
    pub id: String,
    /// `item/completed`: the change is done, no approval names it any more.
    pub completed: bool,
    /// Each change, read typed (`Err`: one that is not a change as codex announces it);
    /// `None` when the item has no list of changes.
    pub changes: Option<Vec<Result<AnnouncedChange, String>>>,
}

/// Read `line` as a `fileChange` item of `item/started` / `item/completed`: `None` for any other
/// line, or an item without its id.
pub fn file_change_item(line: &str) -> Option<FileChangeItem> {
    #[derive(Deserialize)]
    struct Line {
        method: String,
        params: Params,
    }
    #[derive(Deserialize)]
    struct Params {
        item: Item,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(rename = "type")]
        kind: String,
        id: String,
        #[serde(default)]
        changes: Option<Vec<Value>>,
    }
    let l: Line = serde_json::from_str(line).ok()?;
    let completed = match l.method.as_str() {
        "item/started" => false,
        "item/completed" => true,
        _ => return None,
    };
    (l.params.item.kind == "fileChange").then(|| FileChangeItem {
        id: l.params.item.id,
        completed,
        changes: l.params.item.changes.map(|c| {
            c.iter()
                .map(|c| AnnouncedChange::deserialize(c).map_err(|e| e.to_string()))
                .collect()
        }),
    })
}

/// The params of a request a person may be asked, read typed by its method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionParams {
    Command(CommandApprovalParams),
    FileChange(FileChangeApprovalParams),
    Permissions(PermissionsApprovalParams),
    UserInput(UserInputParams),
    Elicitation(ElicitationParams),
}

// ---------------------------------------------------------------------------------------------
// Answers to codex's requests: the only shapes the bridge can write

/// `decision` of a command or file-change approval: accept this once, or decline. No other
/// decision (`acceptForSession`, `acceptWithExecpolicyAmendment`, `cancel`, …) exists here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum ApprovalDecision {
    Accept,
    Decline,
}

/// `scope` of a permissions grant: this turn only, never `session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum GrantScope {
    Turn,
}

/// `action` of an elicitation's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum ElicitationAction {
    Accept,
    Decline,
}

/// `decision` of the v1 approvals: refused, always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
enum LegacyDecision {
    Denied,
}

/// One answer of a user-input question: one text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct InputAnswer {
    answers: [String; 1],
}

/// The `result` of an answer, one shape per kind of request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
enum AnswerResult {
    Approval {
        decision: ApprovalDecision,
    },
    /// What was asked (an accept) or nothing, `{}` (a decline).
    Permissions {
        permissions: RequestedPermissions,
        scope: GrantScope,
    },
    UserInput {
        answers: BTreeMap<String, InputAnswer>,
    },
    Elicitation {
        action: ElicitationAction,
        content: Option<Map<String, Value>>,
    },
    #[serde(rename_all = "camelCase")]
    DynamicTool {
        content_items: [Value; 0],
        success: bool,
    },
    Legacy {
        decision: LegacyDecision,
    },
}

/// An answer line: the request's id and its result, or a JSON-RPC error.
#[derive(Serialize)]
struct Reply<'a> {
    id: &'a RequestId,
    result: AnswerResult,
}

#[derive(Serialize)]
struct ErrorReply<'a> {
    id: &'a RequestId,
    error: ErrorBody,
}

#[derive(Serialize)]
struct ErrorBody {
    code: i64,
    message: String,
}

/// The line of a reply.
fn reply_line(r: &impl Serialize) -> String {
    // these shapes are plain fields and string-keyed maps: serializing them cannot fail
    serde_json::to_string(r).expect("an answer serializes")
}

/// Parse one line from codex: a response, a notification (those the bridge reads typed, a
/// missing or mistyped field an error) or a request (always answerable: its id and method are
/// read first).
pub fn parse_line(line: &str) -> Result<Incoming, ProtocolError> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let Value::Object(mut m) = v else {
        return Err(ProtocolError::Malformed("not an object".into()));
    };
    let id = match m.get("id") {
        None | Some(Value::Null) => None,
        Some(raw) => Some(RequestId::deserialize(raw).map_err(|_| {
            ProtocolError::Malformed("`id` is neither a number nor a string".into())
        })?),
    };
    let params = m.remove("params").unwrap_or(Value::Null);
    let method = match m.get("method") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ProtocolError::Malformed("`method` is not a string".into())),
    };
    match (id, method) {
        (Some(id), Some(method)) => Ok(Incoming::Request(ServerRequest::new(id, method, params))),
        (None, Some(method)) => Ok(Incoming::Notification(notification(method, params)?)),
        (Some(id), None) => {
            let result = match (m.remove("result"), m.get("error")) {
                (_, Some(e)) => Err(RpcError::deserialize(e).map_err(|_| {
                    ProtocolError::Malformed("`error` is not a JSON-RPC error".into())
                })?),
                (Some(r), None) => Ok(r),
                (None, None) => {
                    return Err(ProtocolError::Malformed(
                        "a response without `result` or `error`".into(),
                    ));
                }
            };
            Ok(Incoming::Response { id, result })
        }
        (None, None) => Err(ProtocolError::Malformed("no `id` and no `method`".into())),
    }
}

// ---------------------------------------------------------------------------------------------
// One-shot calls (`query`, `search`, `structured`) on a warm process

/// `turn/start` of a one-shot call: [`turn_start_with`] plus, for `structured`, the caller's
/// JSON Schema as `outputSchema` (both versions: it constrains this turn's final message only).
pub fn turn_start_with_schema(
    t: &TurnParams<'_>,
    approvals: Approvals,
    schema: Option<&Value>,
) -> Result<TurnStart, ProtocolError> {
    let mut o = turn_start_with(t, approvals)?;
    if let Some(schema) = schema {
        if !schema.is_object() {
            return Err(invalid("outputSchema", "must be a JSON object"));
        }
        o.output_schema = Some(schema.clone());
    }
    Ok(o)
}

/// The params of `thread/unsubscribe` ([`thread_unsubscribe`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribe {
    thread_id: String,
}

/// `status` of the `thread/unsubscribe` result (a status of a later version reads as
/// `Unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnsubscribeStatus {
    Unsubscribed,
    NotLoaded,
    NotSubscribed,
    #[serde(other)]
    Unknown,
}

/// The `thread/unsubscribe` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Unsubscribed {
    pub status: UnsubscribeStatus,
}

impl Unsubscribed {
    /// Whether the thread is no longer loaded (`unsubscribed`, or `notLoaded`).
    /// `notSubscribed` (another client holds it) and anything else is `false`.
    pub fn unloaded(&self) -> bool {
        matches!(
            self.status,
            UnsubscribeStatus::Unsubscribed | UnsubscribeStatus::NotLoaded
        )
    }
}

message!(ThreadUnsubscribe, Method::ThreadUnsubscribe, Unsubscribed);

/// `thread/unsubscribe`: the process unloads `thread` (an ephemeral thread, never written to
/// disk, is gone with it).
pub fn thread_unsubscribe(thread: &ThreadId) -> ThreadUnsubscribe {
    ThreadUnsubscribe {
        thread_id: thread.to_arg(),
    }
}

/// Read a `thread/unsubscribe` result: [`Unsubscribed::unloaded`].
pub fn parse_unsubscribed(result: &Value) -> Result<bool, ProtocolError> {
    typed_ref::<Unsubscribed>("thread/unsubscribe result", result).map(|u| u.unloaded())
}

// ---------------------------------------------------------------------------------------------
// A person in the loop: fork, steer, and turns that may ask

/// `thread/fork` of a stored thread: a new, stored thread that starts with a copy of its
/// history. The fixed thread-level template of `thread/start` (`cwd`, `sandbox: "read-only"`,
/// `approvalPolicy: "never"`, `approvalsReviewer: "user"`, never `config`); the fork's turns
/// carry their own sandbox like any turn. Its result is a [`ThreadOpened`] (the same shape on
/// 0.145.0 and 0.171.0). Give the thread's own `model`: a fork to another model hands the
/// history over as a summary, which costs a model call (measured on both versions).
pub fn thread_fork(
    thread: &ThreadId,
    cwd: &Path,
    model: Option<&str>,
) -> Result<ThreadFork, ProtocolError> {
    Ok(ThreadFork {
        thread_id: thread.to_arg(),
        keys: thread_keys(cwd, model)?,
    })
}

/// The params of `turn/steer` ([`turn_steer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteer {
    thread_id: String,
    expected_turn_id: String,
    input: [UserInput; 1],
}

/// The `turn/steer` result: the turn the input joined.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Steered {
    pub turn_id: TurnRef,
}

message!(TurnSteer, Method::TurnSteer, Steered);

/// `turn/steer`: `text` joins the running turn `turn` of `thread` (codex refuses it when that
/// turn is not the one running). Nothing else: no sandbox, policy or cwd travels with a steer.
pub fn turn_steer(
    thread: &ThreadId,
    turn: &TurnRef,
    text: &Prompt,
) -> Result<TurnSteer, ProtocolError> {
    Ok(TurnSteer {
        thread_id: thread.to_arg(),
        expected_turn_id: turn.as_str().to_owned(),
        input: text_input(text),
    })
}

/// Read a `turn/steer` result: the turn the input joined.
pub fn parse_steered(result: &Value) -> Result<TurnRef, ProtocolError> {
    typed_ref::<Steered>("turn/steer result", result).map(|s| s.turn_id)
}

/// The approval policy a turn is sent with. `Never` is the default; `OnRequest` lets codex ask
/// the client (only for the `approvals = ask` setting, with an answerer that a person stands
/// behind). The reviewer stays `user` either way: no model approves an escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Approvals {
    #[default]
    #[serde(rename = "never")]
    Never,
    #[serde(rename = "on-request")]
    OnRequest,
}

impl Approvals {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Approvals::Never => "never",
            Approvals::OnRequest => "on-request",
        }
    }
}

/// [`turn_start`] with the approval policy `approvals` (every other key as there).
pub fn turn_start_with(
    t: &TurnParams<'_>,
    approvals: Approvals,
) -> Result<TurnStart, ProtocolError> {
    Ok(TurnStart {
        approval_policy: approvals,
        ..turn_start(t)?
    })
}

impl EffectivePolicy {
    /// [`EffectivePolicy::check`] for a turn sent with `approvals`.
    pub fn check_with(
        &self,
        level: SandboxLevel,
        cwd: &Path,
        approvals: Approvals,
    ) -> Result<(), PolicyMismatch> {
        use crate::codex::applied::{Applied, ApprovalsAsked, Asked, differences};
        let asked = Asked {
            sandbox: level,
            approvals: match approvals {
                Approvals::Never => ApprovalsAsked::Never,
                Approvals::OnRequest => ApprovalsAsked::OnRequest,
            },
            cwd: Some(cwd),
        };
        let sandbox = format!("{:?}", self.sandbox);
        let applied = Applied {
            sandbox_matches: self.sandbox.matches(level),
            sandbox: &sandbox,
            approval_policy: &self.approval_policy,
            approvals_reviewer: &self.approvals_reviewer,
            cwd: Some(&self.cwd),
        };
        let diffs = differences(&asked, &applied);
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(PolicyMismatch(diffs.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const THREAD: &str = "01a22759-e393-7f71-bea4-35a12106bc11";
    const TURN: &str = "01a22753-3cfc-7740-b25a-145bedef01df";

    fn thread() -> ThreadId {
        ThreadId::parse(THREAD).unwrap()
    }

    fn turn() -> TurnRef {
        TurnRef::parse(TURN).unwrap()
    }

    /// A measured line with its thread and turn ids (`"T"`, `"U"`) as the UUIDs codex prints.
    fn with_ids(line: &str) -> String {
        line.replace("\"T\"", &format!("\"{THREAD}\""))
            .replace("\"U\"", &format!("\"{TURN}\""))
    }

    fn text(s: &str) -> Prompt {
        Prompt::parse("prompt", s.into()).unwrap()
    }

    fn policy_of(v: &Value) -> EffectivePolicy {
        WirePolicy::deserialize(v).unwrap().into()
    }

    fn keys(o: &impl Message) -> BTreeSet<String> {
        o.params()
            .as_ref()
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn line(o: &impl Message, id: i64) -> Value {
        serde_json::from_str(&o.to_line(id).unwrap()).unwrap()
    }

    #[test]
    fn initialize_is_the_measured_handshake_with_the_experimental_api() {
        assert_eq!(
            line(&initialize("0.1.0"), 1),
            json!({"method": "initialize", "id": 1, "params": {
                "clientInfo": {"name": "codex_mcp_bridge", "title": "codex-mcp-bridge", "version": "0.1.0"},
                "capabilities": {"experimentalApi": true}}})
        );
        // a notification: no id, no params
        assert_eq!(line(&initialized(), 7), json!({"method": "initialized"}));
    }

    #[test]
    fn thread_templates_never_carry_config_or_a_writable_sandbox() {
        let cwd = Path::new("/w/repo");
        let start = thread_start(cwd, Some("gpt-5.5"), false).unwrap();
        assert_eq!(
            line(&start, 2),
            json!({"method": "thread/start", "id": 2, "params": {
                "cwd": "/w/repo", "sandbox": "read-only", "approvalPolicy": "never",
                "approvalsReviewer": "user", "model": "gpt-5.5"}})
        );
        let resume = thread_resume(&thread(), cwd, None).unwrap();
        assert_eq!(
            keys(&resume),
            [
                "approvalPolicy",
                "approvalsReviewer",
                "cwd",
                "sandbox",
                "threadId"
            ]
            .map(String::from)
            .into()
        );
        let eph = thread_start(cwd, None, true).unwrap();
        assert_eq!(eph.params().unwrap()["ephemeral"], json!(true));
        for p in [start.params(), resume.params(), eph.params()] {
            let p = p.unwrap();
            assert!(p.get("config").is_none());
            assert_eq!(p["sandbox"], "read-only");
        }
    }

    #[test]
    fn every_turn_carries_its_sandbox_approval_reviewer_and_cwd() {
        let t = thread();
        let base = TurnParams {
            thread: &t,
            prompt: &text("-cmcp_servers={evil={command=\"touch\"}}"),
            sandbox: None,
            cwd: Path::new("/w/repo"),
            model: None,
            effort: None,
        };
        let o = turn_start(&base).unwrap();
        assert_eq!(
            line(&o, 22),
            json!({"method": "turn/start", "id": 22, "params": {
                "threadId": THREAD,
                "input": [{"type": "text", "text": "-cmcp_servers={evil={command=\"touch\"}}"}],
                "sandboxPolicy": {"type": "readOnly"}, "approvalPolicy": "never",
                "approvalsReviewer": "user", "cwd": "/w/repo"}})
        );
        for (level, want) in [
            (SandboxLevel::ReadOnly, json!({"type": "readOnly"})),
            (
                SandboxLevel::WorkspaceWrite,
                json!({"type": "workspaceWrite", "writableRoots": [], "networkAccess": false}),
            ),
            (
                SandboxLevel::DangerFullAccess,
                json!({"type": "dangerFullAccess"}),
            ),
        ] {
            let o = turn_start(&TurnParams {
                sandbox: Some(level),
                model: Some("m"),
                effort: Some(ReasoningEffort::High),
                ..base.clone()
            })
            .unwrap();
            let p = o.params().unwrap();
            assert_eq!(p["sandboxPolicy"], want);
            assert_eq!(
                (p["model"].as_str(), p["effort"].as_str()),
                (Some("m"), Some("high"))
            );
            for k in ["approvalPolicy", "approvalsReviewer", "cwd"] {
                assert!(p.get(k).is_some(), "{k}");
            }
        }
    }

    #[test]
    fn bad_values_are_refused_with_their_field() {
        let t = thread();
        let turn = |prompt: &str, cwd, model| {
            turn_start(&TurnParams {
                thread: &t,
                prompt: &text(prompt),
                sandbox: None,
                cwd: Path::new(cwd),
                model,
                effort: None,
            })
        };
        fn field<M: std::fmt::Debug>(r: Result<M, ProtocolError>) -> &'static str {
            match r {
                Err(ProtocolError::Invalid { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        }
        // an empty prompt is no `Prompt`: none reaches a template
        assert_eq!(
            Prompt::parse("prompt", " \n".into()).unwrap_err().field,
            "prompt"
        );
        assert_eq!(field(turn("x", "relative", None)), "cwd");
        assert_eq!(field(turn("x", "/w", Some(""))), "model");
        assert_eq!(field(turn("x", "/w", Some("a\nb"))), "model");
        assert_eq!(field(thread_start(Path::new("w"), None, false)), "cwd");
        for bad in [
            "",
            "x",
            "01a22759-e393-7f71-bea4-35a12106bc1",
            "01a22759/e393-7f71-bea4-35a12106bc11",
        ] {
            assert!(ThreadId::parse(bad).is_err(), "{bad}");
            assert!(TurnRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_whitelisted_methods_can_be_built() {
        let t = thread();
        let turn = TurnRef::parse(TURN).unwrap();
        let all = [
            initialize("v").method(),
            initialized().method(),
            thread_start(Path::new("/w"), None, false).unwrap().method(),
            thread_resume(&t, Path::new("/w"), None).unwrap().method(),
            turn_start(&TurnParams {
                thread: &t,
                prompt: &text("x"),
                sandbox: None,
                cwd: Path::new("/w"),
                model: None,
                effort: None,
            })
            .unwrap()
            .method(),
            turn_interrupt(&t, &turn).method(),
            clean_background_terminals(&t).method(),
        ];
        let methods: Vec<&str> = all.iter().map(|m| m.as_str()).collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "initialized",
                "thread/start",
                "thread/resume",
                "turn/start",
                "turn/interrupt",
                "thread/backgroundTerminals/clean"
            ]
        );
        assert_eq!(
            line(&turn_interrupt(&t, &turn), 4),
            json!({"method": "turn/interrupt", "id": 4, "params": {"threadId": THREAD, "turnId": TURN}})
        );
    }

    #[test]
    fn a_one_shot_adds_only_its_schema_and_unsubscribe_carries_only_the_thread() {
        let t = thread();
        let params = TurnParams {
            thread: &t,
            prompt: &text("x"),
            sandbox: None,
            cwd: Path::new("/w"),
            model: None,
            effort: None,
        };
        let plain = turn_start_with(&params, Approvals::Never).unwrap();
        let schema = json!({"type": "object"});
        let with = turn_start_with_schema(&params, Approvals::Never, Some(&schema)).unwrap();
        let mut expected = keys(&plain);
        expected.insert("outputSchema".into());
        assert_eq!(keys(&with), expected);
        assert_eq!(with.params().unwrap()["outputSchema"], schema);
        assert_eq!(
            turn_start_with_schema(&params, Approvals::Never, None).unwrap(),
            plain
        );
        assert!(matches!(
            turn_start_with_schema(&params, Approvals::Never, Some(&json!("x"))),
            Err(ProtocolError::Invalid {
                field: "outputSchema",
                ..
            })
        ));
        let un = thread_unsubscribe(&t);
        assert_eq!(
            line(&un, 7),
            json!({"method": "thread/unsubscribe", "id": 7, "params": {"threadId": THREAD}})
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "unsubscribed"})),
            Ok(true)
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "notLoaded"})),
            Ok(true)
        );
        assert_eq!(
            parse_unsubscribed(&json!({"status": "notSubscribed"})),
            Ok(false)
        );
        assert!(parse_unsubscribed(&json!({})).is_err());
    }

    #[test]
    fn fork_and_steer_are_fixed_templates_and_a_turn_may_ask_only_on_request() {
        let t = thread();
        let turn = TurnRef::parse(TURN).unwrap();
        let fork = thread_fork(&t, Path::new("/w"), None).unwrap();
        assert_eq!(
            line(&fork, 5),
            json!({"method": "thread/fork", "id": 5, "params": {"threadId": THREAD, "cwd": "/w",
                "sandbox": "read-only", "approvalPolicy": "never", "approvalsReviewer": "user"}})
        );
        let steer = turn_steer(&t, &turn, &text("also check b")).unwrap();
        assert_eq!(
            line(&steer, 6),
            json!({"method": "turn/steer", "id": 6, "params": {"threadId": THREAD,
                "expectedTurnId": TURN, "input": [{"type": "text", "text": "also check b"}]}})
        );
        assert!(Prompt::parse("prompt", " ".into()).is_err());
        assert_eq!(parse_steered(&json!({"turnId": TURN})).unwrap(), turn);
        let base = TurnParams {
            thread: &t,
            prompt: &text("x"),
            sandbox: None,
            cwd: Path::new("/w"),
            model: None,
            effort: None,
        };
        let asking = turn_start_with(&base, Approvals::OnRequest).unwrap();
        let mut plain = turn_start(&base).unwrap().params().unwrap().clone();
        plain["approvalPolicy"] = json!("on-request");
        assert_eq!(asking.params().unwrap(), plain);
        assert_eq!(
            turn_start_with(&base, Approvals::Never).unwrap(),
            turn_start(&base).unwrap()
        );
        let policy = EffectivePolicy {
            sandbox: ReportedSandbox::ReadOnly { network: false },
            approval_policy: "on-request".into(),
            approvals_reviewer: "user".into(),
            cwd: "/w".into(),
        };
        let ro = SandboxLevel::ReadOnly;
        assert_eq!(
            policy.check_with(ro, Path::new("/w"), Approvals::OnRequest),
            Ok(())
        );
        assert!(
            policy
                .check_with(ro, Path::new("/w"), Approvals::Never)
                .is_err()
        );
        assert!(policy.check(ro, Path::new("/w")).is_err());
        let reviewer = EffectivePolicy {
            approvals_reviewer: "auto_review".into(),
            ..policy
        };
        let err = reviewer
            .check_with(ro, Path::new("/w"), Approvals::OnRequest)
            .unwrap_err()
            .0;
        assert!(err.contains("reviewer"), "{err}");
    }

    /// Each typed template writes the params the `json!` templates wrote before them (the same
    /// keys and values), for every optional key present and absent.
    #[test]
    fn every_template_writes_the_params_of_the_json_it_replaced() {
        let t = thread();
        let u = turn();
        let fixed = json!({"cwd": "/w", "sandbox": "read-only", "approvalPolicy": "never",
            "approvalsReviewer": "user"});
        let with = |base: &Value, extra: Value| {
            let mut v = base.clone();
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        let cases: Vec<(Option<Value>, Value)> = vec![
            (
                initialize("1.2.3").params(),
                json!({"clientInfo": {"name": CLIENT_NAME, "title": "codex-mcp-bridge",
                    "version": "1.2.3"}, "capabilities": {"experimentalApi": true}}),
            ),
            (
                thread_start(Path::new("/w"), None, false).unwrap().params(),
                fixed.clone(),
            ),
            (
                thread_start(Path::new("/w"), Some("m"), true)
                    .unwrap()
                    .params(),
                with(&fixed, json!({"model": "m", "ephemeral": true})),
            ),
            (
                thread_resume(&t, Path::new("/w"), Some("m"))
                    .unwrap()
                    .params(),
                with(&fixed, json!({"threadId": THREAD, "model": "m"})),
            ),
            (
                thread_fork(&t, Path::new("/w"), None).unwrap().params(),
                with(&fixed, json!({"threadId": THREAD})),
            ),
            (
                turn_interrupt(&t, &u).params(),
                json!({"threadId": THREAD, "turnId": TURN}),
            ),
            (
                clean_background_terminals(&t).params(),
                json!({"threadId": THREAD}),
            ),
            (thread_unsubscribe(&t).params(), json!({"threadId": THREAD})),
            (
                turn_steer(&t, &u, &text("more")).unwrap().params(),
                json!({"threadId": THREAD, "expectedTurnId": TURN,
                    "input": [{"type": "text", "text": "more"}]}),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Some(want));
        }
        assert_eq!(initialized().params(), None);
        let base = TurnParams {
            thread: &t,
            prompt: &text("do it"),
            sandbox: None,
            cwd: Path::new("/w"),
            model: None,
            effort: None,
        };
        let turn_fixed = json!({"threadId": THREAD,
            "input": [{"type": "text", "text": "do it"}],
            "sandboxPolicy": {"type": "readOnly"}, "approvalPolicy": "never",
            "approvalsReviewer": "user", "cwd": "/w"});
        assert_eq!(
            turn_start(&base).unwrap().params(),
            Some(turn_fixed.clone())
        );
        let schema = json!({"type": "object", "properties": {}});
        let full = turn_start_with_schema(
            &TurnParams {
                sandbox: Some(SandboxLevel::WorkspaceWrite),
                model: Some("m"),
                effort: Some(ReasoningEffort::High),
                ..base.clone()
            },
            Approvals::OnRequest,
            Some(&schema),
        )
        .unwrap();
        assert_eq!(
            full.params(),
            Some(with(
                &turn_fixed,
                json!({"sandboxPolicy": {"type": "workspaceWrite", "writableRoots": [],
                    "networkAccess": false}, "approvalPolicy": "on-request", "model": "m",
                    "effort": "high", "outputSchema": schema})
            ))
        );
        for (level, want) in [
            (SandboxLevel::ReadOnly, json!({"type": "readOnly"})),
            (
                SandboxLevel::DangerFullAccess,
                json!({"type": "dangerFullAccess"}),
            ),
        ] {
            assert_eq!(sandbox_policy(level), want);
        }
    }

    // Lines as measured (0.145.0 / 0.171.0), trimmed of fields the parser ignores.

    #[test]
    fn thread_results_of_both_versions_give_the_effective_policy() {
        let v145 = json!({"thread": {"id": THREAD, "ephemeral": false, "historyMode": "legacy",
            "path": "/h/sessions/2026/12/01/rollout-x.jsonl", "cwd": "/w", "cliVersion": "0.145.0",
            "source": "vscode", "turns": []},
            "model": "gpt-5.6-sol", "modelProvider": "mock", "serviceTier": null, "cwd": "/w",
            "runtimeWorkspaceRoots": ["/w"], "instructionSources": [], "approvalPolicy": "never",
            "approvalsReviewer": "user", "sandbox": {"type": "readOnly", "networkAccess": false},
            "activePermissionProfile": null, "reasoningEffort": null, "multiAgentMode": "explicitRequestOnly"});
        let mut v171 = v145.clone();
        v171["disabledPluginIds"] = json!([]);
        v171["thread"]["historyMode"] = json!("paginated");
        v171["thread"]["turns"] = json!([{"id": TURN, "status": "completed", "items": []}]);
        for (v, turns) in [(v145, 0), (v171, 1)] {
            let o = parse_thread_opened(&v).unwrap();
            assert_eq!(o.thread, thread());
            assert_eq!(o.turns, turns);
            assert!(o.path.is_some());
            assert_eq!(
                o.policy.check(SandboxLevel::ReadOnly, Path::new("/w")),
                Ok(())
            );
            let err = o
                .policy
                .check(SandboxLevel::WorkspaceWrite, Path::new("/other"))
                .unwrap_err()
                .0;
            assert!(
                err.contains("expected workspace-write") && err.contains("working directory"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_sticky_or_widened_setting_is_a_mismatch() {
        // 0.145.0, after a workspaceWrite turn (0.171.0 adds disabledPluginIds, environments)
        let l = r#"{"method":"thread/settings/updated","params":{"threadId":"01a22759-e393-7f71-bea4-35a12106bc11","threadSettings":{"cwd":"/w","approvalPolicy":"never","approvalsReviewer":"user","sandboxPolicy":{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false},"activePermissionProfile":null,"model":"gpt-5.6-sol","modelProvider":"mock","serviceTier":null,"effort":null,"summary":null,"collaborationMode":{"mode":"default","settings":{"model":"gpt-5.6-sol","reasoning_effort":null,"developer_instructions":null}},"multiAgentMode":"explicitRequestOnly","personality":"pragmatic"}},"emittedAtMs":1796153840207}"#;
        let Incoming::Notification(Notification::ThreadSettingsUpdated { thread_id, policy }) =
            parse_line(l).unwrap()
        else {
            panic!()
        };
        assert_eq!(thread_id, thread());
        assert_eq!(
            policy.check(SandboxLevel::WorkspaceWrite, Path::new("/w")),
            Ok(())
        );
        // the next turn sent read-only: codex still reporting workspace-write is a mismatch
        assert!(
            policy
                .check(SandboxLevel::ReadOnly, Path::new("/w"))
                .is_err()
        );
        let widened = |patch: Value| {
            let mut p = json!({"cwd": "/w", "approvalPolicy": "never", "approvalsReviewer": "user",
                "sandboxPolicy": {"type": "readOnly", "networkAccess": false}});
            for (k, v) in patch.as_object().unwrap() {
                p[k] = v.clone();
            }
            policy_of(&p).check(SandboxLevel::ReadOnly, Path::new("/w"))
        };
        assert_eq!(widened(json!({})), Ok(()));
        for patch in [
            json!({"approvalPolicy": "on-request"}),
            json!({"approvalPolicy": {"granular": {"rules": true}}}),
            json!({"approvalsReviewer": "auto_review"}),
            json!({"sandboxPolicy": {"type": "readOnly", "networkAccess": true}}),
            json!({"sandboxPolicy": {"type": "externalSandbox"}}),
            json!({"sandboxPolicy": {"type": "dangerFullAccess"}}),
        ] {
            assert!(widened(patch.clone()).is_err(), "{patch}");
        }
        let roots = EffectivePolicy {
            sandbox: ReportedSandbox::WorkspaceWrite {
                writable_roots: vec!["/".into()],
                network: false,
            },
            approval_policy: "never".into(),
            approvals_reviewer: "user".into(),
            cwd: "/w".into(),
        };
        assert!(
            roots
                .check(SandboxLevel::WorkspaceWrite, Path::new("/w"))
                .is_err()
        );
    }

    #[test]
    fn the_watch_follows_only_its_own_threads_settings() {
        let opened = ThreadOpened {
            thread: thread(),
            policy: EffectivePolicy {
                sandbox: ReportedSandbox::ReadOnly { network: false },
                approval_policy: "never".into(),
                approvals_reviewer: "user".into(),
                cwd: "/w".into(),
            },
            path: None,
            turns: 0,
        };
        let mut watch = PolicyWatch::new(&opened);
        let widened = |thread_id: &str| Notification::ThreadSettingsUpdated {
            thread_id: ThreadId::parse(thread_id).unwrap(),
            policy: EffectivePolicy {
                sandbox: ReportedSandbox::DangerFullAccess,
                ..opened.policy.clone()
            },
        };
        watch.observe(&widened("01a22759-e393-7f71-bea4-000000000000"));
        watch.observe(&Notification::Other {
            method: "thread/status/changed".into(),
        });
        assert_eq!(watch.check(SandboxLevel::ReadOnly, Path::new("/w")), Ok(()));
        watch.observe(&widened(THREAD));
        assert_eq!(watch.current().sandbox, ReportedSandbox::DangerFullAccess);
        assert!(
            watch
                .check(SandboxLevel::ReadOnly, Path::new("/w"))
                .is_err()
        );
        assert_eq!(
            watch.check(SandboxLevel::DangerFullAccess, Path::new("/w")),
            Ok(())
        );
    }

    #[test]
    fn notifications_of_a_turn_parse_on_both_versions() {
        let lines = [
            // 0.171.0
            r#"{"method":"turn/started","params":{"threadId":"T","turn":{"id":"U","rootTurnId":"U","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":1,"completedAt":null,"durationMs":null}},"emittedAtMs":1}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_1","text":"mock reply 1","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1,"completedAtMs":1},"threadId":"T","turnId":"U","contentTokenCount":null,"completedAtMs":1},"emittedAtMs":1}"#,
            // 0.145.0
            r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"msg_8","text":"mock reply 8","phase":null,"memoryCitation":null},"threadId":"T","turnId":"U"},"emittedAtMs":1}"#,
            r#"{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"U","tokenUsage":{"total":{"totalTokens":30,"inputTokens":20,"cachedInputTokens":0,"cacheWriteInputTokens":0,"outputTokens":10,"reasoningOutputTokens":0},"last":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":0,"cacheWriteInputTokens":0,"outputTokens":5,"reasoningOutputTokens":0},"modelContextWindow":475000}},"emittedAtMs":1}"#,
            r#"{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","items":[],"itemsView":"notLoaded","status":"interrupted","error":null,"startedAt":1,"completedAt":1,"durationMs":46}},"emittedAtMs":1}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_2","command":"/bin/bash -lc 'echo hi > out.txt'","cwd":"/w","processId":null,"source":"agent","status":"declined","commandActions":[],"aggregatedOutput":null,"exitCode":null,"durationMs":null},"threadId":"T","turnId":"U","completedAtMs":1},"emittedAtMs":1}"#,
            r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"p1","changes":[{"path":"/w/a.txt","kind":{"type":"add"},"diff":"x"}],"status":"inProgress"},"threadId":"T","turnId":"U","startedAtMs":1},"emittedAtMs":1}"#,
            r#"{"method":"error","params":{"error":{"message":"stream disconnected","codexErrorInfo":null,"additionalDetails":null},"willRetry":true,"threadId":"T","turnId":"U"},"emittedAtMs":1}"#,
            r#"{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"idle"}},"emittedAtMs":1}"#,
        ];
        let got: Vec<Notification> = lines
            .iter()
            .map(|l| match parse_line(&with_ids(l)).unwrap() {
                Incoming::Notification(n) => n,
                other => panic!("{other:?}"),
            })
            .collect();
        let (t, u) = (thread(), turn());
        assert_eq!(
            got,
            vec![
                Notification::TurnStarted {
                    thread_id: t,
                    turn_id: u.clone()
                },
                Notification::ItemCompleted {
                    thread_id: t,
                    turn_id: u.clone(),
                    item: Item::AgentMessage {
                        id: "msg_1".into(),
                        text: "mock reply 1".into()
                    }
                },
                Notification::ItemCompleted {
                    thread_id: t,
                    turn_id: u.clone(),
                    item: Item::AgentMessage {
                        id: "msg_8".into(),
                        text: "mock reply 8".into()
                    }
                },
                Notification::TokenUsage {
                    thread_id: t,
                    turn_id: u.clone(),
                    last: TokenUsage {
                        input: 10,
                        cached_input: 0,
                        output: 5,
                        reasoning_output: 0,
                        total: 15
                    },
                    total: TokenUsage {
                        input: 20,
                        cached_input: 0,
                        output: 10,
                        reasoning_output: 0,
                        total: 30
                    },
                },
                Notification::TurnCompleted {
                    thread_id: t,
                    turn_id: u.clone(),
                    status: TurnStatus::Interrupted,
                    error: None
                },
                Notification::ItemCompleted {
                    thread_id: t,
                    turn_id: u.clone(),
                    item: Item::CommandExecution {
                        id: "call_2".into(),
                        command: "/bin/bash -lc 'echo hi > out.txt'".into(),
                        status: ItemStatus::Declined,
                        exit_code: None,
                    }
                },
                Notification::ItemStarted {
                    thread_id: t,
                    turn_id: u.clone(),
                    item: Item::FileChange {
                        id: "p1".into(),
                        status: ItemStatus::InProgress,
                        paths: vec!["/w/a.txt".into()]
                    }
                },
                Notification::Error {
                    thread_id: t,
                    turn_id: u,
                    message: "stream disconnected".into(),
                    will_retry: true
                },
                Notification::Other {
                    method: "thread/status/changed".into()
                },
            ]
        );
    }

    #[test]
    fn every_server_request_gets_a_refusal_with_its_own_id() {
        // measured on 0.145.0; ids start at 0
        let approval = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","turnId":"U","itemId":"call_2","startedAtMs":1,"environmentId":"local","reason":"Write out.txt?","command":"/bin/bash -lc 'echo hi > out.txt; echo exit=$?'","cwd":"/w","commandActions":[{"type":"unknown","command":"echo hi > out.txt; echo exit=$?"}],"proposedExecpolicyAmendment":["/bin/bash","-lc","echo hi > out.txt; echo exit=$?"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":[]}},"cancel"]}}"#;
        let Incoming::Request(r) = parse_line(&with_ids(approval)).unwrap() else {
            panic!()
        };
        assert_eq!(r.id, RequestId::Int(0));
        assert_eq!(r.thread_id(), Some(&thread()));
        assert!(r.is_of(&thread(), &turn()));
        assert_eq!(r.kind, RequestKind::CommandApproval);
        assert!(r.params["command"].as_str().unwrap().contains("out.txt"));
        assert_eq!(r.decline(), r#"{"id":0,"result":{"decision":"decline"}}"#);

        let answer = |method: &str, id: Value| -> Value {
            let l = json!({"method": method, "id": id, "params": {"threadId": "T"}}).to_string();
            let Incoming::Request(r) = parse_line(&l).unwrap() else {
                panic!("{l}")
            };
            serde_json::from_str(&r.decline()).unwrap()
        };
        let cases = [
            (
                "item/fileChange/requestApproval",
                json!({"decision": "decline"}),
            ),
            (
                "item/permissions/requestApproval",
                json!({"permissions": {}, "scope": "turn"}),
            ),
            ("item/tool/requestUserInput", json!({"answers": {}})),
            (
                "mcpServer/elicitation/request",
                json!({"action": "decline", "content": null}),
            ),
            (
                "item/tool/call",
                json!({"contentItems": [], "success": false}),
            ),
            ("execCommandApproval", json!({"decision": "denied"})),
            ("applyPatchApproval", json!({"decision": "denied"})),
        ];
        for (i, (method, result)) in cases.into_iter().enumerate() {
            assert_eq!(
                answer(method, json!(i)),
                json!({"id": i, "result": result}),
                "{method}"
            );
        }
        for method in [
            "account/chatgptAuthTokens/refresh",
            "attestation/generate",
            "future/thing",
        ] {
            let a = answer(method, json!("s-1"));
            assert_eq!(a["id"], "s-1");
            assert_eq!(a["error"]["code"], UNSUPPORTED_REQUEST_CODE);
            assert!(a.get("result").is_none(), "{method}");
        }
    }

    #[test]
    fn an_accept_is_built_only_for_its_own_kind_and_only_once_or_for_the_turn() {
        let request = |method: &str, params: Value| {
            let l = json!({"method": method, "id": 9, "params": params}).to_string();
            let Incoming::Request(r) = parse_line(&l).unwrap() else {
                panic!("{l}")
            };
            r
        };
        let command = request(
            "item/commandExecution/requestApproval",
            json!({"command": "ls"}),
        );
        let perms = request(
            "item/permissions/requestApproval",
            json!({"cwd": "/w", "permissions": {"network": {"enabled": true}, "fileSystem": null}}),
        );
        let input = request(
            "item/tool/requestUserInput",
            json!({"questions": [{"id": "q", "header": "h", "question": "?"}]}),
        );
        let url = request(
            "mcpServer/elicitation/request",
            json!({"serverName": "s", "mode": "url", "message": "m", "url": "u", "elicitationId": "e"}),
        );
        let form = request(
            "mcpServer/elicitation/request",
            json!({"serverName": "s", "mode": "form", "message": "m", "requestedSchema": {}}),
        );
        let tool = request("item/tool/call", json!({}));
        let answers = || BTreeMap::from([("q".to_owned(), "a".to_owned())]);
        let content = || Map::from_iter([("k".to_owned(), json!(1))]);
        let line = |l: Option<String>| l.map(|l| serde_json::from_str::<Value>(&l).unwrap());
        assert_eq!(
            line(command.accept_once()),
            Some(json!({"id": 9, "result": {"decision": "accept"}}))
        );
        assert_eq!(
            line(perms.grant_for_turn()),
            Some(
                json!({"id": 9, "result": {"permissions": {"network": {"enabled": true}},
                "scope": "turn"}})
            )
        );
        assert_eq!(
            line(input.answer_input(answers())),
            Some(json!({"id": 9, "result": {"answers": {"q": {"answers": ["a"]}}}}))
        );
        assert_eq!(input.answer_input(BTreeMap::new()), None);
        assert_eq!(
            line(form.accept_form(content())),
            Some(json!({"id": 9, "result": {"action": "accept", "content": {"k": 1}}}))
        );
        assert_eq!(
            form.accept_form(Map::from_iter([("k".to_owned(), json!([1]))])),
            None
        );
        for r in [&perms, &input, &url, &form, &tool] {
            assert_eq!(r.accept_once(), None, "{}", r.method);
        }
        for r in [&command, &input, &url, &form, &tool] {
            assert_eq!(r.grant_for_turn(), None, "{}", r.method);
        }
        for r in [&command, &perms, &url, &form, &tool] {
            assert_eq!(r.answer_input(answers()), None, "{}", r.method);
        }
        for r in [&command, &perms, &input, &url, &tool] {
            assert_eq!(r.accept_form(content()), None, "{}", r.method);
        }
    }

    #[test]
    fn responses_and_malformed_lines() {
        assert_eq!(
            parse_line(r#"{"id":4,"result":{}}"#).unwrap(),
            Incoming::Response {
                id: RequestId::Int(4),
                result: Ok(json!({}))
            }
        );
        let err = parse_line(r#"{"error":{"code":-32600,"message":"Invalid request: unknown variant `bogus/method`"},"id":31}"#).unwrap();
        let Incoming::Response { id, result: Err(e) } = err else {
            panic!("{err:?}")
        };
        assert_eq!((id, e.code), (RequestId::Int(31), -32600));
        for bad in [
            "",
            "[]",
            "{}",
            "nope",
            r#"{"id":1}"#,
            r#"{"id":{},"result":1}"#,
            r#"{"id":1,"error":"x"}"#,
            // an error without its message
            r#"{"id":1,"error":{"code":-32600}}"#,
        ] {
            assert!(
                matches!(parse_line(bad), Err(ProtocolError::Malformed(_))),
                "{bad}"
            );
        }
        let turn =
            parse_turn_started(&json!({"turn": {"id": TURN, "items": [], "status": "inProgress"}}));
        assert_eq!(turn.unwrap().as_str(), TURN);
        assert!(parse_turn_started(&json!({"turn": {}})).is_err());
    }

    #[test]
    fn a_missing_or_mistyped_field_is_an_error_not_an_empty_value() {
        let ids = r#""threadId":"T","turnId":"U""#;
        let item = |item: &str, method: &str| {
            with_ids(&format!(
                r#"{{"method":"{method}","params":{{"item":{item},{ids}}}}}"#
            ))
        };
        let usage = |last: &str| {
            with_ids(&format!(
                r#"{{"method":"thread/tokenUsage/updated","params":{{{ids},"tokenUsage":{{"last":{last},"total":{last}}}}}}}"#
            ))
        };
        let full = r#"{"totalTokens":3,"inputTokens":1,"cachedInputTokens":0,"outputTokens":2,"reasoningOutputTokens":0}"#;
        // the controls: the same lines, complete, read
        for good in [
            with_ids(
                r#"{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","items":[],"status":"completed"}}}"#,
            ),
            item(
                r#"{"type":"agentMessage","id":"m","text":"hi"}"#,
                "item/completed",
            ),
            item(
                r#"{"type":"fileChange","id":"f","changes":[{"path":"/w/a","kind":{"type":"add"},"diff":"x"}],"status":"completed"}"#,
                "item/started",
            ),
            usage(full),
            with_ids(&format!(
                r#"{{"method":"error","params":{{{ids},"error":{{"message":"m"}},"willRetry":false}}}}"#
            )),
        ] {
            assert!(
                matches!(parse_line(&good), Ok(Incoming::Notification(n)) if n.turn().is_some()),
                "{good}"
            );
        }
        for bad in [
            // a turn that ended without saying how
            with_ids(
                r#"{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"U","items":[]}}}"#,
            ),
            // an answer without its text, a text that is no string
            item(r#"{"type":"agentMessage","id":"m"}"#, "item/completed"),
            item(
                r#"{"type":"agentMessage","id":"m","text":7}"#,
                "item/completed",
            ),
            // a change without its path
            item(
                r#"{"type":"fileChange","id":"f","changes":[{"kind":{"type":"add"},"diff":"x"}],"status":"completed"}"#,
                "item/started",
            ),
            // a count missing from the usage
            usage(r#"{"totalTokens":3,"inputTokens":1,"cachedInputTokens":0,"outputTokens":2}"#),
            // an error that does not say whether codex retries
            with_ids(&format!(
                r#"{{"method":"error","params":{{{ids},"error":{{"message":"m"}}}}}}"#
            )),
            // a thread id that is no UUID
            format!(
                r#"{{"method":"turn/started","params":{{"threadId":"T","turn":{{"id":"{TURN}","items":[],"status":"inProgress"}}}}}}"#
            ),
        ] {
            assert!(
                matches!(parse_line(&bad), Err(ProtocolError::Malformed(_))),
                "{bad}: {:?}",
                parse_line(&bad)
            );
        }
        // what a later version may add reads as unknown, not as an error
        let Ok(Incoming::Notification(Notification::ItemStarted { item: future, .. })) = parse_line(
            &item(r#"{"type":"someFutureItem","id":"z"}"#, "item/started"),
        ) else {
            panic!("an unknown item type is read")
        };
        assert!(matches!(future, Item::Other { ref kind, .. } if kind == "someFutureItem"));
        let Ok(Incoming::Notification(Notification::ItemCompleted {
            item: Item::CommandExecution { status, .. },
            ..
        })) = parse_line(&item(
            r#"{"type":"commandExecution","id":"c","command":"ls","status":"someFutureState"}"#,
            "item/completed",
        ))
        else {
            panic!("an unknown status is read")
        };
        assert_eq!(status, ItemStatus::Unknown);
        // a request whose thread id is no UUID belongs to no thread of ours
        let Ok(Incoming::Request(r)) = parse_line(
            r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","turnId":"U","itemId":"c","command":"ls"}}"#,
        ) else {
            panic!("a request is read")
        };
        assert!(r.thread_id().is_none() && !r.is_of(&thread(), &turn()));
        let Ok(Incoming::Request(r)) = parse_line(&with_ids(
            r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","turnId":"U","itemId":"c","command":"ls"}}"#,
        )) else {
            panic!("a request is read")
        };
        assert!(r.is_of(&thread(), &turn()));
    }
}
