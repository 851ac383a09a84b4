//! Items and notifications: the thread items the bridge reports on ([`Item`], with
//! [`ItemStatus`] as the app-server spells it; a `fileChange` item with what each of its changes
//! writes, [`AnnouncedChange`]), token counts, and the [`Notification`]s the bridge acts on, each
//! read typed (a missing or mistyped field is an error, never a default).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::frame::{ProtocolError, TurnRef, typed, typed_ref};
use super::policy::EffectivePolicy;
use super::turn::TurnStatus;
use crate::codex::events::ItemStatus;
use crate::security::ids::ThreadId;

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
    /// The one reading of a `fileChange` item: which files it changes (what a turn reports)
    /// and what it writes to each (what a file-change approval shows a person, see
    /// [`ChangeBook`](crate::approval::from_codex::ChangeBook)).
    FileChange {
        id: String,
        status: ItemStatus,
        /// Each change in codex's order, read typed on its own: `Err` for one that names its
        /// path but is not a change as codex announces it (its kind or content missing or
        /// mistyped). A change without a path makes the whole item malformed.
        changes: Vec<Result<AnnouncedChange, UnreadableChange>>,
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
        changes: Vec<WireChange>,
    },
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
                changes: changes.into_iter().map(|c| c.0).collect(),
            },
        })
    }

    /// The paths a `fileChange` item changes, in order (none for any other item).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        let changes = match self {
            Item::FileChange { changes, .. } => changes.as_slice(),
            _ => &[],
        };
        changes.iter().map(|c| match c {
            Ok(c) => c.path.as_str(),
            Err(u) => u.path.as_str(),
        })
    }
}

/// One change of a `fileChange` item, every field required: what it writes is shown whole to a
/// person ([`ChangeBook`](crate::approval::from_codex::ChangeBook)), or the change is not asked.
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

/// A change of a `fileChange` item that names its path but not what it writes as codex
/// announces a change: the item's files are known, what it writes is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableChange {
    pub path: String,
    /// Why it is not an [`AnnouncedChange`].
    pub reason: String,
}

/// A file change's path (required: without one the item is malformed).
#[derive(Deserialize)]
struct WirePath {
    path: String,
}

/// One change of a `fileChange` item as read from the wire: its path required, the rest read
/// as an [`AnnouncedChange`] on its own, so that a change that is not one leaves the item
/// readable (and unshowable) instead of malformed.
struct WireChange(Result<AnnouncedChange, UnreadableChange>);

impl<'de> Deserialize<'de> for WireChange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // one change held as it came, read twice: for its path, then as a whole change
        let v = Value::deserialize(d)?;
        let WirePath { path } = WirePath::deserialize(&v).map_err(serde::de::Error::custom)?;
        Ok(WireChange(AnnouncedChange::deserialize(&v).map_err(|e| {
            UnreadableChange {
                path,
                reason: e.to_string(),
            }
        })))
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
    // named from the crate: the layering test reads a `super::` here as the file's parent
    use serde::Deserialize;
    use serde_json::Value;

    use crate::codex::app_server::protocol::frame::TurnRef;
    use crate::codex::app_server::protocol::items::TokenUsage;
    use crate::codex::app_server::protocol::policy::WirePolicy;
    use crate::codex::app_server::protocol::turn::{WireError, WireTurn};
    use crate::security::ids::ThreadId;

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

pub(super) fn notification(method: &str, p: Value) -> Result<Notification, ProtocolError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::{TURN, thread, turn, with_ids};
    use crate::codex::app_server::protocol::{Incoming, parse_line};

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
                        changes: vec![Ok(AnnouncedChange {
                            path: "/w/a.txt".into(),
                            kind: AnnouncedKind {
                                kind: "add".into(),
                                move_path: None
                            },
                            diff: "x".into()
                        })]
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
    fn a_file_change_item_is_read_once_with_its_paths_and_what_each_change_writes() {
        let line = with_ids(
            r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"f","changes":[{"path":"/w/a","kind":{"type":"update","move_path":"/w/b"},"diff":"@@\n-a\n+b\n"},{"path":"/w/c","kind":{"type":"add"}},{"path":"/w/d","kind":{},"diff":"x"},{"path":"/w/e","kind":{"type":"delete"},"diff":null}],"status":"inProgress"},"threadId":"T","turnId":"U"}}"#,
        );
        let Ok(Incoming::Notification(Notification::ItemStarted { item, .. })) = parse_line(&line)
        else {
            panic!("a file change is read")
        };
        // every change names its file, read or not: what a turn reports
        assert_eq!(
            item.paths().collect::<Vec<_>>(),
            ["/w/a", "/w/c", "/w/d", "/w/e"]
        );
        let Item::FileChange { id, changes, .. } = item else {
            panic!("{item:?}")
        };
        assert_eq!(id, "f");
        // what it writes, read typed change by change: what an approval shows, or not at all
        assert_eq!(
            changes[0],
            Ok(AnnouncedChange {
                path: "/w/a".into(),
                kind: AnnouncedKind {
                    kind: "update".into(),
                    move_path: Some("/w/b".into())
                },
                diff: "@@\n-a\n+b\n".into()
            })
        );
        for (c, path) in changes[1..].iter().zip(["/w/c", "/w/d", "/w/e"]) {
            assert!(matches!(c, Err(u) if u.path == path), "{c:?}");
        }
        // the other items name no file
        assert_eq!(
            Item::Other {
                kind: "reasoning".into(),
                id: "r".into()
            }
            .paths()
            .count(),
            0
        );
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
            // a change whose path is no string, an item without its list of changes
            item(
                r#"{"type":"fileChange","id":"f","changes":[{"path":1,"kind":{"type":"add"},"diff":"x"}],"status":"completed"}"#,
                "item/started",
            ),
            item(
                r#"{"type":"fileChange","id":"f","status":"completed"}"#,
                "item/completed",
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
