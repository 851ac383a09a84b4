//! Closing a session: refused while it runs or has queued a call of another host than the
//! closer's ([`others_turn`]: a host never ends another host's turn), else its running turn
//! killed and answered `Cancelled`, its waiters answered,
//! its record forgotten durably, `codex delete` handed to a one-shot actor when asked, and the
//! actor drained so that nothing sent before the close is left unanswered or writes the record
//! back (proved by `tests::a_close_during_a_turn_answers_the_turn_as_cancelled_and_succeeds` and
//! `tests::a_turn_racing_the_close_of_a_stored_session_never_revives_it`).

use super::message::SessionMessage;
use super::state::{Phase, SessionState};
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::store::SessionRecord;
use ractor::{ActorCell, ActorRef};
use std::sync::Arc;
use tokio::sync::oneshot;

/// A thread can be deleted only by a client using the CODEX_HOME that keeps it.
pub(super) fn check_delete(client: &ClientContext, rec: &SessionRecord) -> Result<()> {
    client.check_codex_home(rec).map_err(|_| {
        Error::invalid(
            "deleteThread",
            "the session's thread lives in another CODEX_HOME than this client's; close it \
             without deleteThread, or from a client using that CODEX_HOME",
        )
    })
}

/// Whether a close by `closer` would end a turn of another host: the running turn's or a queued
/// call's host ([`crate::actors::TurnCall::host`]) is known and not the closer's. The
/// operator's close (`None`) ends any turn, and any close ends a call of no host (the owning
/// process's own).
pub(super) fn others_turn(st: &SessionState, closer: Option<&str>) -> bool {
    let Some(closer) = closer else {
        return false;
    };
    let running = match &st.phase {
        Phase::Turn { guard, .. } => guard.host.as_deref(),
        _ => None,
    };
    let queued = st.pending.iter().map(|(call, _, _)| call.host.as_deref());
    std::iter::once(running)
        .chain(queued)
        .flatten()
        .any(|host| host != closer)
}

/// Close the session: refused before anything when it runs a turn of another host
/// ([`others_turn`]), or when its thread cannot be deleted by this client; else its turn is cancelled (killed) and its caller answered `Cancelled`, waiters are
/// answered the same way, the record is forgotten (durably) and the actor drains: what was
/// sent to it before the close is answered as for a closed session ([`closed`]), what comes
/// later goes back to the registry, which finds no record.
pub(super) async fn close(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    (delete_thread, drop_changes, host): (bool, bool, Option<String>),
    client: Arc<ClientContext>,
    reply: oneshot::Sender<Result<Option<SessionRecord>>>,
) {
    if others_turn(st, host.as_deref()) {
        let _ = reply.send(Err(others_turn_refused(&st.id)));
        return;
    }
    if delete_thread
        && let Some(rec) = &st.record
        && let Err(e) = check_delete(&client, rec)
    {
        let _ = reply.send(Err(e));
        return;
    }
    let wt = st.record.as_ref().and_then(|r| r.worktree.clone());
    if let Err(e) = others_worktree(st, &client, host.as_deref(), drop_changes).and(still_changing(
        st,
        wt.as_ref(),
        drop_changes,
    )) {
        let _ = reply.send(Err(e));
        return;
    }
    if let Err(e) = keeps_changes(&st.shared, &st.id, wt, drop_changes).await {
        let _ = reply.send(Err(e));
        return;
    }
    // cancels and kills the running turn; its caller learns that the close ended it
    let fork = match &st.phase {
        Phase::OneOff { task } | Phase::Closed { fork: task } => task.clone(),
        Phase::Idle | Phase::Turn { .. } => None,
    };
    if let Phase::Turn { mut guard, .. } = std::mem::replace(&mut st.phase, Phase::Closed { fork })
        && let Some(r) = guard.reply.take()
    {
        drop(guard);
        let _ = r.send(Err(Error::Cancelled { partial: None }));
    }
    close_warm(st).await;
    for (_, r, _) in st.pending.drain(..) {
        let _ = r.send(Err(Error::Cancelled { partial: None }));
    }
    let left = remove_worktree(st).await;
    let mut res = forget_stored(&st.shared, &st.id).await;
    st.record = None;
    let thread = match (&res, delete_thread) {
        (Ok(Some(rec)), true) => rec.thread_id,
        _ => None,
    };
    if let (Ok(_), Some(e)) = (&res, left) {
        res = Err(e);
    }
    match (thread, myself.try_get_supervisor()) {
        // `codex delete` may take up to 30 s: a one-shot actor under the registry runs it,
        // not this handler; the reply still comes once it is done
        (Some(thread), Some(registry)) => {
            match oneshot_delete(&st.shared, registry, client, thread).await {
                Some(done) => {
                    tokio::spawn(async move {
                        let _ = done.await;
                        let _ = reply.send(res);
                    });
                }
                None => {
                    let _ = reply.send(res);
                }
            }
        }
        _ => {
            let _ = reply.send(res);
        }
    }
    // what is already in the mailbox is answered as closed; later messages are refused (the
    // registry then starts a fresh actor, which finds no record)
    if myself.drain().is_err() {
        myself.stop(Some("closed".into()));
    }
}

