//! The task store of a process: rmcp's [`TaskManager`], who started each task, and the MRTR
//! calls waiting on an answer.

use std::sync::Arc;
use std::time::Duration;

use rmcp::task_manager::TaskManager;

use super::mrtr::Rounds;
use super::owner::TaskOwner;

/// One task store for every connection a process serves (rmcp's [`TaskManager`]), plus who
/// started each task: `tasks/get`, `tasks/update` and `tasks/cancel` from any other connection
/// get "unknown task", as for an id that never existed.
#[derive(Clone, Default)]
pub struct Tasks {
    pub(super) manager: TaskManager,
    /// Task id → its owner, and when the manager has surely forgotten the task.
    owners:
        Arc<std::sync::Mutex<std::collections::HashMap<String, (TaskOwner, std::time::Instant)>>>,
    /// Plain calls of 2026-07-28 clients waiting on a question's answer (MRTR).
    pub(super) rounds: Rounds,
}

impl Tasks {
    /// An empty store.
    pub fn new() -> Tasks {
        Tasks::default()
    }

    fn owners(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (TaskOwner, std::time::Instant)>>
    {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record `owner` for a new task; forget owners of tasks the manager dropped. rmcp keeps a
    /// task for its TTL from creation plus one more TTL after it ended, which is at most two
    /// TTLs after creation since a task never outlives its TTL.
    pub(super) fn record(&self, id: &str, owner: TaskOwner, ttl: Duration) {
        let now = std::time::Instant::now();
        let mut owners = self.owners();
        owners.retain(|_, (_, until)| *until > now);
        owners.insert(
            id.to_owned(),
            (owner, now + 2 * ttl + Duration::from_secs(60)),
        );
    }

    /// Whether `owner` started task `id`.
    pub(super) fn owned_by(&self, id: &str, owner: &TaskOwner) -> bool {
        self.owners().get(id).is_some_and(|(o, _)| o == owner)
    }
}
