//! The task store of a process: rmcp's [`TaskManager`], who started each task, the MRTR calls
//! waiting on an answer, and (in the store's owner) each task's record in the session store,
//! so that a task outlives the connection and the process that ran it.
//!
//! Who may see a task: the connection that started it; once that connection is gone, a
//! connection of the same host ([`HostKey`]: the same client name, Codex home and roots, of
//! the same user, since only the store's user reaches its socket) that knows its id (a
//! random UUID: the id is a capability). A host that restarts (Claude Code's `--continue`)
//! polls its task again from a new process and is answered: by the same owner while the task
//! runs, from the store after it ended and the owner exited, or as interrupted when the owner
//! was killed mid-turn.
//!
//! What the store keeps of a task is a [`KeptTask`]: its status, status message and times, and
//! its result or error once it ended. A running task's open questions (`inputRequests`: a
//! question's page address and the code its Approve needs) have no place in it, so no process
//! that reads the store's files learns them; a task kept while a question was open reads back
//! as `working`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use rmcp::task_manager::TaskManager;
use serde::{Deserialize, Serialize};

use super::mrtr::Rounds;
use super::task_owner::TaskOwner;
use crate::actors::Bridge;
use crate::actors::task_records::StoredTask;
use crate::approval::ask::Channel;
use crate::approval::ask::waiters::Waiters;

/// How a host is recognised across its restarts (see the module's doc): `None` for what is
/// not kept past its connection (the HTTP listener's requests).
pub(crate) type HostKey = Option<String>;

/// Largest task record kept in the store (its result included): a larger result is kept as
/// an error saying so (the session keeps the turn; the live task still answers it whole).
pub const MAX_STORED_TASK_BYTES: usize = 4 * 1024 * 1024;

/// How often a running task's status message is written to the store.
const MIRROR_EVERY: Duration = Duration::from_secs(1);

/// What the store says of a task the owner was killed under.
pub const INTERRUPTED: &str = "interrupted: the codex-mcp-bridge process that ran this task \
     stopped (it was shut down, killed or crashed) before the turn ended, and its codex process was \
     stopped; a session's record says `interrupted` too, and the session resumes on its next \
     turn. Call the tool again.";

/// What the store keeps of a task: the task without its payload, and its result or error once
/// it ended. Nothing of a question the task has open: no place for its input requests (a
/// page's address, the code its Approve needs, a form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeptTask {
    /// Its id, status (`input_required` says only that a question is open), status message
    /// and times.
    #[serde(flatten)]
    task: Task,
    /// A completed task's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<JsonObject>,
    /// A failed task's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<JsonObject>,
}

impl KeptTask {
    /// What is kept of `task`: everything but a running task's open questions.
    fn of(task: &DetailedTask) -> KeptTask {
        let (result, error) = match &task.payload {
            TaskPayload::Completed { result } => (Some(result.clone()), None),
            TaskPayload::Failed { error } => (None, Some(error.clone())),
            // working, cancelled, or a question open (never kept: only that one is)
            _ => (None, None),
        };
        KeptTask {
            task: task.task.clone(),
            result,
            error,
        }
    }

    /// The task as a connection is answered from the store: one kept while a question was open
    /// reads as `working` (its question lived in the process that asked it); `None` when the
    /// record does not read (an ended task without its result or error).
    fn detailed(self) -> Option<DetailedTask> {
        let payload = match self.task.status {
            TaskStatus::Completed => TaskPayload::Completed {
                result: self.result?,
            },
            TaskStatus::Failed => TaskPayload::Failed { error: self.error? },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            _ => TaskPayload::Working,
        };
        Some(DetailedTask::new(self.task, payload))
    }
}

/// Who started a task, and what it is kept as.
#[derive(Clone)]
struct Started {
    owner: TaskOwner,
    host: HostKey,
    /// A background call's handle (`session:<id>`, `review:<id>`).
    handle: Option<String>,
    /// When the manager has surely forgotten it.
    until: Instant,
    /// When its record may be forgotten (ms since the epoch).
    expires_ms: u64,
    /// Its end was written: no later write of a running state replaces it.
    ended: bool,
}

