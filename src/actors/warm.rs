//! The cap on warm app-server processes (`max_warm`): which sessions hold one, which of them
//! are idle, and which was used least recently. Each process is owned by its session actor
//! (held in its state between turns, in its turn task during a turn); this pool only counts
//! and picks whom to ask to close theirs when a new one is needed and the cap is reached.

use std::sync::Mutex;
use std::time::Instant;

use ractor::ActorRef;

use crate::actors::session::SessionMessage;
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
    entries: Mutex<Vec<Entry>>,
}

impl WarmPool {
    /// A pool of at most `max` warm processes.
    pub fn new(max: usize) -> Self {
        WarmPool {
            max: max.max(1),
            entries: Mutex::new(Vec::new()),
        }
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
