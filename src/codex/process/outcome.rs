//! Judging and shaping a finished turn: how it ended, and its redacted output.

use std::time::Duration;

use super::turn::{Containment, Ending, ExecExit, RunOptions, TurnOutcome};
use crate::codex::events::{CommandRun, FailureKind, Transcript, Unfinished, classify};
use crate::security::redact::ClientSecrets;

/// The failure codex itself reported during the turn: its own message, redacted and
/// classified; else, when it ended the turn without completing it and gave no message, that
/// ending, decided by its type (the bridge's sentence for it is never classified).
fn reported_failure(t: &Transcript, secrets: &ClientSecrets) -> Option<Ending> {
    if let Some(msg) = &t.failure {
        let msg = secrets.redact(msg).into_owned();
        return Some(Ending::Failed {
            kind: classify(&msg),
            message: msg,
        });
    }
    t.ended.map(|end| Ending::Failed {
        kind: FailureKind::TurnFailed,
        message: match end {
            Unfinished::Failed => "codex ended the turn as failed and gave no reason",
            Unfinished::Interrupted => "codex ended the turn as interrupted",
            Unfinished::Unknown => "codex ended the turn in a state this bridge does not know",
        }
        .into(),
    })
}

/// Decide how a warm turn went once codex ended it (`turn/completed`): the failure codex
/// reported, else whether it completed. There is no exit status or stderr to read: the
/// app-server process lives on and serves the next turn.
pub(super) fn judge_warm(t: &Transcript, secrets: &ClientSecrets) -> Ending {
    if let Some(failed) = reported_failure(t, secrets) {
        return failed;
    }
    if t.turn_completed {
        Ending::Completed
    } else {
        Ending::Failed {
            kind: FailureKind::TurnFailed,
            message: "codex app-server ended the turn without completing it".into(),
        }
    }
}

/// Decide how an exec turn whose stdout ended and whose process exited went.
pub(super) fn judge(
    t: &Transcript,
    exit_code: Option<i32>,
    stderr_tail: &str,
    secrets: &ClientSecrets,
) -> Ending {
    if let Some(failed) = reported_failure(t, secrets) {
        return failed;
    }
    match exit_code {
        Some(0) if t.turn_completed => Ending::Completed,
        Some(0) => Ending::Failed {
            kind: FailureKind::Crashed,
            message: with_stderr("codex exited without completing the turn", stderr_tail),
        },
        code => {
            let status = code.map_or("was killed by a signal".to_owned(), |c| {
                format!("exited with status {c}")
            });
            if stderr_tail.trim().is_empty() && t.last_message.is_none() {
                Ending::Failed {
                    kind: FailureKind::Crashed,
                    message: format!("codex {status} and printed nothing"),
                }
            } else {
                let kind = match classify(stderr_tail) {
                    FailureKind::TurnFailed => FailureKind::Crashed,
                    k => k,
                };
                Ending::Failed {
                    kind,
                    message: with_stderr(&format!("codex {status}"), stderr_tail),
                }
            }
        }
    }
}

/// Most stderr quoted in an error message.
const STDERR_IN_ERRORS: usize = 2000;

fn with_stderr(what: &str, stderr_tail: &str) -> String {
    let tail = stderr_tail.trim();
    if tail.is_empty() {
        return what.to_owned();
    }
    let start = tail.len().saturating_sub(STDERR_IN_ERRORS);
    let start = (start..tail.len())
        .find(|i| tail.is_char_boundary(*i))
        .unwrap_or(tail.len());
    format!("{what}: {}", &tail[start..])
}