/// One task store for every connection a process serves.
#[derive(Clone, Default)]
pub struct Tasks {
    pub(super) manager: TaskManager,
    started: Arc<Mutex<HashMap<String, Started>>>,
    /// Connections that have closed (their tasks go to their host's next connection).
    closed: Arc<Mutex<HashSet<u64>>>,
    /// Background handle → its latest task.
    background: Arc<Mutex<HashMap<String, String>>>,
    /// Background handle → the clients waiting on it.
    waiters: Arc<Mutex<HashMap<String, Waiters<Channel>>>>,
    /// Where records are kept (the store's owner); none: in memory only.
    keep: Option<Bridge>,
    /// The owner is shutting down: what still runs is recorded as interrupted, and no end
    /// written after that replaces it.
    closing: Arc<std::sync::atomic::AtomicBool>,
    /// Plain calls of 2026-07-28 clients waiting on a question's answer (MRTR).
    pub(super) rounds: Rounds,
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The handle `wait` finds a background session's turn by, for `host`: a host finds only the
/// background turns it started (another host's `wait` finds none, and cannot replace them).
pub(super) fn session_handle(id: &str, host: &HostKey) -> String {
    format!("session:{id}\n{}", host.as_deref().unwrap_or(""))
}

/// The handle `wait` finds a background review by, for `host` (as [`session_handle`]).
pub(super) fn review_handle(id: &str, host: &HostKey) -> String {
    format!("review:{id}\n{}", host.as_deref().unwrap_or(""))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `task` has ended.
pub(super) fn ended(task: &DetailedTask) -> bool {
    !matches!(
        task.status(),
        TaskStatus::Working | TaskStatus::InputRequired
    )
}

impl Tasks {
    /// An empty store, in memory only.
    pub fn new() -> Tasks {
        Tasks::default()
    }

    /// The store of the store's owner: records are kept through `bridge`. Tasks left running by
    /// an owner that died are marked interrupted first, and expired records forgotten.
    pub async fn kept(bridge: Bridge) -> Tasks {
        let tasks = Tasks {
            keep: Some(bridge),
            ..Tasks::default()
        };
        tasks.recover().await;
        tasks
    }

    /// How many tasks have not ended (a task's turn, or a background call's, keeps the owner
    /// daemon alive).
    pub fn running(&self) -> usize {
        self.manager.running_task_count()
    }

    /// Connection `n` closed: its tasks go on, and its host's next connection may see them.
    pub(super) fn connection_closed(&self, n: u64) {
        lock(&self.closed).insert(n);
    }

    /// Record a new task: who started it, as whose host, under which background handle; its
    /// first record is written at once.
    pub(super) fn record(
        &self,
        task: &rmcp::model::Task,
        owner: TaskOwner,
        host: HostKey,
        handle: Option<String>,
        ttl: Duration,
    ) {
        let now = Instant::now();
        let keep_for = 2 * ttl + Duration::from_secs(60);
        let started = Started {
            owner,
            host,
            handle: handle.clone(),
            until: now + keep_for,
            expires_ms: now_ms() + keep_for.as_millis() as u64,
            ended: false,
        };
        {
            let mut all = lock(&self.started);
            all.retain(|_, s| s.until > now);
            all.insert(task.task_id.clone(), started);
        }
        if let Some(h) = handle {
            lock(&self.background).insert(h, task.task_id.clone());
        }
        self.save(&DetailedTask::new(task.clone(), TaskPayload::Working));
        if self.keep.is_some() {
            tokio::spawn(self.clone().mirror(task.task_id.clone()));
        }
    }

    /// Write a running task's status to the store as it changes, until it ends (its end is
    /// written by [`Tasks::finish`]).
    async fn mirror(self, id: String) {
        let mut last: Option<(TaskStatus, Option<String>)> = None;
        loop {
            tokio::time::sleep(MIRROR_EVERY).await;
            let Ok(now) = self.manager.get_task(&id) else {
                return;
            };
            if ended(&now) {
                // its end as rmcp settled it, when the call's own end never came (a task
                // past its TTL is failed and its future dropped); else already written
                self.save(&now);
                return;
            }
            let seen = (now.status(), now.task.status_message.clone());
            if last.as_ref() != Some(&seen) {
                self.save(&now);
                last = Some(seen);
            }
        }
    }

    /// Write a task's end to the store, durably, before the manager reports it: an owner that
    /// exits once no task runs has kept it.
    pub(super) async fn finish(&self, id: &str, payload: TaskPayload) {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let Ok(now) = self.manager.get_task(id) else {
            return;
        };
        let mut task = now.task;
        task.last_updated_at = rmcp::task_manager::current_timestamp();
        self.save(&DetailedTask::new(task, payload));
        if let Some(b) = &self.keep
            && let Err(e) = b.flush_tasks().await
        {
            tracing::warn!(error = %e, "could not flush a task's end to the store");
        }
    }

    /// Keep `task`'s record (for a task of a connection: an HTTP request's is not kept). Under
    /// the lock of who started what, so that an end, once written, is never replaced by a
    /// running state a mirror read just before it.
    fn save(&self, task: &DetailedTask) {
        let Some(bridge) = &self.keep else { return };
        let mut all = lock(&self.started);
        let Some(started) = all.get_mut(&task.task.task_id) else {
            return;
        };
        let Some(host) = started.host.clone() else {
            return;
        };
        if started.ended {
            return;
        }
        started.ended = ended(task);
        let record = StoredTask {
            id: task.task.task_id.clone(),
            host,
            handle: started.handle.clone(),
            expires_ms: started.expires_ms,
            task: within_bound(task),
        };
        if let Err(e) = bridge.save_task(&record) {
            tracing::warn!(error = %e, "could not keep a task's record in the store");
        }
    }

    /// The owner shuts down (its turns are stopped next): every task still running is kept as
    /// interrupted, durably, before anything else can end it otherwise.
    pub async fn interrupt_running(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let ids: Vec<String> = lock(&self.started).keys().cloned().collect();
        let mut marked = 0;
        for id in ids {
            let Ok(t) = self.manager.get_task(&id) else {
                continue;
            };
            if ended(&t) {
                continue;
            }
            self.save(&interrupted(t.task));
            marked += 1;
        }
        if marked > 0
            && let Some(b) = &self.keep
        {
            tracing::info!(
                marked,
                "tasks still running as the owner stops: kept as interrupted"
            );
            let _ = b.flush_tasks().await;
        }
    }

    /// Mark what an owner that died left running as interrupted; forget expired records.
    async fn recover(&self) {
        let Some(bridge) = &self.keep else { return };
        let stored = match bridge.stored_tasks::<KeptTask>() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the stored tasks");
                return;
            }
        };
        let now = now_ms();
        let mut marked = 0;
        // background handles → their latest task, so that `wait` never scans the store
        let mut latest: HashMap<String, (String, String)> = HashMap::new();
        for mut t in stored {
            if t.expires_ms < now {
                let _ = bridge.forget_task(&t.id);
                continue;
            }
            let Some(task) = t.task.clone().detailed() else {
                let _ = bridge.forget_task(&t.id);
                continue;
            };
            if let Some(h) = &t.handle {
                let created = task.task.created_at.clone();
                if latest.get(h).is_none_or(|(_, at)| *at < created) {
                    latest.insert(h.clone(), (t.id.clone(), created));
                }
            }
            if ended(&task) {
                continue;
            }
            t.task = KeptTask::of(&interrupted(task.task));
            if bridge.save_task(&t).is_ok() {
                marked += 1;
            }
        }
        lock(&self.background).extend(latest.into_iter().map(|(h, (id, _))| (h, id)));
        if marked > 0 {
            tracing::warn!(
                marked,
                "tasks left running by an owner that stopped: marked interrupted"
            );
            let _ = bridge.flush_tasks().await;
        }
    }

