//! The one start of a warm `codex app-server` for a call, a session turn's and a session-less
//! call's alike ([`start_warm`]): a place under `max_warm` (waiting for one a closing process
//! gives back), then the start, tried again when the process is killed before it answers
//! `initialize`; `codex exec` when no place came free in time, or when this codex's app-server
//! cannot start (recorded in the pool, so the next calls run with exec too).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::actors::shared::Shared;
use crate::codex::argv::SpawnSpec;
use crate::codex::process::{APP_SERVER_REPLACEMENTS, ProcessError, SpawnHook, WarmProcess};
use crate::error::{Error, Result};
use crate::security::redact::{ClientSecrets, redact};

/// How long a start waits for a place under `max_warm` (processes still closing, a fork's
/// one-off) before its call runs with `codex exec` instead.
pub(crate) const SLOT_WAIT: Duration = Duration::from_secs(10);

/// How long a start waits for the close [`crate::actors::pool::warm::WarmPool::acquire`] asked for
/// before it asks another idle holder to close its process (a close takes at most its grace
/// and a kill).
pub(crate) const CLOSE_PATIENCE: Duration = Duration::from_secs(5);

/// What a warm start for a call came to.
#[expect(
    clippy::large_enum_variant,
    reason = "one value per start, moved once, never stored"
)]
pub(crate) enum WarmStart {
    /// A live process, holding its place under `max_warm`.
    Process(WarmProcess),
    /// No app-server for this call: it runs with `codex exec`.
    Exec,
}

/// Who starts, and within what: the pool and store, the caller's secrets (for the log), its
/// cancel and the call's whole timeout (a start-up counts against it).
pub(crate) struct StartFor<'a> {
    pub shared: &'a Shared,
    pub secrets: &'a ClientSecrets,
    pub cancel: &'a CancellationToken,
    pub timeout: Duration,
}

/// Start a warm app-server from `spec` for a call (see the module). `hook` makes each
/// attempt's spawn hook (what puts its process on record); `forget` undoes a failed attempt's
/// record. An error is the call's own end: cancelled, timed out, or a start that failed for a
/// reason of the call's (its directory changed under it, no processes left).
///
/// One piece (about 90 lines): one retry loop, where each attempt's place under `max_warm`,
/// its race against the call's cancel and time left, and the reading of how it failed (another
/// attempt, exec for this call and the next, or the call's end) decide the next step together.
pub(crate) async fn start_warm(
    f: StartFor<'_>,
    spec: &SpawnSpec,
    hook: impl Fn() -> Option<SpawnHook>,
    forget: impl Fn(),
) -> Result<WarmStart> {
    let t0 = Instant::now();
    let mut killed = 0;
    loop {
        let remaining = f.timeout.saturating_sub(t0.elapsed());
        let slot = f
            .shared
            .warm
            .slot(SLOT_WAIT.min(remaining), CLOSE_PATIENCE, f.cancel)
            .await;
        let Some(slot) = slot else {
            if f.cancel.is_cancelled() {
                return Err(Error::Cancelled { partial: None });
            }
            if t0.elapsed() >= f.timeout {
                return Err(Error::TimedOut {
                    after: f.timeout,
                    partial: None,
                });
            }
            tracing::info!(
                "no warm codex process came free in time (max_warm); this call runs with codex exec"
            );
            return Ok(WarmStart::Exec);
        };
        let spawned = tokio::select! {
            biased;
            _ = f.cancel.cancelled() => Err(Error::Cancelled { partial: None }),
            _ = tokio::time::sleep(f.timeout.saturating_sub(t0.elapsed())) => Err(Error::TimedOut {
                after: f.timeout,
                partial: None,
            }),
            w = WarmProcess::spawn(spec, hook()) => w.map_err(Error::from),
        };
        tracing::debug!(
            spawn_ms = t0.elapsed().as_millis() as u64,
            "warm process start"
        );
        match spawned {
            Ok(mut w) => {
                w.hold(slot);
                if !f.shared.warm.known() {
                    f.shared.warm.record(Ok(()));
                }
                return Ok(WarmStart::Process(w));
            }
            Err(e @ (Error::Cancelled { .. } | Error::TimedOut { .. })) => {
                forget();
                return Err(e);
            }
            // killed from outside during the handshake: another start
            Err(Error::Process(ProcessError::KilledAtStart { signal }))
                if killed < APP_SERVER_REPLACEMENTS =>
            {
                forget();
                killed += 1;
                tracing::info!(
                    signal,
                    attempt = killed,
                    "codex app-server was killed before it answered `initialize`; starting another"
                );
            }
            // the binary's app-server failed to start or to answer: this call, and the next
            // ones (sessions' and session-less calls' alike), run with codex exec (the details
            // go to the log only, redacted for this client: other clients see the bare reason)
            Err(e @ (Error::Codex { .. } | Error::Process(_)))
                if !matches!(e, Error::Process(ProcessError::Spawn { .. })) =>
            {
                forget();
                tracing::warn!(
                    error = %f.secrets.redact(&redact(&e.to_string())),
                    "codex app-server did not start"
                );
                f.shared.warm.record(Err(
                    "codex app-server did not start or answer (the server log says why)".into(),
                ));
                return Ok(WarmStart::Exec);
            }
            // the call's directory changed under it, or the OS refused the spawn (out of
            // processes, memory, file descriptors): this call fails, the backend stays
            Err(e) => {
                forget();
                return Err(e);
            }
        }
    }
}
