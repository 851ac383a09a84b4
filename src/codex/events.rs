//! The bridge's own turn events ([`Event`], [`Item`]) and the [`Transcript`] that folds them
//! into a turn's result. Each backend maps its own wire to them: [`parse_line`] reads a
//! `codex exec --json` line through a private type of exec's shape (`exec_wire`), the
//! app-server backend maps its typed items and notifications (`app_server::translate`, the
//! warm driver), every field from what codex sent: an event carries only what both backends
//! report, an item's state is an [`ItemStatus`], a retry is [`Event::Retrying`], a turn codex
//! did not complete is [`Event::TurnFailed`] with a [`Unfinished`] (and codex's message when it
//! gave one). Pure: no IO.
//!
//! Unknown event or item types are counted, never fatal: codex adds types between releases.

use serde::{Deserialize, Serialize};

use crate::security::ids::ThreadId;

/// One event of a turn, whichever backend ran it: exec's JSONL lines are read into it by
/// [`parse_line`] (through a private type of exec's wire shape), the app-server's
/// notifications by `app_server::translate` and the warm driver.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The thread's id, parsed once where it is read: one that is not a UUID gives no event (an
    /// exec line with one is counted as an unknown event), so no later reader parses it again.
    ThreadStarted {
        thread_id: ThreadId,
    },
    TurnStarted,
    /// `usage` is a running total for the whole thread, not this turn's own.
    TurnCompleted {
        usage: Usage,
    },
    /// Codex ended the turn without completing it: `reason` is how it said it ended (exec's
    /// `turn.failed`, the app-server's `turn/completed` status), `message` codex's own text,
    /// when it gave one (the bridge writes none in).
    TurnFailed {
        message: Option<String>,
        reason: Unfinished,
    },
    ItemStarted {
        item: Item,
    },
    ItemUpdated {
        item: Item,
    },
    ItemCompleted {
        item: Item,
    },
    /// A top-level error that ends the turn (exec's `error` line, the app-server's `error`
    /// notification without `willRetry`).
    Error {
        message: String,
    },
    /// Codex retries the model's request and says why: exec's `error` line whose text starts
    /// `Reconnecting` (read once, by [`parse_line`]), the app-server's `error` notification with
    /// `willRetry`. Downstream a retry is this variant, never text to search.
    Retrying {
        message: String,
    },
}

/// How codex ended a turn it did not complete, as its backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// It failed (exec's `turn.failed`, the app-server's status `failed`).
    Failed,
    /// It was interrupted (the app-server's status `interrupted`).
    Interrupted,
    /// A status this version does not know, or one that is no ending (`inProgress`).
    Unknown,
}

pub use crate::usage::Usage;

/// A thread item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    AgentMessage {
        id: String,
        text: String,
    },
    /// Codex reasons (its text is not kept: no progress line or result shows it).
    Reasoning {
        id: String,
    },
    CommandExecution {
        id: String,
        command: String,
        /// (Its output is not kept: no result shows it.)
        exit_code: Option<i64>,
        status: ItemStatus,
    },
    FileChange {
        id: String,
        changes: Vec<FileChange>,
        status: ItemStatus,
    },
    McpToolCall {
        id: String,
        server: String,
        tool: String,
        status: ItemStatus,
    },
    WebSearch {
        id: String,
        query: String,
    },
    TodoList {
        id: String,
        items: Vec<TodoItem>,
    },
    Error {
        id: String,
        message: String,
    },
    /// An item type this version does not know.
    Unknown,
}

/// One file of a `file_change` item (the path is all a result shows).
#[derive(Debug, Clone, PartialEq)]
pub struct FileChange {
    pub path: String,
}

/// The state of an item: what exec prints as `status` (snake case) and the app-server's
/// item `status` (camel case), as one type. Shown in results with exec's spelling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Failed,
    /// Refused (by an approval answer or the policy): it did not run.
    Declined,
    /// A state this version does not know, or none given.
    #[default]
    #[serde(other)]
    Unknown,
}

impl ItemStatus {
    /// Exec's spelling (`in_progress`, `completed`, `failed`, `declined`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::InProgress => "in_progress",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Declined => "declined",
            ItemStatus::Unknown => "unknown",
        }
    }
}

/// One entry of a `todo_list` item.
#[derive(Debug, Clone, PartialEq)]
pub struct TodoItem {
    pub text: String,
    pub completed: bool,
}

