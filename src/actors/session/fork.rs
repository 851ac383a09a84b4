//! The work of a one-off app-server on a session's thread, in a task the actor owns (aborted
//! with its state), turns waiting meanwhile: `forkSession` (the thread copied into a new
//! session), `renameSession` and `rewindSession` (codex's record of the thread, then the
//! session's).

use super::close::close_warm;
use super::driver::{ForkSpec, OpSpec};
use super::message::SessionMessage;
use super::prepare::record_dir;
use super::state::{Phase, SessionState};
use crate::actors::client::ClientContext;
use crate::calls::ThreadOp;
use crate::codex::argv::{SpawnSpec, build_app_server};
use crate::error::{Error, Result};
use crate::security::ids::ModelId;
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::Confined;
use crate::store::{SessionRecord, now_ms};
use ractor::ActorRef;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Fork the session's thread into a new session: same working directory (a worktree
/// session's fork: a worktree of its own with the parent's changes) and CODEX_HOME, a
/// thread of its own from `thread/fork` on a one-off app-server (so that no two processes
/// write one thread), its record written once before its id is returned. Refused while a turn
/// runs or waits, and for a session without a thread.
pub(super) fn fork(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    client: Arc<ClientContext>,
    timeout: Duration,
    reply: oneshot::Sender<Result<crate::calls::SessionView>>,
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
    st.phase = Phase::OneOff { task: None };
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
                    // the thread's own model, as stored: checked as a caller's would be
                    model: parent
                        .model
                        .as_deref()
                        .map(|m| ModelId::parse("model", m))
                        .transpose()?,
                    timeout,
                };
                let forked = driver.0.fork(spec, &shared).await?;
                let id = SessionId::generate();
                // a worktree session's fork gets a worktree of its own, holding the parent's
                // changes: two sessions never share one
                let (dir, worktree) = match &parent.worktree {
                    Some(wt) => {
                        let made =
                            crate::actors::worktree::fork(&shared, &client, wt, &id, &cwd).await?;
                        (made.cwd.path().to_path_buf(), Some(made.record))
                    }
                    None => (cwd.path().to_path_buf(), None),
                };
                let mut rec = SessionRecord::new(id, dir, now_ms());
                rec.worktree = worktree;
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
                Ok(crate::calls::SessionView::of(&rec, false))
            };
            let forked = forked.await;
            let _ = me.cast(SessionMessage::OneOffDone);
            let _ = reply.send(forked);
        },
        span,
    ));
    // owned: a stop or a panic of the actor aborts the fork, and its process dies with it
    st.phase = Phase::OneOff {
        task: Some(task.abort_handle()),
    };
}

/// A fork that may start: the parent's record, its thread, its working directory (checked
/// again against the client's roots) and the one-off app-server's invocation; else why not.
fn fork_checked(
    st: &SessionState,
    client: &ClientContext,
) -> Result<(SessionRecord, ThreadId, Confined, SpawnSpec)> {
    let checked = thread_op_checked(st, client, "fork")?;
    let (Some(rec), Some((thread, cwd, server))) = (&st.record, checked) else {
        return Err(Error::invalid(
            "sessionId",
            format!(
                "session {} has no conversation yet (no turn started its thread): nothing \
                 to fork",
                st.id
            ),
        ));
    };
    Ok((rec.clone(), thread, cwd, server))
}

