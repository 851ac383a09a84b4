//! The session's queue of waiting calls: arrival order, `max_queued_turns` and
//! `max_queued_prompt_bytes`, and callers that gave up answered and dropped.

use super::state::SessionState;
use crate::calls::Answer;
use crate::calls::TurnCall;
use crate::error::{Error, Result};
use std::time::Instant;
use tokio::sync::oneshot;

/// A call on a busy session: queued behind the running turn, or refused when it asked not to
/// wait, or when the session's queue is full (`max_queued_turns` calls, or
/// `max_queued_prompt_bytes` of prompts held by them): the running turn and the waiting calls
/// go on.
pub(super) fn queue(
    st: &mut SessionState,
    call: Box<TurnCall>,
    reply: oneshot::Sender<Result<Answer>>,
) {
    if call.wait_if_busy {
        // calls whose callers gave up are answered and dropped now, prompts and all: a caller
        // that queues and cancels over and over holds nothing
        for (c, r, since) in std::mem::take(&mut st.pending) {
            if c.cancel.is_cancelled() {
                let _ = r.send(Err(Error::Cancelled { partial: None }));
            } else {
                st.pending.push_back((c, r, since));
            }
        }
        let config = &st.shared.config;
        let (count, held) = st
            .pending
            .iter()
            .fold((0usize, 0usize), |(n, b), (c, _, _)| {
                (n + 1, b.saturating_add(held_bytes(c)))
            });
        let full = if count >= config.max_queued_turns {
            Some(format!(
                "{count} call(s) wait already (max_queued_turns = {}, \
                 CODEX_BRIDGE_MAX_QUEUED_TURNS)",
                config.max_queued_turns
            ))
        } else if held.saturating_add(held_bytes(&call)) > config.max_queued_prompt_bytes {
            Some(format!(
                "the waiting calls hold {held} bytes of prompt and this one {} more \
                 (max_queued_prompt_bytes = {}, CODEX_BRIDGE_MAX_QUEUED_PROMPT_BYTES)",
                held_bytes(&call),
                config.max_queued_prompt_bytes
            ))
        } else {
            None
        };
        if let Some(why) = full {
            tracing::info!(session = %st.id, "refused a call: the session's queue is full");
            let _ = reply.send(Err(Error::Busy(format!(
                "session {} is busy and its queue is full: {why}; retry once a turn has ended",
                st.id
            ))));
            return;
        }
        if let Some(p) = &call.progress {
            p(format!(
                "queued behind {} turn(s) on this session",
                st.pending.len() + 1
            ));
        }
        st.pending.push_back((call, reply, Instant::now()));
    } else {
        let _ = reply.send(Err(Error::Busy(format!(
            "session {} is busy with another turn; retry later or pass waitIfBusy: true",
            st.id
        ))));
    }
}

/// What a waiting call holds in memory, for `max_queued_prompt_bytes`: its prompt and the
/// names of its files (attached only when its turn starts).
pub(super) fn held_bytes(call: &TurnCall) -> usize {
    call.files
        .iter()
        .fold(call.prompt.as_ref().map_or(0, |p| p.len()), |n, f| {
            n.saturating_add(f.len())
        })
}