/// The result of parsing one line.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Event(Event),
    /// Valid JSON with a `type` we do not know (or a known type with an unexpected shape).
    Unknown(String),
    /// Not a JSON object with a string `type` (codex printed something else).
    Malformed,
}

/// Parse one line of `codex exec --json` into the bridge's event. Never panics; blank lines
/// are [`Parsed::Malformed`].
pub fn parse_line(line: &str) -> Parsed {
    match serde_json::from_str::<exec_wire::Line>(line) {
        Ok(l) => Parsed::Event(l.into_event()),
        Err(_) => {
            #[derive(Deserialize)]
            struct TypeOnly {
                #[serde(rename = "type")]
                kind: String,
            }
            match serde_json::from_str::<TypeOnly>(line) {
                Ok(t) => Parsed::Unknown(t.kind.chars().take(64).collect()),
                Err(_) => Parsed::Malformed,
            }
        }
    }
}

pub use crate::failure::FailureKind;

/// Classify a failure message from codex (a `turn.failed`, terminal `error`, or stderr).
pub fn classify(message: &str) -> FailureKind {
    let m = message.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
    if any(&[
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "too many tokens",
    ]) {
        FailureKind::ContextLength
    } else if any(&[
        "401",
        "unauthorized",
        "invalid api key",
        "incorrect api key",
        "authentication",
        "not logged in",
        "login",
    ]) {
        FailureKind::Auth
    } else if any(&[
        "429",
        "rate limit",
        "rate_limit",
        "quota",
        "usage limit",
        "too many requests",
    ]) {
        FailureKind::RateLimit
    } else {
        FailureKind::TurnFailed
    }
}