/// Work on the session's thread with a one-off app-server ([`ThreadOp`]): name it, or drop
/// its last turns. Codex's record of the thread first (the session's own warm process closed
/// before: one process writes a thread at a time), then the session's record, when the actor
/// hears back ([`op_done`]). A name for a session without a thread yet goes to its record at
/// once; a rewind of one is refused, as is either while a turn runs or waits.
pub(super) async fn thread_op(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    (op, client, timeout): (ThreadOp, Arc<ClientContext>, Duration),
    reply: oneshot::Sender<Result<crate::calls::SessionView>>,
) {
    let what = op.verb();
    let checked = thread_op_checked(st, &client, what).and_then(|c| match (c, &op) {
        (None, ThreadOp::Rewind(_) | ThreadOp::Compact(_)) => Err(Error::invalid(
            "sessionId",
            format!(
                "session {} has no conversation yet (no turn started its thread): nothing to \
                 {what}",
                st.id
            ),
        )),
        (_, ThreadOp::Rewind(n))
            if u64::from(*n) > st.record.as_ref().map_or(0, |r| r.turn_count) =>
        {
            Err(Error::invalid(
                "turns",
                format!(
                    "session {} has {} turn(s); it cannot go back {n}",
                    st.id,
                    st.record.as_ref().map_or(0, |r| r.turn_count)
                ),
            ))
        }
        (c, _) => Ok(c),
    });
    let (thread, cwd, server) = match checked {
        Ok(Some(p)) => p,
        Ok(None) => return op_done(st, Ok(op), reply).await,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    close_warm(st).await;
    let shared = st.shared.clone();
    let driver = st.driver.clone();
    let me = myself.clone();
    let span = tracing::info_span!("thread_op", session = %st.id, op = what);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let spec = OpSpec {
                server,
                thread,
                cwd,
                op,
                timeout,
            };
            let done = driver.0.thread_op(spec, &shared).await;
            let _ = me.cast(SessionMessage::OpDone { done, reply });
        },
        span,
    ));
    st.phase = Phase::OneOff {
        task: Some(task.abort_handle()),
    };
}

/// A one-off operation's end: what it changed in the session's record (its name; or its turn
/// count, and the turns dropped so far), stored and flushed, and the caller answered with the
/// session; or the caller told why codex did not do it (nothing changed).
pub(super) async fn op_done(
    st: &mut SessionState,
    done: Result<ThreadOp>,
    reply: oneshot::Sender<Result<crate::calls::SessionView>>,
) {
    let answer = async {
        let done = done?;
        let rec = st
            .record
            .as_mut()
            .ok_or_else(|| Error::SessionFailed("the session was closed meanwhile".into()))?;
        match done {
            ThreadOp::Name(name) => rec.name = Some(name),
            ThreadOp::Rewind(n) => {
                rec.turn_count = rec.turn_count.saturating_sub(u64::from(n));
                rec.dropped_turns += u64::from(n);
            }
            ThreadOp::Compact(tokens) => {
                rec.compactions += 1;
                rec.last_compaction = tokens;
            }
        }
        st.shared.store.put(rec)?;
        st.shared.store.flush().await?;
        tracing::info!(session = %st.id, "the session's thread changed");
        Ok(crate::calls::SessionView::of(rec, true))
    };
    let _ = reply.send(answer.await);
}

/// Whether a one-off operation (`what`) may start on the session: its thread, working
/// directory (checked again against the client's roots) and the one-off app-server's
/// invocation; `None` for a session without a thread yet; else why not.
fn thread_op_checked(
    st: &SessionState,
    client: &ClientContext,
    what: &str,
) -> Result<Option<(ThreadId, Confined, SpawnSpec)>> {
    let Some(rec) = &st.record else {
        return Err(Error::invalid(
            "sessionId",
            format!("no session {}; start one with the `codex` tool", st.id),
        ));
    };
    if !st.phase.idle() || !st.pending.is_empty() {
        return Err(Error::Busy(format!(
            "`sessionId`: session {} is running a turn (or a fork, or another change to its \
             thread); {what} it once that has ended",
            st.id
        )));
    }
    let Some(thread) = rec.thread_id else {
        return Ok(None);
    };
    client.check_codex_home(rec)?;
    let cwd = record_dir(client, rec)?;
    // no nested MCP servers: nothing runs in the one-off process
    let server = build_app_server(&client.common_for(true), cwd.clone())?;
    Ok(Some((thread, cwd, server)))
}
