//! The cap on warm app-server processes (`max_warm`): which sessions hold one, which of them
//! are idle, and which was used least recently. Each process is owned by its session actor
//! (held in its state between turns, in its turn task during a turn); this pool only counts
//! and picks whom to ask to close theirs when a new one is needed and the cap is reached.

use std::sync::Mutex;
use std::time::Instant;

use ractor::ActorRef;

use crate::actors::session::SessionMessage;
use crate::codex::process::WarmKey;
use crate::security::ids::SessionId;

struct Entry {
    id: SessionId,
    actor: ActorRef<SessionMessage>,
    last_used: Instant,
    busy: bool,
}

/// What [`WarmPool::acquire`] decided.
pub enum Acquired {
    /// Use (or start) a warm process (the least recently used idle holder may have been asked
    /// to close its own, to stay within the cap).
    Granted,
    /// Every warm process is busy and the cap is reached: run this turn with `codex exec`.
    Full,
}

/// The warm processes of all sessions, for the cap.
pub struct WarmPool {
    max: usize,
    /// One app-server started ahead, for the next new session in the directory (and with the
    /// client) of the last one started: its key and the process. Owned here until a session
    /// takes it; closed after the idle timeout unused, and at shutdown.
    spare: Mutex<Option<(WarmKey, crate::codex::process::WarmProcess)>>,
    entries: Mutex<Vec<Entry>>,
    /// Whether this codex has a usable app-server, once known: the first warm start (or a
    /// probe) tells. `Err` holds why not; turns then run with `codex exec`.
    health: Mutex<Option<std::result::Result<(), String>>>,
}

impl WarmPool {
    /// A pool of at most `max` warm processes.
    pub fn new(max: usize) -> Self {
        WarmPool {
            max: max.max(1),
            spare: Mutex::new(None),
            entries: Mutex::new(Vec::new()),
            health: Mutex::new(None),
        }
    }