/// A one-line description of what codex is doing, for progress messages; `None` for events
/// that say nothing new.
pub fn describe(event: &Event) -> Option<String> {
    match event {
        Event::ThreadStarted { .. } => Some("starting".into()),
        Event::TurnStarted => Some("thinking".into()),
        Event::TurnCompleted { .. } => Some("finishing".into()),
        Event::TurnFailed { .. } => None,
        Event::Error { .. } => None,
        Event::Retrying { message } => Some(clip(&format!("retrying: {message}"))),
        Event::ItemStarted { item } | Event::ItemUpdated { item } => match item {
            Item::CommandExecution { command, .. } => Some(format!("running: {}", clip(command))),
            Item::FileChange { changes, .. } => Some(format!(
                "editing {}",
                clip(
                    &changes
                        .iter()
                        .map(|c| c.path.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            )),
            Item::McpToolCall { server, tool, .. } => {
                Some(format!("calling {}", clip(&format!("{server}.{tool}"))))
            }
            Item::WebSearch { query, .. } => Some(format!("searching: {}", clip(query))),
            Item::Reasoning { .. } => Some("thinking".into()),
            Item::TodoList { items, .. } => {
                let done = items.iter().filter(|i| i.completed).count();
                Some(format!("plan: {done}/{} steps done", items.len()))
            }
            Item::AgentMessage { .. } => Some("writing the answer".into()),
            Item::Error { .. } | Item::Unknown => None,
        },
        Event::ItemCompleted { item } => match item {
            Item::CommandExecution {
                command,
                exit_code,
                status,
                ..
            } => Some(ran(command, *exit_code, *status)),
            Item::FileChange { changes, .. } => Some(format!(
                "edited {}",
                clip(
                    &changes
                        .iter()
                        .map(|c| c.path.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            )),
            Item::Reasoning { .. } => Some("thinking".into()),
            Item::AgentMessage { .. } => Some("answer written".into()),
            _ => None,
        },
    }
}

/// `s` on one line, cut at 120 characters.
fn clip(s: &str) -> String {
    const MAX: usize = 120;
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > MAX {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    } else {
        s
    }
}

/// How a completed command is told: `ran: … (exit N)`; `declined: …` when an approval answer
/// or the policy refused it; `not run: …` when it failed without an exit code (codex could
/// not start it). Never "ran" for a command that did not run.
fn ran(command: &str, exit_code: Option<i64>, status: ItemStatus) -> String {
    match (status, exit_code) {
        (ItemStatus::Declined, _) => format!("declined: {}", clip(command)),
        (ItemStatus::Failed, None) => format!("not run: {}", clip(command)),
        (_, code) => format!(
            "ran: {} (exit {})",
            clip(command),
            code.map_or("?".into(), |c| c.to_string())
        ),
    }
}

/// A command codex ran during the turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandRun {
    pub command: String,
    pub exit_code: Option<i64>,
    pub status: ItemStatus,
}

/// Everything a turn's events say, folded as they arrive.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The thread id from `thread.started`.
    pub thread_id: Option<ThreadId>,
    /// The last `agent_message` text.
    pub last_message: Option<String>,
    /// Running thread usage from `turn.completed`.
    pub thread_usage: Option<Usage>,
    /// Commands run, in completion order.
    pub commands: Vec<CommandRun>,
    /// Files changed (paths), in order, without duplicates.
    pub files_changed: Vec<String>,
    /// Codex's own failure message, from `turn.failed` or a terminal `error`.
    pub failure: Option<String>,
    /// How codex ended the turn when it did not complete it ([`Event::TurnFailed`]).
    pub ended: Option<Unfinished>,
    pub turn_completed: bool,
    /// Lines with an unknown type.
    pub unknown_events: u64,
    /// Lines that were not JSON events, or were over the line cap.
    pub malformed_lines: u64,
    /// Transient retry notices seen.
    pub retries: u64,
}

/// Most commands kept in a transcript; a turn running more still completes.
pub const MAX_COMMANDS_KEPT: usize = 1000;

impl Transcript {
    /// Fold one parsed line in.
    pub fn apply(&mut self, parsed: &Parsed) {
        match parsed {
            Parsed::Event(ev) => self.apply_event(ev),
            Parsed::Unknown(_) => self.unknown_events += 1,
            Parsed::Malformed => self.malformed_lines += 1,
        }
    }

    /// Fold one event in.
    pub fn apply_event(&mut self, ev: &Event) {
        match ev {
            Event::ThreadStarted { thread_id } => self.thread_id = Some(*thread_id),
            Event::TurnStarted => {}
            Event::TurnCompleted { usage } => {
                self.thread_usage = Some(*usage);
                self.turn_completed = true;
            }
            Event::TurnFailed { message, reason } => {
                self.ended = Some(*reason);
                if let Some(m) = message {
                    self.failure = Some(m.clone());
                }
            }
            Event::Error { message } => self.failure = Some(message.clone()),
            Event::Retrying { .. } => self.retries += 1,
            Event::ItemStarted { .. } | Event::ItemUpdated { .. } => {}
            Event::ItemCompleted { item } => match item {
                Item::AgentMessage { text, .. } => self.last_message = Some(text.clone()),
                Item::CommandExecution {
                    command,
                    exit_code,
                    status,
                    ..
                } => {
                    if self.commands.len() < MAX_COMMANDS_KEPT {
                        self.commands.push(CommandRun {
                            command: command.clone(),
                            exit_code: *exit_code,
                            status: *status,
                        });
                    }
                }
                Item::FileChange { changes, .. } => {
                    for c in changes {
                        if !self.files_changed.contains(&c.path)
                            && self.files_changed.len() < MAX_COMMANDS_KEPT
                        {
                            self.files_changed.push(c.path.clone());
                        }
                    }
                }
                Item::Unknown => self.unknown_events += 1,
                Item::Reasoning { .. }
                | Item::McpToolCall { .. }
                | Item::WebSearch { .. }
                | Item::TodoList { .. }
                | Item::Error { .. } => {}
            },
        }
    }
}

/// Exec's wire: the shape of a `codex exec --json` line, read only by [`parse_line`] and
/// mapped at once into the bridge's [`Event`].
mod exec_wire {
    use serde::Deserialize;

    use super::{Event, FileChange, Item, ItemStatus, TodoItem, Unfinished, Usage};
    use crate::security::ids::ThreadId;

    /// One line of `codex exec --json` output.
    #[derive(Deserialize)]
    #[serde(tag = "type")]
    pub(super) enum Line {
        #[serde(rename = "thread.started")]
        ThreadStarted { thread_id: ThreadId },
        #[serde(rename = "turn.started")]
        TurnStarted,
        #[serde(rename = "turn.completed")]
        TurnCompleted {
            #[serde(default)]
            usage: Usage,
        },
        #[serde(rename = "turn.failed")]
        TurnFailed {
            #[serde(default)]
            error: Option<ErrorPayload>,
        },
        #[serde(rename = "item.started")]
        ItemStarted { item: ExecItem },
        #[serde(rename = "item.updated")]
        ItemUpdated { item: ExecItem },
        #[serde(rename = "item.completed")]
        ItemCompleted { item: ExecItem },
        /// A top-level error: a failure, or a retry notice (its text starts `Reconnecting`).
        #[serde(rename = "error")]
        Error {
            #[serde(default)]
            message: String,
        },
    }

    /// `turn.failed.error`.
    #[derive(Deserialize)]
    pub(super) struct ErrorPayload {
        #[serde(default)]
        message: Option<String>,
    }

    /// An item of exec's.
    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub(super) enum ExecItem {
        AgentMessage {
            #[serde(default)]
            id: String,
            #[serde(default)]
            text: String,
        },
        Reasoning {
            #[serde(default)]
            id: String,
        },
        CommandExecution {
            #[serde(default)]
            id: String,
            #[serde(default)]
            command: String,
            #[serde(default)]
            exit_code: Option<i64>,
            #[serde(default)]
            status: ItemStatus,
        },
        FileChange {
            #[serde(default)]
            id: String,
            #[serde(default)]
            changes: Vec<ExecFileChange>,
            #[serde(default)]
            status: ItemStatus,
        },
        McpToolCall {
            #[serde(default)]
            id: String,
            #[serde(default)]
            server: String,
            #[serde(default)]
            tool: String,
            #[serde(default)]
            status: ItemStatus,
        },
        WebSearch {
            #[serde(default)]
            id: String,
            #[serde(default)]
            query: String,
        },
        TodoList {
            #[serde(default)]
            id: String,
            #[serde(default)]
            items: Vec<ExecTodoItem>,
        },
        Error {
            #[serde(default)]
            id: String,
            #[serde(default)]
            message: String,
        },
        #[serde(other)]
        Unknown,
    }

    #[derive(Deserialize)]
    pub(super) struct ExecFileChange {
        #[serde(default)]
        path: String,
    }

    #[derive(Deserialize)]
    pub(super) struct ExecTodoItem {
        #[serde(default)]
        text: String,
        #[serde(default)]
        completed: bool,
    }

    impl Line {
        pub(super) fn into_event(self) -> Event {
            match self {
                Line::ThreadStarted { thread_id } => Event::ThreadStarted { thread_id },
                Line::TurnStarted => Event::TurnStarted,
                Line::TurnCompleted { usage } => Event::TurnCompleted { usage },
                Line::TurnFailed { error } => Event::TurnFailed {
                    message: error.and_then(|e| e.message),
                    reason: Unfinished::Failed,
                },
                Line::ItemStarted { item } => Event::ItemStarted { item: item.into() },
                Line::ItemUpdated { item } => Event::ItemUpdated { item: item.into() },
                Line::ItemCompleted { item } => Event::ItemCompleted { item: item.into() },
                // exec prints a retry as an `error` whose text says so: read here, once, into
                // the variant both backends report (nothing downstream reads an error's text
                // for it)
                Line::Error { message } if is_transient(&message) => Event::Retrying { message },
                Line::Error { message } => Event::Error { message },
            }
        }
    }

    /// Is exec's top-level `error` line a transient retry notice rather than a failure?
    fn is_transient(message: &str) -> bool {
        message.trim_start().starts_with("Reconnecting")
    }

    impl From<ExecItem> for Item {
        fn from(i: ExecItem) -> Item {
            match i {
                ExecItem::AgentMessage { id, text } => Item::AgentMessage { id, text },
                ExecItem::Reasoning { id } => Item::Reasoning { id },
                ExecItem::CommandExecution {
                    id,
                    command,
                    exit_code,
                    status,
                } => Item::CommandExecution {
                    id,
                    command,
                    exit_code,
                    status,
                },
                ExecItem::FileChange {
                    id,
                    changes,
                    status,
                } => Item::FileChange {
                    id,
                    changes: changes
                        .into_iter()
                        .map(|c| FileChange { path: c.path })
                        .collect(),
                    status,
                },
                ExecItem::McpToolCall {
                    id,
                    server,
                    tool,
                    status,
                } => Item::McpToolCall {
                    id,
                    server,
                    tool,
                    status,
                },
                ExecItem::WebSearch { id, query } => Item::WebSearch { id, query },
                ExecItem::TodoList { id, items } => Item::TodoList {
                    id,
                    items: items
                        .into_iter()
                        .map(|t| TodoItem {
                            text: t.text,
                            completed: t.completed,
                        })
                        .collect(),
                },
                ExecItem::Error { id, message } => Item::Error { id, message },
                ExecItem::Unknown => Item::Unknown,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(line: &str) -> Event {
        match parse_line(line) {
            Parsed::Event(e) => e,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn a_plain_turn_parses_into_a_transcript() {
        let lines = [
            r#"{"type":"thread.started","thread_id":"550e8400-e29b-41d4-a716-446655440000"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"hm"}}"#,
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":5,"reasoning_output_tokens":0}}"#,
        ];
        let mut t = Transcript::default();
        for l in lines {
            t.apply(&parse_line(l));
        }
        assert_eq!(
            t.thread_id.map(|t| t.to_arg()).as_deref(),
            Some("550e8400-e29b-41d4-a716-446655440000")
        );
        assert_eq!(t.last_message.as_deref(), Some("done"));
        assert_eq!(
            t.commands,
            vec![CommandRun {
                command: "bash -lc ls".into(),
                exit_code: Some(0),
                status: ItemStatus::Completed
            }]
        );
        assert_eq!(t.files_changed, vec!["src/a.rs".to_string()]);
        assert_eq!(t.thread_usage.unwrap().input_tokens, 10);
        assert!(t.turn_completed && t.failure.is_none());
        assert_eq!((t.unknown_events, t.malformed_lines), (0, 0));
    }

    #[test]
    fn a_command_that_did_not_run_is_never_told_as_run() {
        let told = |status: &str, exit: &str| {
            let line = format!(
                r#"{{"type":"item.completed","item":{{"id":"i","type":"command_execution","command":"touch x","aggregated_output":"","exit_code":{exit},"status":"{status}"}}}}"#
            );
            describe(&ev(&line)).unwrap()
        };
        assert_eq!(told("declined", "null"), "declined: touch x");
        assert_eq!(told("failed", "null"), "not run: touch x");
        assert_eq!(told("failed", "1"), "ran: touch x (exit 1)");
        assert_eq!(told("completed", "0"), "ran: touch x (exit 0)");
    }

    #[test]
    fn an_items_state_is_typed_and_a_state_this_version_does_not_know_is_unknown() {
        for (spelled, want) in [
            ("in_progress", ItemStatus::InProgress),
            ("completed", ItemStatus::Completed),
            ("failed", ItemStatus::Failed),
            ("declined", ItemStatus::Declined),
            ("paused", ItemStatus::Unknown),
        ] {
            let line = format!(
                r#"{{"type":"item.completed","item":{{"id":"i","type":"command_execution","command":"ls","aggregated_output":"big","exit_code":0,"status":"{spelled}"}}}}"#
            );
            let Event::ItemCompleted {
                item: Item::CommandExecution { status, .. },
            } = ev(&line)
            else {
                panic!("{line}");
            };
            assert_eq!(status, want, "{spelled}");
            if want != ItemStatus::Unknown {
                assert_eq!(status.as_str(), spelled);
            }
        }
        // none given: unknown, and the line still counts as the item it is
        let Event::ItemCompleted {
            item: Item::FileChange {
                status, changes, ..
            },
        } = ev(
            r#"{"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"a","kind":"add"}]}}"#,
        )
        else {
            panic!("a file change");
        };
        assert_eq!(
            (status, changes[0].path.as_str()),
            (ItemStatus::Unknown, "a")
        );
        assert_eq!(
            serde_json::to_value(ItemStatus::InProgress).unwrap(),
            serde_json::json!("in_progress")
        );
    }

    #[test]
    fn unknown_types_are_counted_and_garbage_is_malformed() {
        let mut t = Transcript::default();
        t.apply(&parse_line(r#"{"type":"thread.archived","x":1}"#));
        t.apply(&parse_line(
            r#"{"type":"item.completed","item":{"type":"hologram","id":"i"}}"#,
        ));
        t.apply(&parse_line("not json"));
        t.apply(&parse_line(r#"{"no_type":1}"#));
        t.apply(&parse_line(""));
        assert_eq!(t.unknown_events, 2);
        assert_eq!(t.malformed_lines, 3);
    }

    #[test]
    fn transient_errors_are_retries_and_terminal_ones_failures() {
        let mut t = Transcript::default();
        t.apply_event(&ev(
            r#"{"type":"error","message":"Reconnecting... 2/5 (stream disconnected)"}"#,
        ));
        assert_eq!((t.retries, t.failure.is_none()), (1, true));
        t.apply_event(&ev(
            r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}"#,
        ));
        assert_eq!(classify(t.failure.as_deref().unwrap()), FailureKind::Auth);
    }

    #[test]
    fn a_thread_id_that_is_not_a_uuid_gives_no_thread() {
        let mut t = Transcript::default();
        for bad in ["--last", "550e8400e29b41d4a716446655440000", ""] {
            let line = format!(r#"{{"type":"thread.started","thread_id":"{bad}"}}"#);
            t.apply(&parse_line(&line));
        }
        assert_eq!((t.thread_id, t.unknown_events), (None, 3));
    }

    #[test]
    fn a_retry_is_a_variant_whatever_its_message_says() {
        // the app-server's `willRetry` error: its text is not searched
        let retry = Event::Retrying {
            message: "stream disconnected".into(),
        };
        let mut t = Transcript::default();
        t.apply_event(&retry);
        assert_eq!((t.retries, t.failure.is_none()), (1, true));
        assert_eq!(
            describe(&retry).as_deref(),
            Some("retrying: stream disconnected")
        );
        // and no JSONL line reads as one: exec's wire has no such type
        assert!(!matches!(
            parse_line(r#"{"type":"retrying","message":"x"}"#),
            Parsed::Event(_)
        ));
        // exec's retry notice is read into the variant once, where its line is parsed
        assert_eq!(
            parse_line(r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}"#),
            Parsed::Event(Event::Retrying {
                message: "Reconnecting... 1/5 (stream disconnected)".into()
            })
        );
    }

    #[test]
    fn a_failed_turn_carries_codexs_message_and_how_it_ended_and_no_text_of_ours() {
        let failed = ev(r#"{"type":"turn.failed","error":{"message":"quota exceeded"}}"#);
        assert_eq!(
            failed,
            Event::TurnFailed {
                message: Some("quota exceeded".into()),
                reason: Unfinished::Failed
            }
        );
        let mut t = Transcript::default();
        t.apply_event(&failed);
        assert_eq!(
            (t.failure.as_deref(), t.ended),
            (Some("quota exceeded"), Some(Unfinished::Failed))
        );
        // no message from codex: none is made up, the ending is still typed
        for line in [
            r#"{"type":"turn.failed"}"#,
            r#"{"type":"turn.failed","error":{}}"#,
        ] {
            let mut t = Transcript::default();
            t.apply(&parse_line(line));
            assert_eq!(
                (t.failure, t.ended),
                (None, Some(Unfinished::Failed)),
                "{line}"
            );
        }
        let mut t = Transcript::default();
        t.apply_event(&Event::TurnFailed {
            message: None,
            reason: Unfinished::Interrupted,
        });
        assert_eq!((t.failure, t.ended), (None, Some(Unfinished::Interrupted)));
        assert!(!t.turn_completed);
    }

    #[test]
    fn failures_are_classified() {
        assert_eq!(
            classify("exceeded your current quota"),
            FailureKind::RateLimit
        );
        assert_eq!(classify("429 Too Many Requests"), FailureKind::RateLimit);
        assert_eq!(
            classify("Your input exceeds the context window"),
            FailureKind::ContextLength
        );
        assert_eq!(
            classify("We're currently experiencing high demand"),
            FailureKind::TurnFailed
        );
    }

    #[test]
    fn usage_deltas_turn_running_totals_into_per_turn_figures() {
        let a = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Default::default()
        };
        let b = Usage {
            input_tokens: 25,
            output_tokens: 9,
            cached_input_tokens: 3,
            ..Default::default()
        };
        assert_eq!(
            b.delta(&a),
            Usage {
                input_tokens: 15,
                output_tokens: 4,
                cached_input_tokens: 3,
                ..Default::default()
            }
        );
        assert_eq!(a.delta(&b), Usage::default());
    }

    #[test]
    fn progress_descriptions_say_what_codex_does() {
        let e = ev(
            r#"{"type":"item.started","item":{"id":"i","type":"command_execution","command":"cargo test","status":"in_progress"}}"#,
        );
        assert_eq!(describe(&e).as_deref(), Some("running: cargo test"));
        let e = ev(
            r#"{"type":"item.started","item":{"id":"i","type":"file_change","changes":[{"path":"src/lib.rs","kind":"update"}]}}"#,
        );
        assert_eq!(describe(&e).as_deref(), Some("editing src/lib.rs"));
        assert_eq!(describe(&Event::TurnStarted).as_deref(), Some("thinking"));
    }
}