/// The refusal of a close while another host's turn runs or is queued: nothing is cancelled.
fn others_turn_refused(id: &SessionId) -> Error {
    Error::invalid(
        "sessionId",
        format!(
            "session {id} runs a turn (or has one queued) that another host started: only a \
             client of that host (its client name, CODEX_HOME and roots; over HTTP, its HTTP \
             session) can end it; nothing was cancelled. Close the session once its turn has \
             ended"
        ),
    )
}

/// Remove the session's worktree and its branch, before the record: the store never points at
/// a worktree that is gone (one removed by hand is pruned from git's list). One that could not
/// be removed is the error the close answers, with its path and branch, not silently forgotten.
async fn remove_worktree(st: &mut SessionState) -> Option<Error> {
    let wt = st.record.as_ref().and_then(|r| r.worktree.clone())?;
    let e = crate::actors::worktree::remove(&st.shared, &wt)
        .await
        .err()?;
    tracing::warn!(session = %st.id, error = %e, "could not remove the session's worktree");
    Some(Error::SessionFailed(format!(
        "session {} was closed, but its worktree {} and its branch {} could not be removed \
         ({e}); they are left: remove them by hand (`git worktree remove --force`, \
         `git branch -D`)",
        st.id,
        wt.path.display(),
        wt.branch
    )))
}

/// Refuse, naming `sessionId`, a close that would drop the changes in the worktree of another
/// `CODEX_HOME`'s session (one `client` may not continue): only a host that may continue a
/// session drops its changes. The operator's close (`host` `None`) may.
fn others_worktree(
    st: &SessionState,
    client: &ClientContext,
    host: Option<&str>,
    drop_changes: bool,
) -> Result<()> {
    let Some(rec) = st.record.as_ref().filter(|r| r.worktree.is_some()) else {
        return Ok(());
    };
    if !drop_changes || host.is_none() || client.check_codex_home(rec).is_ok() {
        return Ok(());
    }
    Err(Error::invalid(
        "sessionId",
        format!(
            "session {} was started by a client with another CODEX_HOME: only a client that may \
             continue it may drop its worktree's changes; nothing was closed",
            st.id
        ),
    ))
}

/// Refuse, naming `dropChanges`, the close of a worktree session whose turn runs or is queued
/// unless told to drop its changes: what the turn writes after the check for changes not
/// applied would be lost with the worktree.
fn still_changing(
    st: &SessionState,
    wt: Option<&crate::store::WorktreeRecord>,
    drop_changes: bool,
) -> Result<()> {
    let busy = matches!(st.phase, Phase::Turn { .. }) || !st.pending.is_empty();
    if wt.is_none() || drop_changes || !busy {
        return Ok(());
    }
    Err(Error::invalid(
        "dropChanges",
        format!(
            "session {} runs a turn (or has one queued) that is still making changes in its \
             worktree: stop it first (`stop`, or wait for it), or close with dropChanges: true \
             to drop them; nothing was closed",
            st.id
        ),
    ))
}