    /// Whether a connection of `owner` and `host` may see a task `started` so.
    fn allowed(&self, started: &Started, owner: &TaskOwner, host: &HostKey) -> bool {
        if &started.owner == owner {
            return true;
        }
        let gone = match started.owner {
            TaskOwner::Connection(n) => lock(&self.closed).contains(&n),
            TaskOwner::Http(_) => false,
        };
        gone && started.host.is_some() && &started.host == host
    }

    /// Task `id` as `owner` (of `host`) may see it: live, or kept; `None`: unknown to it.
    pub(super) fn get(&self, id: &str, owner: &TaskOwner, host: &HostKey) -> Option<Seen> {
        let started = lock(&self.started).get(id).cloned();
        match started {
            Some(s) if !self.allowed(&s, owner, host) => None,
            Some(_) => match self.manager.get_task(id) {
                Ok(t) => Some(Seen::Live(Box::new(t))),
                Err(_) => self.stored(id, host.as_deref()).map(Seen::Kept),
            },
            None => self.stored(id, host.as_deref()).map(Seen::Kept),
        }
    }

    /// A kept record of task `id` for `host`, not expired.
    fn stored(&self, id: &str, host: Option<&str>) -> Option<Box<DetailedTask>> {
        let host = host?;
        let t = self.keep.as_ref()?.load_task::<KeptTask>(id).ok()??;
        if t.host != host || t.expires_ms < now_ms() {
            return None;
        }
        t.task.detailed().map(Box::new)
    }

