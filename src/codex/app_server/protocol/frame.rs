//! The JSON-RPC frame of `codex app-server`: the protocol's error ([`ProtocolError`]), the
//! whitelist of methods ([`Method`]), the sealed [`Message`] and [`Request`] traits every
//! template implements (with the `message!` macro that makes one), the ids ([`TurnRef`],
//! codex's [`RequestId`]), a JSON-RPC error ([`RpcError`]), the typed reading of a value, and
//! the handshake (`initialize`, then `initialized`). The bottom of the protocol's files: it
//! names none of the others.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

pub(super) fn invalid(field: &'static str, reason: impl Into<String>) -> ProtocolError {
    ProtocolError::Invalid {
        field,
        reason: reason.into(),
    }
}

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
    /// `thread/name/set`: the name a person chose for a stored thread (codex's own app shows
    /// it).
    ThreadSetName,
    /// `thread/rollback` (0.145.0; gone in 0.171.0): drop the last turns of a thread.
    ThreadRollback,
    /// `thread/turns/list` (0.171.0): a page of a thread's turns, newest first.
    ThreadTurnsList,
    /// `thread/revert` (0.171.0): a thread's history cut back to before one of its turns.
    ThreadRevert,
    /// `thread/compact/start`: codex compacts the thread's context in a turn of its own.
    ThreadCompactStart,
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
            Method::ThreadSetName => "thread/name/set",
            Method::ThreadRollback => "thread/rollback",
            Method::ThreadTurnsList => "thread/turns/list",
            Method::ThreadRevert => "thread/revert",
            Method::ThreadCompactStart => "thread/compact/start",
        }
    }

    /// Whether this is a notification (sent without an id, never answered).
    pub fn is_notification(self) -> bool {
        self == Method::Initialized
    }
}

pub(super) mod sealed {
    /// Only this module's templates are messages.
    pub trait Sealed {}
}

/// A message the bridge writes: one of the whitelisted [`Method`]s with its typed params. Only
/// this module's templates implement it (the trait is sealed) and their fields are private, so
/// the template functions of the protocol's files are the only way to build one.
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
        impl $crate::codex::app_server::protocol::frame::sealed::Sealed for $t {}
        impl $crate::codex::app_server::protocol::frame::Message for $t {
            const METHOD: $crate::codex::app_server::protocol::frame::Method = $method;
        }
    };
    ($t:ty, $method:expr, $response:ty) => {
        message!($t, $method);
        impl $crate::codex::app_server::protocol::frame::Request for $t {
            type Response = $response;
        }
    };
}

/// The macro, for the template files beside this one.
pub(super) use message;

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

/// Read `v` as the shape `T` of `what`; a missing or mistyped field is an error that names it
/// (serde's message), never a default.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    what: &str,
    v: Value,
) -> Result<T, ProtocolError> {
    serde_json::from_value(v).map_err(|e| ProtocolError::Malformed(format!("`{what}`: {e}")))
}

pub(super) fn typed_ref<'a, T: Deserialize<'a>>(
    what: &str,
    v: &'a Value,
) -> Result<T, ProtocolError> {
    T::deserialize(v).map_err(|e| ProtocolError::Malformed(format!("`{what}`: {e}")))
}

/// What goes in `clientInfo.name` (codex uses it as the `originator` of threads it creates).
pub const CLIENT_NAME: &str = "codex_mcp_bridge";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::{THREAD, TURN, line, text, thread, turn};
    use crate::codex::app_server::protocol::{
        Approvals, TurnParams, clean_background_terminals, sandbox_policy, thread_fork,
        thread_resume, thread_start, thread_unsubscribe, turn_interrupt, turn_start,
        turn_start_with_schema, turn_steer,
    };
    use crate::plan::values::{ReasoningEffort, SandboxLevel};
    use serde_json::json;
    use std::path::Path;

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
        let m = crate::security::ids::ModelId::parse("model", "m").unwrap();
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
                thread_start(Path::new("/w"), Some(&m), true)
                    .unwrap()
                    .params(),
                with(&fixed, json!({"model": "m", "ephemeral": true})),
            ),
            (
                thread_resume(&t, Path::new("/w"), Some(&m))
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
                model: Some(&crate::security::ids::ModelId::parse("model", "m").unwrap()),
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
}
