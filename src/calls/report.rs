//! How a turn's outcome and a session's record become what the MCP layer gets
//! ([`crate::calls`]): a turn's [`Answer`] and a session's [`SessionView`]. The calls
//! file names no process or store type; this one makes its answers from them.

use std::time::Duration;

use crate::calls::{Answer, SessionView};
use crate::codex::process::{Ending, TurnOutcome};
use crate::plan::values::SandboxLevel;
use crate::store::SessionRecord;

impl Answer {
    /// The answer of a finished codex run (a one-shot call's; a session's turn adds its
    /// session's part).
    pub(crate) fn of(
        outcome: TurnOutcome,
        queued: Duration,
        sandbox: SandboxLevel,
        model: Option<String>,
    ) -> Answer {
        let timed_out = matches!(outcome.ending, Ending::TimedOut { .. });
        let o = &outcome;
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
            recorded: o.recorded.clone(),
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