    /// The latest task of background handle `handle` (this process's, or one kept in the store
    /// that [`Tasks::kept`] indexed).
    pub(super) fn of_handle(&self, handle: &str) -> Option<String> {
        lock(&self.background).get(handle).cloned()
    }

    /// The waiters of background handle `handle` (a new turn of it keeps them).
    pub(super) fn waiters_of(&self, handle: &str) -> Waiters<Channel> {
        lock(&self.waiters)
            .entry(handle.to_owned())
            .or_default()
            .clone()
    }

    /// Whether `handle`'s latest task runs in this process.
    pub(super) fn running_handle(&self, handle: &str) -> bool {
        let id = lock(&self.background).get(handle).cloned();
        id.and_then(|id| self.manager.get_task(&id).ok())
            .is_some_and(|t| !ended(&t))
    }

    /// Task `id` for a waiter that holds its handle: live, or kept (whoever started it).
    pub(super) fn by_handle_id(&self, id: &str) -> Option<DetailedTask> {
        if let Ok(t) = self.manager.get_task(id) {
            return Some(t);
        }
        let t = self.keep.as_ref()?.load_task::<KeptTask>(id).ok()??;
        if t.expires_ms < now_ms() {
            return None;
        }
        t.task.detailed()
    }
}

/// A task as a connection may see it.
pub(super) enum Seen {
    /// Run by this process (its input requests can be answered, it can be cancelled).
    Live(Box<DetailedTask>),
    /// Kept in the store by an earlier process: ended (or interrupted).
    Kept(Box<DetailedTask>),
}

impl Seen {
    pub(super) fn task(self) -> DetailedTask {
        match self {
            Seen::Live(t) | Seen::Kept(t) => *t,
        }
    }
}

