//! How a turn's outcome and a session's record become what the MCP layer gets
//! ([`crate::actors::calls`]): a turn's [`Answer`], a session's [`SessionView`], and the
//! session's [`TurnReport`] (which tests read whole). The calls file names no process or store
//! type; this one makes its answers from them.

use std::time::Duration;

use crate::actors::calls::{Answer, SessionView};
use crate::codex::process::{Ending, TurnOutcome};
use crate::codex::rollout::TurnContext;
use crate::plan::values::SandboxLevel;
use crate::security::ids::SessionId;
use crate::store::SessionRecord;

/// What a session's turn did: its outcome, and the session's record after it.
#[derive(Debug, Clone)]
pub struct TurnReport {
    pub session_id: SessionId,
    /// The session existed with a thread, and this turn continued it.
    pub resumed: bool,
    /// The session record was created by this call.
    pub created: bool,
    pub outcome: TurnOutcome,
    /// Time spent waiting for the session and for a slot.
    pub queued: Duration,
    /// The level asked for (after defaulting).
    pub sandbox: SandboxLevel,
    /// What codex recorded for the turn (approval, reviewer, sandbox), when it keeps a rollout.
    pub recorded: Option<TurnContext>,
    /// The model codex recorded it ran with, else the one asked for.
    pub model: Option<String>,
    /// The session's record after the turn.
    pub record: Option<SessionRecord>,
}

impl TurnReport {
    /// The answer of this turn, for the MCP layer to shape.
    pub fn into_answer(self) -> Answer {
        Answer::of(
            self.outcome,
            self.queued,
            self.sandbox,
            self.recorded,
            self.model,
        )
    }
}

impl Answer {
    /// The answer of a finished codex run.
    pub(crate) fn of(
        outcome: TurnOutcome,
        queued: Duration,
        sandbox: SandboxLevel,
        recorded: Option<TurnContext>,
        model: Option<String>,
    ) -> Answer {
        let timed_out = matches!(outcome.ending, Ending::TimedOut { .. });
        let o = &outcome.output;
        let mut a = Answer {
            response: o.message.clone().unwrap_or_default(),
            thread_id: o.thread_id,
            turn_usage: o.turn_usage,
            thread_usage: o.thread_usage,
            duration: o.duration,
            queued,
            timed_out,
            commands: o.commands.clone(),
            files_changed: o.files_changed.clone(),
            approvals: o.approvals.clone(),
            steered: o.steered.clone(),
            sandbox: Some(sandbox),
            recorded,
            model,
            ..Default::default()
        };
        a.error = crate::error::turn_result(outcome).err();
        a
    }
}

impl SessionView {
    /// The command a person runs to continue the session's thread in codex's own terminal
    /// app with `program` (see [`crate::codex::argv::hand_off`]), or why there is none for it;
    /// none before a turn started a thread.
    pub fn hand_off(
        &self,
        program: &std::path::Path,
    ) -> Option<Result<String, crate::codex::argv::HandOffUnavailable>> {
        let thread = self.thread_id.as_ref()?;
        let home = self.codex_home.as_deref().map(std::path::Path::new);
        Some(crate::codex::argv::hand_off(
            program,
            home,
            std::path::Path::new(&self.working_directory),
            thread,
        ))
    }

    pub(crate) fn of(rec: &SessionRecord, live: bool) -> SessionView {
        SessionView {
            session_id: rec.session_id.to_string(),
            thread_id: rec.thread_id,
            working_directory: rec.working_directory.display().to_string(),
            model: rec.model.clone(),
            created_ms: rec.created_ms,
            last_used_ms: rec.last_used_ms,
            turn_count: rec.turn_count,
            usage: rec.usage,
            last_status: rec.last_status,
            last_error: rec.last_error.clone(),
            last_response: rec.last_response.clone(),
            name: rec.name.as_ref().map(|n| n.as_str().to_owned()),
            dropped_turns: rec.dropped_turns,
            compactions: rec.compactions,
            last_compaction: rec.last_compaction,
            codex_home: rec.codex_home.clone(),
            live,
            worktree: rec.worktree.as_ref().map(crate::actors::worktree::view_of),
        }
    }
}
