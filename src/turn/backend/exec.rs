//! A turn on `codex exec`: one process, its events into the turn's sink, and (for a session's
//! turn) what codex recorded of it.

use super::env::{TurnEnv, TurnRun};
use crate::codex::argv::SpawnSpec;
use crate::codex::process::{TurnOutcome, run as run_process};
use crate::codex::rollout::last_turn_context;

/// Run `spec` to its end within `timeout`: its process reported by the sink's spawn hook as it
/// starts, its events as progress; then, when `read_record`, what codex recorded of the turn.
pub(crate) async fn run_exec(
    env: &TurnEnv<'_>,
    spec: SpawnSpec,
    read_record: bool,
    timeout: std::time::Duration,
) -> TurnRun {
    let mut opts = env.options();
    opts.timeout = timeout;
    let mut outcome = run_process(spec, opts, env.sink.events()).await?;
    log_finished(&outcome);
    outcome.recorded = match outcome.thread_id {
        Some(t) if read_record => last_turn_context(&env.client.codex_home, &t),
        _ => None,
    };
    Ok(outcome)
}

/// One log line per finished turn, on either backend.
pub(crate) fn log_finished(outcome: &TurnOutcome) {
    tracing::info!(
        ending = %outcome.ending,
        duration_ms = outcome.duration.as_millis() as u64,
        commands = outcome.commands.len(),
        "turn finished"
    );
}
