//! `forkSession`: the thread copied into a new session by the driver (a one-off app-server on
//! the real one), in a task the actor owns (aborted with its state); turns wait meanwhile.

use super::driver::ForkSpec;
use super::message::SessionMessage;
use super::prepare::record_dir;
use super::state::{Phase, SessionState};
use crate::actors::client::ClientContext;
use crate::codex::argv::{SpawnSpec, build_app_server};
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::Confined;
use crate::store::{SessionRecord, now_ms};
use ractor::ActorRef;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Fork the session's thread into a new session: same working directory and CODEX_HOME, a
/// thread of its own from `thread/fork` on a one-off app-server (so that no two processes
/// write one thread), its record written once before its id is returned. Refused while a turn
/// runs or waits, and for a session without a thread.
pub(super) fn fork(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    client: Arc<ClientContext>,
    timeout: Duration,
    reply: oneshot::Sender<Result<crate::actors::calls::SessionView>>,
) {
    let prepared = fork_checked(st, &client);
    let (parent, thread, cwd, server) = match prepared {
        Ok(p) => p,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    let shared = st.shared.clone();
    let driver = st.driver.clone();
    st.phase = Phase::Forking { task: None };
    let me = myself.clone();
    let home = client.codex_home.display().to_string();
    let span = tracing::info_span!("fork", session = %st.id);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let forked = async {
                let spec = ForkSpec {
                    server,
                    thread,
                    cwd: cwd.clone(),
                    model: parent.model.clone(),
                    timeout,
                };
                let forked = driver.0.fork(spec, &shared).await?;
                let mut rec =
                    SessionRecord::new(SessionId::generate(), cwd.path().to_path_buf(), now_ms());
                // the fork's thread lives in the asking client's CODEX_HOME (the parent's,
                // checked above)
                rec.codex_home = Some(home);
                rec.model = parent.model.clone();
                rec.thread_id = Some(forked);
                // the fork starts with the parent's history, and codex's running total with it
                rec.thread_usage = parent.thread_usage;
                shared.store.put(&rec)?;
                shared.store.flush().await?;
                tracing::info!(from = %thread, to = %forked, new_session = %rec.session_id, "forked");
                Ok(crate::actors::calls::SessionView::of(&rec, false))
            };
            let forked = forked.await;
            let _ = me.cast(SessionMessage::ForkDone);
            let _ = reply.send(forked);
        },
        span,
    ));
    // owned: a stop or a panic of the actor aborts the fork, and its process dies with it
    st.phase = Phase::Forking {
        task: Some(task.abort_handle()),
    };
}

/// A fork that may start: the parent's record, its thread, its working directory (checked
/// again against the client's roots) and the one-off app-server's invocation; else why not.
fn fork_checked(
    st: &SessionState,
    client: &ClientContext,
) -> Result<(SessionRecord, ThreadId, Confined, SpawnSpec)> {
    let Some(rec) = &st.record else {
        return Err(Error::invalid(
            "sessionId",
            format!("no session {}; start one with the `codex` tool", st.id),
        ));
    };
    if !st.phase.idle() || !st.pending.is_empty() {
        return Err(Error::Busy(format!(
            "session {} is running a turn (or a fork); fork it once that has ended",
            st.id
        )));
    }
    let thread = rec.thread_id.ok_or_else(|| {
        Error::invalid(
            "sessionId",
            format!(
                "session {} has no conversation yet (no turn started its thread): nothing \
                 to fork",
                st.id
            ),
        )
    })?;
    client.check_codex_home(rec)?;
    let cwd = record_dir(client, rec)?;
    // no nested MCP servers: nothing runs in the fork's one-off process
    let server = build_app_server(&client.common_for(true), cwd.clone())?;
    Ok((rec.clone(), thread, cwd, server))
}
