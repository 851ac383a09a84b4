//! The real driver's warm path: the session's own `codex app-server` when it was started the
//! same way (`key_of`), else the spare or a new one under `max_warm`; a process that ended before
//! codex accepted the turn is replaced; `codex exec` when no app-server is usable.

use super::driver::TurnEnv;
use super::message::{TurnEnd, TurnRun};
use super::task::{exec_turn, log_finished};
use crate::actors::pool::starts::{StartFor, WarmStart, start_warm};
use crate::codex::argv::{SpawnSpec, WarmTurn};
use crate::codex::events::FailureKind;
use crate::codex::process::{Ending, ThreadWanted, TurnControl, TurnOutcome, WarmProcess, key_of};
use crate::config::Backend;
use std::time::{Duration, Instant};

/// How many times a turn's warm process may be replaced because it had ended before the turn
/// reached it (killed from outside, the OOM killer, a crash at start-up).
pub(super) const REPLACEMENTS: usize = 3;

/// What a turn's task gets when it needs a new warm process.
pub(super) enum NextWarm {
    /// A live process to run the turn on.
    Process(WarmProcess),
    /// No warm process for this turn: it runs with `codex exec`.
    Exec,
    /// The turn ends without one (cancelled, timed out, or an error).
    Done(TurnRun),
}

/// Run a warm turn with `codex exec` instead (on the same thread): its invocation is assembled
/// from the turn as it was checked when the call was prepared; the prompt moves on.
pub(super) async fn exec_instead(turn: &TurnEnv<'_>, t: WarmTurn, wanted: ThreadWanted) -> TurnRun {
    let resume = match wanted {
        ThreadWanted::Resume(t) => Some(t),
        ThreadWanted::Start => None,
    };
    turn.sink.runs_with_exec();
    exec_turn(turn, t.into_exec(&turn.client.common_for(false), resume)).await
}

/// Run a turn on the session's warm app-server: the one it has when it was started the same
/// way (same client environment, CODEX_HOME, binary and pins) and may be reused, else a new
/// one (the old one closed first). A process that turns out to have ended before the turn
/// reached it (idle, taken as the spare, during `initialize` or `thread/resume`: codex never
/// accepted the turn) is replaced and the turn runs on the next one, on the same thread. Hands
/// the process back when it may serve the next turn.
pub(super) async fn warm_turn(
    turn: &TurnEnv<'_>,
    control: &mut TurnControl,
    warm: Option<WarmProcess>,
    (server, t, wanted): (SpawnSpec, WarmTurn, ThreadWanted),
) -> (TurnRun, Option<WarmProcess>) {
    let started = Instant::now();
    let mut opts = turn.options();
    let key = key_of(&server);
    // the session's own process, when it was started the same way and is alive
    let mut next = match warm {
        Some(mut w) => {
            if w.reusable() && w.key() == &key && !w.exited() {
                Some(w)
            } else {
                // reaped before its slot goes to the next one
                w.close().await;
                None
            }
        }
        None => None,
    };
    let mut attempt = 0;
    // a process this turn took (the spare) or started: the next spare is started for the
    // session after it, so that a host's next new session here finds one too
    let mut spare_wanted = false;
    loop {
        let mut process = match next.take() {
            Some(w) => w,
            None => match obtain(turn, &server, &key).await {
                NextWarm::Process(w) => {
                    spare_wanted = true;
                    w
                }
                NextWarm::Exec => return (exec_instead(turn, t, wanted).await, None),
                NextWarm::Done(result) => return (result, None),
            },
        };
        // what is left of the call's time (start-ups and earlier attempts count against it)
        opts.timeout = turn
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        let outcome = turn
            .run_on(&mut process, (wanted, &t), &opts, control)
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
        if ended_unreached && attempt < REPLACEMENTS && !turn.cancel.is_cancelled() {
            // it had ended (killed, crashed) before codex accepted the turn: nothing of the
            // turn ran there, and a new one runs it on the same thread
            attempt += 1;
            tracing::info!(
                attempt,
                "the warm codex app-server had ended before the turn reached it; starting a new one"
            );
            process.close().await;
            continue;
        }
        // once the turn ended, not while it runs (a spare's start-up takes the CPU the turn
        // needs: on 2 cores it made a first turn a third slower), nor before a replacement's
        // start (starts are one at a time)
        if spare_wanted {
            turn.shared.warm.refill(server.clone());
        }
        return conclude(turn, process, outcome);
    }
}

/// A new warm process for a turn: the spare when it was started the same way, else one started
/// into a free place under `max_warm` by the one warm start ([`start_warm`]), whose
/// process is reported to the actor (on record under the session) as it spawns.
pub(super) async fn obtain(
    turn: &TurnEnv<'_>,
    server: &SpawnSpec,
    key: &crate::codex::process::WarmKey,
) -> NextWarm {
    // a spare started the same way for this directory and client: no start-up wait (the next
    // spare starts once this turn ended: see `warm_turn`)
    if let Some(w) = turn.shared.warm.take_spare(key, turn.session).await {
        turn.sink.spawned(w.info());
        return NextWarm::Process(w);
    }
    let hook = turn.sink.spawn_hook();
    let started = start_warm(
        StartFor {
            shared: turn.shared,
            secrets: &turn.client.secrets,
            cancel: turn.cancel,
            timeout: turn.timeout,
        },
        server,
        || Some(hook.clone()),
        || {},
    )
    .await;
    match started {
        Ok(WarmStart::Process(w)) => NextWarm::Process(w),
        Ok(WarmStart::Exec) => NextWarm::Exec,
        Err(e) => NextWarm::Done(Err(e)),
    }
}

/// A warm turn's answer (with what codex recorded of it), and the process when it may serve
/// the next turn.
pub(super) fn conclude(
    turn: &TurnEnv<'_>,
    process: WarmProcess,
    outcome: TurnOutcome,
) -> (TurnRun, Option<WarmProcess>) {
    log_finished(&outcome);
    // read from the rollout codex reported for the thread (no walk of the sessions directory)
    let recorded = outcome.output.thread_id.and_then(|t| {
        crate::codex::rollout::turn_context_of(&turn.client.codex_home, &t, process.rollout())
    });
    let keep = process.reusable().then_some(process);
    (
        Ok(TurnEnd {
            outcome,
            recorded,
            on: Backend::AppServer,
        }),
        keep,
    )
}
