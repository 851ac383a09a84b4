//! `steer`: a message handed to the running warm turn, for the client that started it only.

use super::state::{Phase, SessionState};
use crate::actors::client::ClientContext;
use crate::codex::events::FailureKind;
use crate::codex::process::Steer;
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a steer waits for codex to take it (codex answers `turn/steer` within
/// `STEER_TIMEOUT`; this bounds the way there).
pub(super) const STEER_WAIT: Duration = Duration::from_secs(30);

/// Add `text` to the running turn, for the client that started it. Refused at once when no
/// turn runs, when it runs with `codex exec` (which cannot take a message mid-turn), when
/// another client asks, or when codex has not started it yet; answered once codex took it.
pub(super) fn steer(
    st: &mut SessionState,
    text: crate::security::prompt::Prompt,
    client: &Arc<ClientContext>,
    reply: oneshot::Sender<Result<()>>,
) {
    let refused = |why: String| Err(Error::invalid("sessionId", why));
    let (running, steer) = match &st.phase {
        Phase::Turn { steer, .. } => (true, steer.as_ref()),
        _ => (false, None),
    };
    let inbox = match (running, steer) {
        (false, _) => {
            let _ = reply.send(refused(format!(
                "no turn is running on session {}; send the message as a new turn with the \
                 `codex` tool",
                st.id
            )));
            return;
        }
        (true, None) => {
            let _ = reply.send(refused(format!(
                "session {}'s running turn runs with `codex exec` (the exec backend, image \
                 attachments, or every warm process busy), which cannot take a message \
                 mid-turn; wait for it or cancel it",
                st.id
            )));
            return;
        }
        (true, Some(inbox)) if inbox.client.id != client.id => {
            let _ = reply.send(refused(format!(
                "session {}'s running turn was started by another MCP client; only that client \
                 can steer it",
                st.id
            )));
            return;
        }
        (true, Some(inbox)) if !inbox.running => {
            let _ = reply.send(refused(format!(
                "session {}'s turn has not started in codex yet (it waits for a codex slot or \
                 its process); try again in a moment",
                st.id
            )));
            return;
        }
        (true, Some(inbox)) => &inbox.tx,
    };
    let (taken, answer) = oneshot::channel();
    if inbox.send(Steer { text, reply: taken }).is_err() {
        let _ = reply.send(Err(Error::invalid(
            "sessionId",
            "the turn ended before the message reached it; send it as a new turn",
        )));
        return;
    }
    tokio::spawn(async move {
        // bounded: the drive loop answers within `STEER_TIMEOUT` once it reads the message
        // (one it has not read when this gives up is dropped with `answer`, not sent)
        let answer = match tokio::time::timeout(STEER_WAIT, answer).await {
            Ok(a) => a,
            Err(_) => {
                let _ = reply.send(Err(Error::Busy(format!(
                    "codex did not take the message within {}s; it was not added",
                    STEER_WAIT.as_secs()
                ))));
                return;
            }
        };
        let _ = reply.send(match answer {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(Error::Codex {
                kind: FailureKind::TurnFailed,
                message,
            }),
            Err(_) => Err(Error::invalid(
                "sessionId",
                "the turn ended before the message reached it; send it as a new turn",
            )),
        });
    });
}