    /// The spare, when it was started with `key` (the same invocation: directory, client
    /// environment, CODEX_HOME, binary, pins) and is fit to use.
    pub fn take_spare(&self, key: &WarmKey) -> Option<crate::codex::process::WarmProcess> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        match spare.take() {
            Some((k, mut w)) if &k == key => {
                if w.reusable() && !w.exited() {
                    Some(w)
                } else {
                    // dead or distrusted: dropped (and killed, if anything is left of it)
                    None
                }
            }
            other => {
                *spare = other;
                None
            }
        }
    }

    /// Keep `w` as the spare for `key`; returns the one it replaces (to be closed).
    fn put_spare(
        &self,
        key: WarmKey,
        w: crate::codex::process::WarmProcess,
    ) -> Option<crate::codex::process::WarmProcess> {
        self.spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((key, w))
            .map(|(_, old)| old)
    }

    /// Whether a spare is kept.
    fn has_spare(&self) -> bool {
        self.spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Close the spare (shutdown).
    pub async fn close_spare(&self) {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((_, w)) = spare {
            w.close().await;
        }
    }

    /// Whether the app-server is known to be unusable (then turns run with `codex exec`).
    pub fn unusable(&self) -> Option<String> {
        match &*self.health.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Err(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Whether a start (or a probe) has been seen yet.
    pub fn known(&self) -> bool {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Record what a warm start (or a probe) found.
    pub fn record(&self, found: std::result::Result<(), String>) {
        if let Err(why) = &found {
            tracing::warn!(
                "codex has no usable app-server ({why}); session turns run with codex exec"
            );
        }
        *self.health.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id` is about to run a turn on a warm process (its own, or a new one). A session
    /// already holding one is marked busy; a new holder is admitted when there is room, or
    /// when the least recently used idle holder can be asked to close its process.
    pub fn acquire(&self, id: &SessionId, actor: &ActorRef<SessionMessage>) -> Acquired {
        let mut entries = self.lock();
        if let Some(e) = entries.iter_mut().find(|e| &e.id == id) {
            e.busy = true;
            e.last_used = Instant::now();
            return Acquired::Granted;
        }
        // the spare counts against the cap, and goes first
        if entries.len() + usize::from(self.has_spare()) >= self.max {
            let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((_, w)) = spare {
                tokio::spawn(w.close());
            }
        }
        if entries.len() >= self.max {
            let victim = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.busy)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    let v = entries.swap_remove(i);
                    tracing::info!(session = %v.id, "closing the least recently used warm codex process (max_warm reached)");
                    let _ = v.actor.cast(SessionMessage::CloseWarm);
                }
                None => return Acquired::Full,
            }
        }
        entries.push(Entry {
            id: id.clone(),
            actor: actor.clone(),
            last_used: Instant::now(),
            busy: true,
        });
        Acquired::Granted
    }

    /// Session `id`'s turn ended and it keeps its warm process (counted again if it had been
    /// picked for closing while its turn ran).
    pub fn idle(&self, id: &SessionId, actor: &ActorRef<SessionMessage>) {
        let mut entries = self.lock();
        match entries.iter_mut().find(|e| &e.id == id) {
            Some(e) => {
                e.busy = false;
                e.last_used = Instant::now();
            }
            None => entries.push(Entry {
                id: id.clone(),
                actor: actor.clone(),
                last_used: Instant::now(),
                busy: false,
            }),
        }
    }

    /// Session `id` no longer holds a warm process.
    pub fn release(&self, id: &SessionId) {
        self.lock().retain(|e| &e.id != id);
    }

    /// How many sessions hold a warm process.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session holds one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Start a `codex app-server` with `common` in a scratch directory, complete the handshake and
/// close it: whether this codex binary has a usable app-server (for `ping` and `doctor`).
pub async fn probe(common: &crate::codex::argv::Common) -> std::result::Result<(), String> {
    let (_dir, cwd) = crate::actors::oneshot::scratch_dir().map_err(|e| e.to_string())?;
    let spec = crate::codex::argv::build_app_server(common, cwd).map_err(|e| e.to_string())?;
    match crate::codex::process::WarmProcess::spawn(&spec, None).await {
        Ok(w) => {
            w.close().await;
            Ok(())
        }
        Err(e) => Err(crate::security::redact::redact(&e.to_string()).into_owned()),
    }
}

/// Start a spare app-server from `spec` in the background, replacing the one there (closed);
/// it closes itself after the idle timeout if no session took it.
/// The task holds the shared state weakly: a stopped server's store is not kept open by it.
pub fn refill(shared: &std::sync::Arc<crate::actors::Shared>, spec: crate::codex::argv::SpawnSpec) {
    // the spare counts against the cap: none when the warm sessions fill it
    if shared.warm.len() >= shared.warm.max() {
        return;
    }
    let key = crate::codex::process::key_of(&spec);
    let idle = shared.idle_timeout;
    let weak = std::sync::Arc::downgrade(shared);
    tokio::spawn(async move {
        let Ok(w) = crate::codex::process::WarmProcess::spawn(&spec, None).await else {
            return;
        };
        let pid = w.info().pid;
        let Some(shared) = weak.upgrade() else {
            w.close().await;
            return;
        };
        // the sessions may have filled the cap while it started
        if shared.warm.len() >= shared.warm.max() {
            drop(shared);
            w.close().await;
            return;
        }
        let old = shared.warm.put_spare(key, w);
        drop(shared);
        if let Some(old) = old {
            old.close().await;
        }
        // until a session takes it: closed once idle too long, forgotten (and reaped) as soon
        // as it exits by itself
        let until = tokio::time::Instant::now() + idle;
        loop {
            let now = tokio::time::Instant::now();
            tokio::time::sleep_until((now + std::time::Duration::from_secs(1)).min(until)).await;
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let done = {
                let mut spare = shared.warm.spare.lock().unwrap_or_else(|p| p.into_inner());
                match spare.as_mut() {
                    Some((_, w)) if w.info().pid == pid => {
                        if w.exited() || tokio::time::Instant::now() >= until {
                            Some(spare.take())
                        } else {
                            None
                        }
                    }
                    // taken by a session, or replaced
                    _ => Some(None),
                }
            };
            match done {
                None => continue,
                Some(Some((_, w))) => {
                    w.close().await;
                    return;
                }
                Some(None) => return,
            }
        }
    });
}