/// A finished turn: how it ended and its redacted output; `exec` is what only an exec turn's
/// process tells (`None` for a warm turn).
pub(super) fn finish(
    ending: Ending,
    t: Transcript,
    opts: &RunOptions,
    duration: Duration,
    exec: Option<ExecExit>,
    containment: Containment,
) -> TurnOutcome {
    TurnOutcome {
        ending,
        thread_id: t.thread_id,
        message: t.last_message.map(|m| opts.secrets.redact(&m).into_owned()),
        turn_usage: t.thread_usage.map(|u| u.delta(&opts.prior_thread_usage)),
        thread_usage: t.thread_usage,
        commands: t
            .commands
            .into_iter()
            .map(|c| CommandRun {
                command: opts.secrets.redact(&c.command).into_owned(),
                ..c
            })
            .collect(),
        files_changed: t
            .files_changed
            .iter()
            .map(|f| opts.secrets.redact(f).into_owned())
            .collect(),
        duration,
        exec,
        unknown_events: t.unknown_events,
        malformed_lines: t.malformed_lines,
        retries: t.retries,
        containment,
        approvals: Vec::new(),
        steered: Vec::new(),
        recorded: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ending_reads_as_a_sentence_in_the_log() {
        let failed = Ending::Failed {
            kind: FailureKind::TurnFailed,
            message: "the mock refuses".into(),
        };
        assert_eq!(
            failed.to_string(),
            "failed (codex turn failed): the mock refuses"
        );
        let after = Duration::from_secs(3);
        assert_eq!(Ending::TimedOut { after }.to_string(), "timed out after 3s");
        assert_eq!(Ending::Completed.to_string(), "completed");
    }

    #[test]
    fn a_warm_turn_is_judged_by_what_codex_reported_with_no_exit_status() {
        let none = ClientSecrets::default();
        let mut t = Transcript::default();
        t.apply_event(&crate::codex::events::Event::Retrying {
            message: "stream disconnected".into(),
        });
        t.turn_completed = true;
        assert_eq!(
            judge_warm(&t, &none),
            Ending::Completed,
            "a retry is no failure"
        );
        assert_eq!(t.retries, 1);
        t.failure = Some("rate limit reached".into());
        assert!(matches!(
            judge_warm(&t, &none),
            Ending::Failed {
                kind: FailureKind::RateLimit,
                ..
            }
        ));
        let ended = Transcript::default();
        assert!(matches!(
            judge_warm(&ended, &none),
            Ending::Failed {
                kind: FailureKind::TurnFailed,
                ..
            }
        ));
    }

    #[test]
    fn a_turn_codex_ended_without_a_message_is_judged_by_how_it_ended() {
        use crate::codex::events::Event;
        let none = ClientSecrets::default();
        for (reason, says) in [
            (Unfinished::Interrupted, "interrupted"),
            (Unfinished::Failed, "failed"),
            (Unfinished::Unknown, "does not know"),
        ] {
            let mut t = Transcript::default();
            t.apply_event(&Event::TurnFailed {
                message: None,
                reason,
            });
            match judge_warm(&t, &none) {
                Ending::Failed {
                    kind: FailureKind::TurnFailed,
                    message,
                } => assert!(message.contains(says), "{message}"),
                other => panic!("{other:?}"),
            }
            // the same on exec, whatever the exit status
            assert!(matches!(
                judge(&t, Some(0), "", &none),
                Ending::Failed {
                    kind: FailureKind::TurnFailed,
                    ..
                }
            ));
        }
        // codex's own text is still classified
        let mut t = Transcript::default();
        t.apply_event(&Event::TurnFailed {
            message: Some("429 Too Many Requests".into()),
            reason: Unfinished::Interrupted,
        });
        assert!(matches!(
            judge_warm(&t, &none),
            Ending::Failed {
                kind: FailureKind::RateLimit,
                ..
            }
        ));
    }

    #[test]
    fn judge_classifies_endings() {
        let mut t = Transcript {
            turn_completed: true,
            ..Default::default()
        };
        assert_eq!(
            judge(&t, Some(0), "", &ClientSecrets::default()),
            Ending::Completed
        );
        t.turn_completed = false;
        assert!(matches!(
            judge(&t, Some(0), "", &ClientSecrets::default()),
            Ending::Failed {
                kind: FailureKind::Crashed,
                ..
            }
        ));
        let e = judge(&t, Some(1), "", &ClientSecrets::default());
        assert_eq!(
            e,
            Ending::Failed {
                kind: FailureKind::Crashed,
                message: "codex exited with status 1 and printed nothing".into()
            }
        );
        let e = judge(
            &t,
            Some(1),
            "Error: 401 Unauthorized",
            &ClientSecrets::default(),
        );
        assert!(matches!(
            e,
            Ending::Failed {
                kind: FailureKind::Auth,
                ..
            }
        ));
        t.failure = Some("exceeded your current quota".into());
        assert!(matches!(
            judge(&t, Some(1), "", &ClientSecrets::default()),
            Ending::Failed {
                kind: FailureKind::RateLimit,
                ..
            }
        ));
    }
}