/// `task` as its record keeps it ([`KeptTask`]): whole, or past [`MAX_STORED_TASK_BYTES`] an
/// error saying so.
fn within_bound(task: &DetailedTask) -> KeptTask {
    let kept = KeptTask::of(task);
    if serde_json::to_vec(&kept).map_or(0, |v| v.len()) <= MAX_STORED_TASK_BYTES {
        return kept;
    }
    let too_big = DetailedTask::new(
        task.task.clone(),
        TaskPayload::Failed {
            error: error_object(&format!(
                "the task's result is larger than the {} MiB a stored task keeps; the \
                 session's record keeps its turn (getSession)",
                MAX_STORED_TASK_BYTES / (1024 * 1024)
            )),
        },
    );
    KeptTask::of(&too_big)
}

/// `task` as it reads back once the process that ran it stopped mid-turn.
fn interrupted(mut task: rmcp::model::Task) -> DetailedTask {
    task.status_message = Some("interrupted".into());
    task.last_updated_at = rmcp::task_manager::current_timestamp();
    DetailedTask::new(
        task,
        TaskPayload::Failed {
            error: error_object(INTERRUPTED),
        },
    )
}

/// A JSON-RPC error object with `message`.
pub(super) fn error_object(message: &str) -> rmcp::model::JsonObject {
    let mut o = rmcp::model::JsonObject::new();
    o.insert("code".into(), (-32603).into());
    o.insert("message".into(), message.into());
    o
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitRequest, ElicitRequestParams, InputRequest, InputRequests};

    use super::*;

    /// A task asking on a page, as the page route makes it: the URL-mode elicitation names the
    /// page and the code.
    fn asking(url: &str, code: &str) -> DetailedTask {
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "Codex: Run a command unsandboxed? {}{code}",
                crate::logging::PAGE_CODE_LEAD
            ),
            url: url.to_owned(),
            elicitation_id: "e1".into(),
        };
        let mut requests = InputRequests::new();
        requests.insert(
            "question-1".into(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        let task = Task::new("t1", TaskStatus::InputRequired, "2026-01-01", "2026-01-01")
            .with_status_message("waiting for a person to answer: Run a command");
        DetailedTask::new(
            task,
            TaskPayload::InputRequired {
                input_requests: requests,
            },
        )
    }

    #[test]
    fn a_kept_task_holds_no_open_question_and_reads_back_working() {
        let (id, code) = ("ab12".repeat(16), "042917");
        let url = format!("http://127.0.0.1:4242/q/{id}");
        let task = asking(&url, code);
        // the payload as rmcp answers it holds both (what the store kept before)
        let whole = serde_json::to_string(&task).unwrap();
        assert!(whole.contains(&id) && whole.contains(code), "{whole}");
        let kept = within_bound(&task);
        let bytes = serde_json::to_string(&kept).unwrap();
        assert!(!bytes.contains(&id), "{bytes}");
        assert!(!bytes.contains(code), "{bytes}");
        assert!(!bytes.contains("inputRequests"), "{bytes}");
        assert!(bytes.contains("\"status\":\"input_required\""), "{bytes}");
        let back: KeptTask = serde_json::from_str(&bytes).unwrap();
        let read = back.detailed().expect("it reads");
        assert_eq!(read.status(), TaskStatus::Working);
        assert_eq!(
            read.task.status_message.as_deref(),
            Some("waiting for a person to answer: Run a command")
        );
        // a record an older version kept with the question reads without it
        let old: KeptTask = serde_json::from_str(&whole).unwrap();
        assert!(!serde_json::to_string(&old).unwrap().contains(code));
    }

    #[test]
    fn an_ended_task_is_kept_whole() {
        let mut result = JsonObject::new();
        result.insert("content".into(), serde_json::json!([]));
        let task = Task::new("t2", TaskStatus::Completed, "2026-01-01", "2026-01-02");
        for payload in [
            TaskPayload::Completed { result },
            TaskPayload::Failed {
                error: error_object("it failed"),
            },
            TaskPayload::Cancelled,
        ] {
            let done = DetailedTask::new(task.clone(), payload);
            let bytes = serde_json::to_vec(&within_bound(&done)).unwrap();
            let back: KeptTask = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(back.detailed(), Some(done));
        }
    }
}
