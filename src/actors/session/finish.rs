//! A finished turn folded into the session's record (usage, turn count, status) after what
//! codex recorded of it is checked against what was asked ([`check_recorded`]: a mismatch fails
//! the turn closed), flushed before the caller is answered.

use super::message::{CallMeta, Finished};
use super::state::{RolloutMark, SessionState};
use crate::calls::Answer;
use crate::codex::events::FailureKind;
use crate::codex::process::{Ending, TurnOutcome};
use crate::codex::rollout::TurnContext;
use crate::error::{Error, Result};
use crate::plan::values::SandboxLevel;
use crate::security::ids::SessionId;
use crate::security::redact::redact;
use crate::store::{SessionRecord, TurnStatus, now_ms};
use std::time::Duration;
use tokio::sync::oneshot;

/// Check what codex recorded against what was asked ([`crate::codex::applied`]: approval
/// `never`, reviewer `user`, and the sandbox level). A mismatch fails the call closed.
pub fn check_recorded(
    asked: SandboxLevel,
    recorded: &TurnContext,
    may_ask: bool,
) -> std::result::Result<(), String> {
    use crate::codex::applied::{Applied, ApprovalsAsked, Asked, differences};
    // `on-request` only for a turn whose questions go to the person who started it
    let wanted = Asked {
        sandbox: asked,
        approvals: if may_ask {
            ApprovalsAsked::NeverOrOnRequest
        } else {
            ApprovalsAsked::Never
        },
        cwd: None,
    };
    let applied = Applied {
        sandbox_matches: recorded.sandbox == asked.as_arg(),
        sandbox: &recorded.sandbox,
        approval_policy: &recorded.approval_policy,
        approvals_reviewer: &recorded.approvals_reviewer,
        cwd: None,
    };
    if differences(&wanted, &applied).is_empty() {
        Ok(())
    } else {
        Err(format!(
            "codex ran this turn with sandbox `{}`, approval `{}`, reviewer `{}`, but the bridge asked \
             for sandbox `{}`, approval `{}`, reviewer `user`; the result is withheld",
            recorded.sandbox,
            recorded.approval_policy,
            recorded.approvals_reviewer,
            asked.as_arg(),
            if may_ask {
                "never` or `on-request"
            } else {
                "never"
            }
        ))
    }
}

/// Fold a finished turn into the record, store it (flushed), and answer the caller.
pub(super) async fn fold_turn(
    st: &mut SessionState,
    f: Finished,
    reply: Option<oneshot::Sender<Result<Answer>>>,
) {
    let store = &st.shared.store;
    // the warm app-server stays on record (for the crash sweep) while the backend keeps it
    if !f.backend.as_ref().is_some_and(|b| b.holds_process()) {
        let _ = crate::actors::inflight::off_record(store, &st.id);
    }
    if f.backend.is_some() {
        st.backend = f.backend;
    }
    let Some(rec) = st.record.as_mut() else {
        if let Some(r) = reply {
            let _ = r.send(Err(Error::SessionFailed(
                "the session was closed during the turn".into(),
            )));
        }
        return;
    };
    let report = match f.result {
        Err(e) => {
            rec.last_status = Some(match e {
                Error::Cancelled { .. } => TurnStatus::Cancelled,
                _ => TurnStatus::Failed,
            });
            rec.last_error = Some(redact(&e.to_string()).into_owned());
            rec.last_response = None;
            Err(e)
        }
        Ok(ran) => Ok(fold(rec, &st.id, &f.call, f.queued, ran)),
    };
    rec.last_used_ms = now_ms();
    // the thread's rollout as this turn left it (see `prepare::handed_back`)
    st.rollout = rec
        .thread_id
        .and_then(|t| mark_after(rec.codex_home.as_deref(), &t, st.rollout.take()));
    let saved = store.put(rec).and(store.flush().await);
    let answer = match (report, saved) {
        (Ok(a), Ok(())) => Ok(a),
        (Ok(_), Err(e)) => Err(e.into()),
        (Err(e), _) => Err(e),
    };
    if let Some(r) = reply {
        let _ = r.send(answer);
    }
}

/// The mark of `thread`'s rollout now: the file of the session's last mark when it is that
/// thread's, else found in `codex_home` (once per thread and actor).
fn mark_after(
    codex_home: Option<&str>,
    thread: &crate::security::ids::ThreadId,
    last: Option<RolloutMark>,
) -> Option<RolloutMark> {
    let path = match last {
        Some(m) if m.path.to_string_lossy().contains(&thread.to_arg()) => m.path,
        _ => crate::codex::rollout::find_rollout(std::path::Path::new(codex_home?), thread)?,
    };
    RolloutMark::of(path)
}

/// Fold a turn codex ran into the session's record (after checking what codex recorded of it
/// against what was asked: a mismatch fails the turn closed) and make the caller's report.
pub(super) fn fold(
    rec: &mut SessionRecord,
    id: &SessionId,
    call: &CallMeta,
    queued: Duration,
    mut outcome: TurnOutcome,
) -> Answer {
    // a person could be asked only on the app-server: a turn the warm backend handed to
    // `codex exec` is held to `never`, whatever was planned
    let may_ask = call.may_ask && !outcome.ran_with_exec();
    if let (Ending::Completed, Some(ctx)) = (&outcome.ending, &outcome.recorded)
        && let Err(msg) = check_recorded(call.sandbox, ctx, may_ask)
    {
        tracing::error!(session = %id, "{msg}");
        // withheld: what a turn under another policy answered is not passed on
        outcome.message = None;
        outcome.ending = Ending::Failed {
            kind: FailureKind::PolicyMismatch,
            message: msg,
        };
    }
    if let Some(t) = outcome.thread_id {
        if call.reset || rec.thread_id != Some(t) {
            rec.thread_usage = Default::default();
        }
        rec.thread_id = Some(t);
    }
    if let Some(u) = outcome.turn_usage {
        rec.usage = rec.usage.plus(&u);
    }
    if let Some(u) = outcome.thread_usage {
        rec.thread_usage = u;
    }
    // the model codex ran with, as it recorded it (an operator override or codex's own
    // config may have chosen it), else the one asked for
    let model = outcome
        .recorded
        .as_ref()
        .and_then(|r| r.model.clone())
        .or_else(|| call.model.as_ref().map(ToString::to_string));
    if let Some(m) = &model {
        rec.model = Some(m.clone());
    }
    rec.turn_count += 1;
    rec.last_status = Some(match &outcome.ending {
        Ending::Completed => TurnStatus::Completed,
        Ending::TimedOut { .. } => TurnStatus::TimedOut,
        Ending::Cancelled => TurnStatus::Cancelled,
        Ending::Failed { .. } | Ending::OutputCapExceeded { .. } => TurnStatus::Failed,
    });
    rec.last_response = outcome.message.as_ref().map(|m| {
        let cut: String = m.chars().take(crate::store::LAST_RESPONSE_CHARS).collect();
        redact(&cut).into_owned()
    });
    rec.last_error = match &outcome.ending {
        Ending::Completed => None,
        Ending::Failed { message, .. } => Some(message.chars().take(500).collect()),
        other => Some(other.to_string()),
    };
    Answer {
        session_id: Some(id.clone()),
        resumed: call.resumed,
        created: call.created,
        ..Answer::of(outcome, queued, call.sandbox, model)
    }
}
