//! An app-server item, and the end of its turn, as the bridge's own turn events (pure), every
//! field taken from what codex sent (nothing is made up for what the app-server does not
//! report), so a warm turn folds into the same [`crate::codex::events::Transcript`] and shows
//! the same progress lines, results and redaction as an exec turn.

#[cfg(test)]
use super::protocol::{AnnouncedChange, AnnouncedKind, ItemStatus, UnreadableChange};
use super::protocol::{Item, TokenUsage, TurnStatus};
use crate::codex::events::{self, Event, Unfinished, Usage};

/// The bridge's item of an app-server item; `None` for items the bridge does not report (user
/// messages, and kinds it does not read).
pub fn item(item: &Item) -> Option<events::Item> {
    Some(match item {
        Item::AgentMessage { id, text } => events::Item::AgentMessage {
            id: id.clone(),
            text: text.clone(),
        },
        Item::CommandExecution {
            id,
            command,
            status,
            exit_code,
        } => events::Item::CommandExecution {
            id: id.clone(),
            command: command.clone(),
            exit_code: *exit_code,
            status: *status,
        },
        Item::FileChange { id, status, .. } => events::Item::FileChange {
            id: id.clone(),
            changes: item
                .paths()
                .map(|p| events::FileChange { path: p.to_owned() })
                .collect(),
            status: *status,
        },
        Item::Other { kind, id } if kind == "reasoning" => {
            events::Item::Reasoning { id: id.clone() }
        }
        Item::Other { .. } => return None,
    })
}

/// `item/started` as [`Event::ItemStarted`].
pub fn started(i: &Item) -> Option<Event> {
    item(i).map(|item| Event::ItemStarted { item })
}

/// `item/completed` as [`Event::ItemCompleted`].
pub fn completed(i: &Item) -> Option<Event> {
    item(i).map(|item| Event::ItemCompleted { item })
}

/// A `thread/tokenUsage/updated` count as the bridge's [`Usage`].
pub fn usage(t: &TokenUsage) -> Usage {
    Usage {
        input_tokens: t.input,
        cached_input_tokens: t.cached_input,
        // the app-server does not report it; 0 (not absent) because `Usage` is the shape every
        // result, its schema and the stored session show, where the field is a number
        cache_write_input_tokens: 0,
        output_tokens: t.output,
        reasoning_output_tokens: t.reasoning_output,
    }
}

/// `turn/completed` as the turn's last event: [`Event::TurnCompleted`] with the thread's
/// `usage` for status `completed`, else [`Event::TurnFailed`] with the status as a [`Unfinished`]
/// and codex's own error text, when it gave one.
pub fn turn_completed(status: TurnStatus, error: Option<&str>, usage: Usage) -> Event {
    let reason = match status {
        TurnStatus::Completed => return Event::TurnCompleted { usage },
        TurnStatus::Failed => Unfinished::Failed,
        TurnStatus::Interrupted => Unfinished::Interrupted,
        TurnStatus::InProgress | TurnStatus::Unknown => Unfinished::Unknown,
    };
    Event::TurnFailed {
        message: error.map(str::to_owned),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::events::{Transcript, describe};

    #[test]
    fn warm_items_fold_and_read_like_exec_items() {
        let cmd = Item::CommandExecution {
            id: "c".into(),
            command: "ls -la".into(),
            status: ItemStatus::Completed,
            exit_code: Some(0),
        };
        let msg = Item::AgentMessage {
            id: "m".into(),
            text: "done".into(),
        };
        let edit = Item::FileChange {
            id: "f".into(),
            status: ItemStatus::Completed,
            changes: vec![Ok(AnnouncedChange {
                path: "a.rs".into(),
                kind: AnnouncedKind {
                    kind: "add".into(),
                    move_path: None,
                },
                diff: "x\n".into(),
            })],
        };
        let mut t = Transcript::default();
        for i in [&cmd, &edit, &msg] {
            t.apply_event(&completed(i).unwrap());
        }
        assert_eq!(t.last_message.as_deref(), Some("done"));
        assert_eq!(t.commands[0].command, "ls -la");
        assert_eq!(t.commands[0].status, ItemStatus::Completed);
        assert_eq!(t.files_changed, vec!["a.rs".to_owned()]);
        // a change whose content codex did not announce as a change still names its file
        let unread = Item::FileChange {
            id: "g".into(),
            status: ItemStatus::Completed,
            changes: vec![Err(UnreadableChange {
                path: "b.rs".into(),
                reason: "missing field `diff`".into(),
            })],
        };
        t.apply_event(&completed(&unread).unwrap());
        assert_eq!(t.files_changed, vec!["a.rs".to_owned(), "b.rs".to_owned()]);
        assert_eq!(
            describe(&started(&cmd).unwrap()).as_deref(),
            Some("running: ls -la")
        );
        assert_eq!(
            describe(&completed(&cmd).unwrap()).as_deref(),
            Some("ran: ls -la (exit 0)")
        );
        // a declined command (0.171.0's and 0.145.0's item shape): never "ran"
        let declined = Item::CommandExecution {
            id: "call_2".into(),
            command: "/bin/bash -lc 'echo hi > out.txt'".into(),
            status: ItemStatus::Declined,
            exit_code: None,
        };
        assert_eq!(
            describe(&completed(&declined).unwrap()).as_deref(),
            Some("declined: /bin/bash -lc 'echo hi > out.txt'")
        );
        let user = Item::Other {
            kind: "userMessage".into(),
            id: "u".into(),
        };
        assert!(completed(&user).is_none());
    }

    #[test]
    fn usage_maps_every_count() {
        let u = usage(&TokenUsage {
            input: 10,
            cached_input: 2,
            output: 5,
            reasoning_output: 1,
            total: 15,
        });
        assert_eq!(
            (
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.reasoning_output_tokens
            ),
            (10, 2, 5, 1)
        );
    }

    #[test]
    fn a_turns_status_is_its_typed_ending_and_no_message_is_made_up() {
        let usage = Usage {
            input_tokens: 3,
            ..Default::default()
        };
        assert_eq!(
            turn_completed(TurnStatus::Completed, None, usage),
            Event::TurnCompleted { usage }
        );
        for (status, reason) in [
            (TurnStatus::Failed, Unfinished::Failed),
            (TurnStatus::Interrupted, Unfinished::Interrupted),
            (TurnStatus::InProgress, Unfinished::Unknown),
            (TurnStatus::Unknown, Unfinished::Unknown),
        ] {
            assert_eq!(
                turn_completed(status, None, usage),
                Event::TurnFailed {
                    message: None,
                    reason
                }
            );
        }
        assert_eq!(
            turn_completed(TurnStatus::Failed, Some("401 Unauthorized"), usage),
            Event::TurnFailed {
                message: Some("401 Unauthorized".into()),
                reason: Unfinished::Failed
            }
        );
    }
}
