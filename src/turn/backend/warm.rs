//! A turn on a warm `codex app-server`: the backend's own process when it was started the same
//! way (`key_of`) and may be reused, else one its [`super::Source`] gives (the spare, an idle
//! one of the client's, a new one under `max_warm`); a process that ended before codex
//! accepted the turn is replaced; `codex exec` when no app-server can take the turn. A
//! one-shot call's re-ask runs only on the process that ran its first turn ([`in_place`]).

use std::time::{Duration, Instant};

use super::env::{Fallback, TurnEnv, TurnRun};
use super::exec::log_finished;
use super::source::NextWarm;
use super::source::Source;
use crate::codex::argv::WarmTurn;
use crate::codex::events::FailureKind;
use crate::codex::process::{APP_SERVER_REPLACEMENTS, Ending, ThreadWanted, TurnControl};

/// Run a warm turn with `codex exec` instead (on the same thread), within what is left of the
/// turn's time since `started`: its invocation is the caller's `fallback`, from the turn as it
/// was checked; the prompt moves on.
async fn exec_instead(
    source: &mut Source,
    env: &TurnEnv<'_>,
    (turn, fallback): (WarmTurn, Fallback),
    started: Instant,
) -> TurnRun {
    env.sink.runs_with_exec();
    source.let_go().await;
    let spec = fallback(turn, &env.common)?;
    let left = env
        .timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    super::exec::run_exec(env, spec, source.reads_record(), left).await
}

/// Run a warm turn (see the module); the source's place in the pool is settled once it ended,
/// whichever way.
pub(crate) async fn run_warm(
    source: &mut Source,
    env: &TurnEnv<'_>,
    control: &mut TurnControl,
    (turn, wanted, fallback): (WarmTurn, ThreadWanted, Fallback),
) -> TurnRun {
    let started = Instant::now();
    let ran = if source.pinned(&wanted) {
        in_place(source, env, control, (turn, wanted)).await
    } else if source.admit(env) {
        on_app_server(source, env, control, (turn, wanted, fallback), started).await
    } else {
        exec_instead(source, env, (turn, fallback), started).await
    };
    source.settle();
    ran
}

/// The warm turn admitted (see the module). A process that turns out to have ended before the
/// turn reached it (idle, taken as the spare, during `initialize` or `thread/resume`: codex
/// never accepted the turn) is replaced and the turn runs on the next one, on the same thread.
async fn on_app_server(
    source: &mut Source,
    env: &TurnEnv<'_>,
    control: &mut TurnControl,
    (turn, wanted, fallback): (WarmTurn, ThreadWanted, Fallback),
    started: Instant,
) -> TurnRun {
    let reads_record = source.reads_record();
    let mut opts = env.options();
    source.keep_fitting(env, &turn).await;
    let mut attempt = 0;
    // a process this turn took (the spare) or started: the next spare is started after it
    let mut fresh = false;
    loop {
        if !source.holds_process() {
            match source.obtain(env, &turn).await {
                NextWarm::Ready => fresh = true,
                NextWarm::Exec => {
                    return exec_instead(source, env, (turn, fallback), started).await;
                }
                NextWarm::Failed(e) => return Err(e),
            }
        }
        // what is left of the call's time (start-ups and earlier attempts count against it)
        opts.timeout = env
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        let Some(process) = source.process_mut() else {
            return Err(crate::error::Error::SessionFailed(
                "the warm codex app-server is gone".into(),
            ));
        };
        let mut outcome = process
            .run_turn(wanted, &turn, &opts, control, env.sink.events())
            .await;
        let ended_unreached = !process.reusable()
            && !process.accepted()
            && matches!(
                outcome.ending,
                Ending::Failed {
                    kind: FailureKind::Crashed,
                    ..
                }
            );
        if ended_unreached && attempt < APP_SERVER_REPLACEMENTS && !env.cancel.is_cancelled() {
            // it had ended (killed, crashed) before codex accepted the turn: nothing of the
            // turn ran there, and a new one runs it on the same thread
            attempt += 1;
            tracing::info!(
                attempt,
                "the warm codex app-server had ended before the turn reached it; starting a new one"
            );
            source.discard().await;
            continue;
        }
        // read from the rollout codex reported for the thread (no walk of the sessions
        // directory)
        outcome.recorded = match outcome.thread_id {
            Some(t) if reads_record => crate::codex::rollout::turn_context_of(
                &env.client.codex_home,
                &t,
                process.rollout(),
            ),
            _ => None,
        };
        // once the turn ended, not while it runs, nor before a replacement's start (starts
        // are one at a time)
        if fresh {
            source.refill(env, &turn);
        }
        log_finished(&outcome);
        source.after_turn(matches!(outcome.ending, Ending::Completed));
        return Ok(outcome);
    }
}

/// A turn that may run only on the process in place ([`Source::pinned`]): no other process
/// is taken or started, none replaces it, and no `codex exec` runs it.
async fn in_place(
    source: &mut Source,
    env: &TurnEnv<'_>,
    control: &mut TurnControl,
    (turn, wanted): (WarmTurn, ThreadWanted),
) -> TurnRun {
    let opts = env.options();
    let Some(process) = source.process_mut().filter(|p| p.reusable()) else {
        return Err(crate::error::Error::SessionFailed(
            "the codex app-server that ran this call's first turn is gone; ask again".into(),
        ));
    };
    let outcome = process
        .run_turn(wanted, &turn, &opts, control, env.sink.events())
        .await;
    log_finished(&outcome);
    source.after_turn(matches!(outcome.ending, Ending::Completed));
    Ok(outcome)
}
