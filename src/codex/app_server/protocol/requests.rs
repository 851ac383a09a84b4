//! Codex's requests to the bridge: what each asks ([`RequestKind`]; a [`ServerRequest`] with
//! the thread, turn and item it names), the params of those a person may be asked, typed
//! ([`QuestionParams`]), and the only answers the bridge can write: a refusal of each kind, an
//! accept once, a grant for the turn, typed answers and a form's primitive content.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::frame::{ProtocolError, RequestId, TurnRef, typed_ref};
use crate::security::ids::ThreadId;

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
    pub(super) fn new(id: RequestId, method: &str, p: Value) -> Self {
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
/// announced, [`ChangeBook`](crate::approval::from_codex::ChangeBook)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::{thread, turn, with_ids};
    use crate::codex::app_server::protocol::{Incoming, parse_line};
    use serde_json::json;

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
}
