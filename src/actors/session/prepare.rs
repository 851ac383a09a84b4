//! A call made ready to run: the session's directory binding checked, the files attached, the
//! turn checked once and the backend it asks for chosen (where every turn's is:
//! [`crate::turn::backend::warm_chosen`]) into a
//! [`TurnPlan`], and only then the record marked running. The backend still runs a warm plan with
//! `codex exec` when the pool has no room for it (`max_warm`) or no app-server starts.

use super::driver::TurnPlan;
use super::message::CallMeta;
use super::state::SessionState;
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::actors::worktree;
use crate::calls::{TurnCall, WorkDir};
use crate::codex::argv::{TurnRequest, check_turn};
use crate::codex::events::Usage;
use crate::error::{Error, Result};
use crate::plan::values::SandboxLevel;
use crate::security::ids::SessionId;
use crate::security::ids::ThreadId;
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;
use crate::store::{SessionRecord, TurnStatus, WorktreeRecord, now_ms};
use std::path::PathBuf;
use std::sync::Arc;

/// The working directory of a call on this session: the one it is bound to (a caller naming
/// another is refused), checked again against the client's roots; a new session's is the
/// call's.
pub(super) fn session_dir(
    st: &SessionState,
    client: &ClientContext,
    dir: &WorkDir,
) -> Result<Confined> {
    let Some(rec) = &st.record else {
        return Ok(dir.confined().clone());
    };
    client.check_codex_home(rec)?;
    match dir {
        WorkDir::Given(c) if rec.working_directory != c.path() => Err(Error::invalid(
            "workingDirectory",
            format!(
                "session {} is bound to another working directory; start a new session (or omit \
                 workingDirectory) to work there",
                st.id
            ),
        )),
        WorkDir::Given(c) => Ok(c.clone()),
        WorkDir::Default(_) => record_dir(client, rec),
    }
}

/// A stored session's working directory, checked again against the client's roots, or, for a
/// session with a worktree of its own, against that worktree too: it may work there even
/// outside the roots (no other session may: the MCP layer confines a named directory to the
/// roots and refuses one in a session's worktree).
pub(super) fn record_dir(client: &ClientContext, rec: &SessionRecord) -> Result<Confined> {
    let mut roots = client.config.roots.clone();
    let first = roots.first().cloned().unwrap_or_else(|| PathBuf::from("/"));
    if let Some(wt) = &rec.worktree {
        roots.insert(0, wt.path.clone());
    }
    Ok(crate::confine::resolve(
        "workingDirectory",
        &rec.working_directory.to_string_lossy(),
        &first,
        &roots,
        Kind::Dir,
    )?)
}

/// Check a call against the session and build codex's invocation; only then mark the record
/// running (stored and flushed), so that a call that cannot be built leaves it as it was.
pub(super) async fn prepare(st: &mut SessionState, call: &mut TurnCall) -> Result<Prepared> {
    let client = call
        .client
        .clone()
        .unwrap_or_else(|| Arc::new(st.shared.own_context()));
    let cwd = session_dir(st, &client, &call.cwd)?;
    let exists = st.record.is_some();
    let (shared, id) = (st.shared.clone(), st.id.clone());
    let (cwd, made) = own_worktree((&shared, &id, exists), &client, call, cwd).await?;
    let prepared = prepare_in(st, call, client, cwd, made.clone()).await;
    if prepared.is_err()
        && let Some(wt) = &made
    {
        // nothing of a session that did not start is left: its worktree, branch and record
        let shared = st.shared.clone();
        worktree::discard(&shared, wt).await;
        if st
            .record
            .as_ref()
            .is_some_and(|r| r.worktree.as_ref() == Some(wt))
        {
            st.record = None;
            let _ = st.shared.store.remove(&st.id);
        }
    }
    prepared
}

/// A new session's own worktree, when the call asks for one: made, and the directory the
/// session works in moved into it. Refused, naming `worktree`, on a session that exists.
async fn own_worktree(
    (shared, id, exists): (&Shared, &SessionId, bool),
    client: &ClientContext,
    call: &TurnCall,
    cwd: Confined,
) -> Result<(Confined, Option<WorktreeRecord>)> {
    let Some(base) = &call.worktree else {
        return Ok((cwd, None));
    };
    if exists {
        return Err(Error::invalid(
            "worktree",
            format!(
                "session {} already exists: only a new session gets a worktree of its own; \
                 omit worktree to continue it (it keeps the worktree it started with, if any)",
                id
            ),
        ));
    }
    let made = worktree::create(shared, client, id, &cwd, base.as_deref()).await?;
    Ok((made.cwd, Some(made.record)))
}

