//! Where a call's progress goes, and the task that forwards it (with a heartbeat). A leaf of
//! the MCP layer: the handler, the tools and MRTR name it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::task_manager::TaskContext;

use crate::actors::Progress;

/// Where one call's progress goes.
#[derive(Clone)]
pub(crate) enum ProgressTarget {
    /// `notifications/progress` for the request's progress token.
    Notify {
        peer: rmcp::Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
    },
    /// The status message of the call's task (read by `tasks/get`).
    Task(TaskContext),
    /// The request now waiting on a call that asks through MRTR (its first request, then each
    /// retry); none between rounds.
    Follow(Follow),
}

/// Where a call's progress goes now: the request waiting on it, if any (an MRTR call's).
pub(crate) type Follow = Arc<Mutex<Option<ProgressTarget>>>;

/// Forwards progress lines to the client, as `notifications/progress` with strictly increasing
/// progress or as the task's status message, plus a heartbeat every `heartbeat` while nothing
/// else happens (host timeouts reset on progress; the default 10 s keeps even a 30 s host
/// timeout alive). Stops when the returned guard is dropped. `target` is a call's
/// (`CallCtx::progress`).
pub(crate) fn progress_for(
    target: &Option<ProgressTarget>,
    heartbeat: Duration,
) -> (Option<Progress>, Option<ProgressGuard>) {
    let Some(target) = target.clone() else {
        return (None, None);
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let task = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut n: u64 = 0;
        let mut last = String::from("starting");
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m { Some(m) => { last = m.clone(); m } None => break },
                _ = tokio::time::sleep(heartbeat) => format!("{last} ({}s elapsed)", started.elapsed().as_secs()),
            };
            n += 1;
            match &target {
                ProgressTarget::Notify { peer, token } => {
                    let p =
                        ProgressNotificationParam::new(token.clone(), n as f64).with_message(msg);
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
                ProgressTarget::Task(t) => t.set_status_message(msg),
                ProgressTarget::Follow(cell) => {
                    let now = cell.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    if let Some(ProgressTarget::Notify { peer, token }) = now {
                        let p = ProgressNotificationParam::new(token, n as f64).with_message(msg);
                        // the request may have just been answered: its token is then stale
                        let _ = peer.notify_progress(p).await;
                    }
                }
            }
        }
    });
    // what a host shows of a turn: model text (commands, paths, queries) written so that only
    // what a person can read as it is reaches the host (escape sequences, bidirectional and
    // zero-width characters as `\u{…}`, on one line)
    let sink: Progress = Arc::new(move |m: String| {
        let _ = tx.send(crate::security::shown::visible(&m, PROGRESS_CHARS));
    });
    (Some(sink), Some(ProgressGuard(task)))
}

/// Longest progress line or task status message sent.
const PROGRESS_CHARS: usize = 500;

/// Ends the progress task.
pub(crate) struct ProgressGuard(tokio::task::JoinHandle<()>);

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