/// Refuse the close, naming `dropChanges`, when the session's worktree holds changes that are
/// not in the checkout it came from and the caller did not say to drop them. A worktree
/// whose changes cannot be read is kept the same way.
async fn keeps_changes(
    shared: &Shared,
    id: &SessionId,
    wt: Option<crate::store::WorktreeRecord>,
    drop_changes: bool,
) -> Result<()> {
    let Some(wt) = wt else {
        return Ok(());
    };
    if drop_changes {
        return Ok(());
    }
    let unapplied = crate::actors::worktree::unapplied(shared, &wt).await?;
    if unapplied.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        "dropChanges",
        format!(
            "session {}'s worktree holds changes not applied to {} ({}); `apply` them first, \
             or close with dropChanges: true to drop them; nothing was closed",
            id,
            wt.origin.display(),
            unapplied.join(", ")
        ),
    ))
}

/// Answer a message that reached the actor after its session was closed: a turn, a steer and a
/// fork are refused naming the session, a `Get` or another close finds nothing; reports of the
/// killed turn are dropped (nothing is written for a closed session).
pub(super) fn closed(id: &SessionId, msg: SessionMessage) {
    let gone = || {
        Error::invalid(
            "sessionId",
            format!("session {id} was closed; start a new session with the `codex` tool"),
        )
    };
    match msg {
        SessionMessage::StartTurn { reply, .. } => {
            let _ = reply.send(Err(gone()));
        }
        SessionMessage::Steer { reply, .. } => {
            let _ = reply.send(Err(gone()));
        }
        SessionMessage::Fork { reply, .. }
        | SessionMessage::ThreadOp { reply, .. }
        | SessionMessage::OpDone { reply, .. } => {
            let _ = reply.send(Err(gone()));
        }
        SessionMessage::Get { reply } => {
            let _ = reply.send(Ok(None));
        }
        SessionMessage::Close { reply, .. } => {
            let _ = reply.send(Ok(None));
        }
        // a closed actor answers no probe: a test waiting on it sees it gone
        #[cfg(test)]
        SessionMessage::Probe { .. } => {}
        SessionMessage::ThreadStarted { .. }
        | SessionMessage::Spawned { .. }
        | SessionMessage::TurnFinished { .. }
        | SessionMessage::IdleCheck
        | SessionMessage::CloseWarm
        | SessionMessage::CredentialsReleased
        | SessionMessage::TurnRunning
        | SessionMessage::RunsWithExec
        | SessionMessage::OneOffDone => {}
    }
}

/// Remove a session's record from the store, durably.
pub(super) async fn forget_stored(
    shared: &Shared,
    id: &SessionId,
) -> Result<Option<SessionRecord>> {
    let removed = shared.store.remove(id)?;
    shared.store.flush().await?;
    Ok(removed)
}

/// Start `codex delete --force THREAD` in a one-shot actor under `registry`
/// ([`crate::actors::oneshot::delete_thread`]); `None` (logged) when it could not start.
pub(super) async fn oneshot_delete(
    shared: &Arc<Shared>,
    registry: ActorCell,
    client: Arc<ClientContext>,
    thread: ThreadId,
) -> Option<tokio::sync::oneshot::Receiver<()>> {
    crate::actors::oneshot::delete_thread(shared.clone(), registry, client, thread)
        .await
        .inspect_err(|e| tracing::warn!(%thread, error = %e, "codex delete could not start"))
        .ok()
}

/// Close the warm app-server between turns (EOF first), forget its process record, and give
/// its place in the cap back (the backend does).
pub(super) async fn close_warm(st: &mut SessionState) {
    if let Some(b) = st.backend.as_mut().filter(|b| b.holds_process()) {
        b.close().await;
        let _ = crate::actors::inflight::off_record(&st.shared.store, &st.id);
    }
}

/// Close the warm app-server between turns when it was started with credentials nobody holds
/// now (its host's last connection is gone): the next turn starts one with its caller's.
pub(super) async fn close_unheld(st: &mut SessionState) {
    let unheld = st
        .backend
        .as_ref()
        .filter(|b| b.holds_process())
        .is_some_and(|b| !st.shared.credentials.held(b.credentials()));
    if unheld {
        tracing::info!(session = %st.id, "closing a warm codex process whose host is gone");
        close_warm(st).await;
    }
}