/// [`prepare`] in the directory the turn runs in (`made`: the new session's worktree).
async fn prepare_in(
    st: &mut SessionState,
    call: &mut TurnCall,
    client: Arc<ClientContext>,
    cwd: Confined,
    made: Option<WorktreeRecord>,
) -> Result<Prepared> {
    // the bridge's own files (the client's and this process's) are never where a turn writes
    // (a level this client may not ask for is refused as `sandbox` when the turn is built)
    let writable = call.sandbox.is_some_and(|l| {
        l.may_write() && (l != SandboxLevel::DangerFullAccess || client.common.allow_danger)
    });
    crate::confine::check_own_files(
        &cwd,
        writable,
        &[&client.config.own_files, &st.shared.config.own_files],
    )?;
    let resume = if call.reset {
        None
    } else {
        st.record.as_ref().and_then(|r| r.thread_id)
    };
    // the thread as codex's own app may have left it (the hand-off): refused while it holds it
    let reload = match resume {
        Some(thread) => handed_back(st, &thread)?,
        None => false,
    };
    let prompt = call
        .prompt
        .take()
        .ok_or_else(|| Error::invalid("prompt", "was already used by a turn"))?;
    let (prompt, images) = crate::turn::files::compose(prompt, &call.files, &cwd)?;
    let dir = cwd.path().to_path_buf();
    let common = client.common_for(false);
    // checked once: what runs it (below, or a fallback to exec) is assembled from checked values
    let checked = check_turn(
        &common,
        TurnRequest {
            prompt,
            sandbox: call.sandbox,
            model: call.model.clone(),
            reasoning_effort: call.reasoning_effort,
            cwd,
            images,
            resume,
            output_schema: None,
            output_last_message: None,
        },
    )?;
    let warm = crate::turn::backend::warm_chosen(&st.shared, checked.runs_warm());
    let plan = TurnPlan {
        turn: checked,
        resume,
        warm,
        reload,
    };
    let (created, prior_usage) = mark_running(st, dir, &client, resume.is_some(), made).await?;
    Ok(Prepared {
        meta: CallMeta {
            sandbox: plan.turn.sandbox(),
            model: call.model.clone(),
            resumed: resume.is_some(),
            created,
            reset: call.reset,
            may_ask: call.asker.is_some() && plan.on_app_server(),
        },
        client,
        plan,
        prior_usage,
    })
}

/// Whether the thread must be read again from codex's record before this turn: someone else
/// wrote it since the session's last turn (its rollout is not as that turn left it), as
/// codex's own app does when a person continued the conversation there. Refused, naming the
/// session, while codex's own app holds the thread open (codex's binary, outside any sandbox,
/// resuming it: [`crate::codex::process::app_holding`]). The one stat of the rollout is all an untouched
/// thread costs; `/proc` is read only when it changed, or when the session has no mark yet
/// (its first turn since the server started).
fn handed_back(st: &SessionState, thread: &ThreadId) -> Result<bool> {
    let changed = match &st.rollout {
        Some(mark) => !mark.unchanged(),
        None => true,
    };
    if !changed {
        return Ok(false);
    }
    if let Some((pid, command)) = crate::codex::process::app_holding(thread) {
        return Err(Error::invalid(
            "sessionId",
            format!(
                "session {}'s conversation is open in codex's own app (pid {pid}: {}); close it \
                 there, then send this turn again",
                st.id,
                redact(&command)
            ),
        ));
    }
    // written by another since this session's last turn: read again
    Ok(st.rollout.is_some())
}

/// Mark the session's record running (a new session's record made, bound to `dir`, the
/// client's CODEX_HOME and its worktree, if any), stored and flushed; whether it was created, and codex's running
/// total of the thread this turn continues (zero for a new thread).
async fn mark_running(
    st: &mut SessionState,
    dir: PathBuf,
    client: &ClientContext,
    resumes: bool,
    worktree: Option<WorktreeRecord>,
) -> Result<(bool, Usage)> {
    let created = st.record.is_none();
    let record = st
        .record
        .get_or_insert_with(|| SessionRecord::new(st.id.clone(), dir, now_ms()));
    if created {
        record.codex_home = Some(client.codex_home.display().to_string());
        record.worktree = worktree;
    }
    let prior_usage = if resumes {
        record.thread_usage
    } else {
        Default::default()
    };
    record.last_status = Some(TurnStatus::Running);
    record.last_used_ms = now_ms();
    let stored = st.shared.store.put(record);
    let flushed = st.shared.store.flush().await;
    stored.and(flushed)?;
    if created {
        // listed from now on: whoever lists this home's sessions hears it
        let _ = st.shared.list_changed.send(client.codex_home.clone());
    }
    Ok((created, prior_usage))
}

/// A turn ready to run: its plan and what the actor needs when it ends.
pub(super) struct Prepared {
    pub(super) client: Arc<ClientContext>,
    pub(super) plan: TurnPlan,
    pub(super) meta: CallMeta,
    pub(super) prior_usage: Usage,
}
