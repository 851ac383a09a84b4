//! The session store: the only module that names sled.
//!
//! Trees:
//! - `meta`: `schema_version` (u64 BE).
//! - `sessions`: caller session id → [`SessionRecord`] (JSON). Never the sandbox level: it is
//!   per request by design, so one escalation never applies to later turns.
//! - `last_used`: u64 BE millis ++ session id → empty; lists newest first without a full scan.
//! - `inflight`: session id → [`InflightTurn`] (JSON), the process of a turn in flight, so the
//!   next start after a crash can kill what is left and mark the turn interrupted.
//! - `worktrees`: session id → empty, for each session whose record has a worktree of its own,
//!   kept in step with `sessions` by [`Store::put`] and [`Store::remove`]: the start checks
//!   those worktrees without a full scan. (No migration: no record had one before it.)
//!
//! Every write that matters is flushed before the call that caused it returns
//! ([`Store::flush`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use sled::Transactional;

use crate::security::ids::SessionId;

pub mod error;
#[path = "../../migrations/mod.rs"]
pub mod migrations;
mod record;

pub use error::StoreError;
pub use record::{InflightTurn, LAST_RESPONSE_CHARS, SessionRecord, TurnStatus, WorktreeRecord};

/// The store returns its own errors only.
type Result<T, E = StoreError> = std::result::Result<T, E>;

/// One page of sessions, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub sessions: Vec<SessionRecord>,
    /// Pass back to get the next page; `None` at the end.
    pub next: Option<String>,
}

/// The opened store.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    sessions: sled::Tree,
    last_used: sled::Tree,
    inflight: sled::Tree,
    meta: sled::Tree,
    /// The sessions with a worktree of their own.
    worktrees: sled::Tree,
    /// MCP tasks (a task's call or a background call): id → the MCP layer's record, opaque
    /// here.
    tasks: sled::Tree,
    path: PathBuf,
    /// The store's own lock (`bridge.lock` in its directory), held while any clone of the store
    /// lives: another process (or a second open in this one) is told `EWOULDBLOCK`, a typed
    /// answer, before sled is asked.
    _lock: Arc<Flock<std::fs::File>>,
}

/// The file the store's own lock is taken on, in the store's directory.
const LOCK_FILE: &str = "bridge.lock";

/// How long opening waits for a lock held by a process that is still exiting.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// sled page cache size: enough for the hot records and indexes of a busy server.
const CACHE_BYTES: u64 = 1024 * 1024;
const VERSION_KEY: &[u8] = b"schema_version";
/// The number of stored sessions, kept in step by `put` and `remove` (sled's `len` scans the
/// whole tree, which pulls every record into memory).
pub(crate) const COUNT_KEY: &[u8] = b"session_count";

fn read_u64(v: Option<sled::IVec>) -> u64 {
    v.and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// `map_err` for a sled call on the store at `dir`.
fn storage<'a>(dir: &'a Path, doing: &'static str) -> impl FnOnce(sled::Error) -> StoreError + 'a {
    move |source| StoreError::Storage {
        dir: dir.to_path_buf(),
        doing,
        source,
    }
}

/// Take the store's own lock, waiting until `deadline` for a holder that is exiting; `None`
/// when another holder keeps it. The file is this user's (the directory is checked first),
/// opened without following a link.
fn take_lock(
    dir: &Path,
    deadline: std::time::Instant,
) -> Result<Option<Flock<std::fs::File>>, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io(dir, "opening the lock file"))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Some(lock)),
            Err((back, Errno::EWOULDBLOCK)) => {
                if std::time::Instant::now() >= deadline {
                    return Ok(None);
                }
                file = back;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err((_, errno)) => {
                return Err(io(dir, "locking the lock file")(std::io::Error::from(
                    errno,
                )));
            }
        }
    }
}

/// `map_err` for a file-system call on the store directory `dir`.
fn io<'a>(dir: &'a Path, doing: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        dir: dir.to_path_buf(),
        doing,
        source,
    }
}

impl Store {
    /// Open (or create) the store in `dir`, migrating it to the current schema. A store locked
    /// by another process, or written by a newer version, is refused with a clear error. (The
    /// server itself never gets that error: it joins the process holding the lock, see
    /// [`crate::hub::elect`]; this is for the command line and tools.)
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::try_open(dir, LOCK_WAIT)?.ok_or_else(|| StoreError::InUse {
            dir: dir.to_path_buf(),
        })
    }

    /// Open the store unless another process holds its lock for longer than `wait`: then
    /// `Ok(None)`.
    pub fn try_open(dir: &Path, wait: std::time::Duration) -> Result<Option<Store>, StoreError> {
        prepare_dir(dir)?;
        tune_allocator();
        // A server that just died may still hold the lock for a moment (its last threads are
        // still exiting): wait briefly for it, never long.
        let deadline = std::time::Instant::now() + wait;
        let Some(lock) = take_lock(dir, deadline)? else {
            return Ok(None);
        };
        let db = loop {
            let opened = sled::Config::new()
                .path(dir)
                .mode(sled::Mode::LowSpace)
                // sled caches up to 1 GiB by default; records are small and reads rare
                .cache_capacity(CACHE_BYTES)
                .open();
            match opened {
                Ok(db) => break db,
                // Only a process that does not take `bridge.lock` (a version from before it)
                // can hold sled's own lock now. sled reports it only as `ErrorKind::Other`
                // with this text, the one signal it gives; every process of this version is
                // told apart above by its errno.
                Err(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock") => {
                    if std::time::Instant::now() >= deadline {
                        return Ok(None);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(other) => return Err(storage(dir, "opening")(other)),
            }
        };
        let store = Store {
            sessions: db
                .open_tree("sessions")
                .map_err(storage(dir, "opening a tree"))?,
            last_used: db
                .open_tree("last_used")
                .map_err(storage(dir, "opening a tree"))?,
            inflight: db
                .open_tree("inflight")
                .map_err(storage(dir, "opening a tree"))?,
            meta: db
                .open_tree("meta")
                .map_err(storage(dir, "opening a tree"))?,
            worktrees: db
                .open_tree("worktrees")
                .map_err(storage(dir, "opening a tree"))?,
            tasks: db
                .open_tree("tasks")
                .map_err(storage(dir, "opening a tree"))?,
            path: dir.to_path_buf(),
            db,
            _lock: Arc::new(lock),
        };
        store.migrate()?;
        Ok(Some(store))
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version on disk.
    pub fn schema_version(&self) -> Result<u64, StoreError> {
        let meta = self
            .db
            .open_tree("meta")
            .map_err(storage(&self.path, "opening a tree"))?;
        Ok(meta
            .get(VERSION_KEY)
            .map_err(storage(&self.path, "reading the schema version"))?
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0))
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let version = self.schema_version()?;
        if version > migrations::CURRENT {
            return Err(StoreError::Newer {
                dir: self.path.clone(),
                version,
                known: migrations::CURRENT,
            });
        }
        let meta = self
            .db
            .open_tree("meta")
            .map_err(storage(&self.path, "opening a tree"))?;
        for step in migrations::steps().into_iter().filter(|s| s.to > version) {
            let changes =
                (step.plan)(&self.db).map_err(storage(&self.path, "planning a migration"))?;
            let trees: Vec<&'static str> = {
                let mut t: Vec<&'static str> = changes
                    .iter()
                    .map(|c| match c {
                        migrations::Change::Insert { tree, .. }
                        | migrations::Change::Remove { tree, .. } => *tree,
                    })
                    .filter(|t| *t != "meta")
                    .collect();
                t.sort_unstable();
                t.dedup();
                t
            };
            let opened: Vec<sled::Tree> = trees
                .iter()
                .map(|t| self.db.open_tree(t))
                .collect::<sled::Result<_>>()
                .map_err(storage(&self.path, "opening a tree"))?;
            let mut all: Vec<&sled::Tree> = opened.iter().collect();
            all.push(&meta);
            all.as_slice()
                .transaction(|tx| {
                    let meta_tx = &tx[tx.len() - 1];
                    for c in &changes {
                        match c {
                            migrations::Change::Insert { tree, key, value } => {
                                let i =
                                    trees.iter().position(|t| t == tree).unwrap_or(tx.len() - 1);
                                tx[i].insert(key.as_slice(), value.as_slice())?;
                            }
                            migrations::Change::Remove { tree, key } => {
                                let i =
                                    trees.iter().position(|t| t == tree).unwrap_or(tx.len() - 1);
                                tx[i].remove(key.as_slice())?;
                            }
                        }
                    }
                    // the version last, in the same transaction
                    meta_tx.insert(VERSION_KEY, &step.to.to_be_bytes())?;
                    Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
                })
                .map_err(|e| StoreError::Migration {
                    dir: self.path.clone(),
                    to: step.to,
                    name: step.name,
                    reason: format!("{e:?}"),
                })?;
            tracing::info!(to = step.to, name = step.name, "store migrated");
        }
        self.db
            .flush()
            .map_err(storage(&self.path, "writing the migrated store"))?;
        Ok(())
    }

    /// The record of `id`, if any.
    pub fn get(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let Some(raw) = self
            .sessions
            .get(id.as_str())
            .map_err(storage(&self.path, "reading a session"))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&raw)
            .map(Some)
            .map_err(|source| StoreError::Corrupted {
                dir: self.path.clone(),
                id: id.to_string(),
                source,
            })
    }

    /// Insert or replace a record, keeping the `last_used` index in step (one transaction).
    /// Not flushed: call [`Store::flush`] before answering the call that caused it.
    pub fn put(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let key = record.session_id.as_str().as_bytes();
        let value = serde_json::to_vec(record).map_err(|source| StoreError::Encode {
            dir: self.path.clone(),
            source,
        })?;
        let new_index = index_key(record.last_used_ms, key);
        let has_worktree = record.worktree.is_some();
        (&self.sessions, &self.last_used, &self.meta, &self.worktrees)
            .transaction(|(s, l, m, w)| {
                if let Some(old) = s.get(key)?
                    && let Ok(old) = serde_json::from_slice::<SessionRecord>(&old)
                {
                    l.remove(index_key(old.last_used_ms, key))?;
                }
                if s.insert(key, value.as_slice())?.is_none() {
                    let n = read_u64(m.get(COUNT_KEY)?) + 1;
                    m.insert(COUNT_KEY, &n.to_be_bytes())?;
                }
                l.insert(new_index.as_slice(), &[] as &[u8])?;
                if has_worktree {
                    w.insert(key, &[] as &[u8])?;
                } else {
                    w.remove(key)?;
                }
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| tx_error(&self.path, "saving a session", e))
    }

    /// Forget a session (and its in-flight entry).
    pub fn remove(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let old = self.get(id)?;
        let key = id.as_str().as_bytes();
        (
            &self.sessions,
            &self.last_used,
            &self.inflight,
            &self.meta,
            &self.worktrees,
        )
            .transaction(|(s, l, f, m, w)| {
                if let Some(old) = &old {
                    l.remove(index_key(old.last_used_ms, key))?;
                }
                w.remove(key)?;
                if s.remove(key)?.is_some() {
                    let n = read_u64(m.get(COUNT_KEY)?).saturating_sub(1);
                    m.insert(COUNT_KEY, &n.to_be_bytes())?;
                }
                f.remove(key)?;
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| tx_error(&self.path, "removing a session", e))?;
        Ok(old)
    }

    /// Sessions, newest first, `limit` at a time, after the cursor `after` of a previous page.
    pub fn list(&self, after: Option<&str>, limit: usize) -> Result<Page, StoreError> {
        let limit = limit.clamp(1, 1000);
        let upper: Option<Vec<u8>> = match after {
            None => None,
            Some(c) => Some(decode_cursor(c).ok_or(StoreError::BadCursor)?),
        };
        let iter = match &upper {
            None => self.last_used.iter().rev(),
            Some(u) => self.last_used.range(..u.as_slice()).rev(),
        };
        let mut sessions = Vec::with_capacity(limit);
        let mut last_key: Option<Vec<u8>> = None;
        for kv in iter {
            let (k, _) = kv.map_err(storage(&self.path, "listing sessions"))?;
            if sessions.len() == limit {
                break;
            }
            let Some(id) = k.get(8..).and_then(|b| std::str::from_utf8(b).ok()) else {
                continue;
            };
            let Ok(id) = SessionId::parse("sessionId", id) else {
                continue;
            };
            if let Some(rec) = self.get(&id)? {
                sessions.push(rec);
                last_key = Some(k.to_vec());
            }
        }
        let next = if sessions.len() == limit {
            last_key.map(|k| encode_cursor(&k))
        } else {
            None
        };
        Ok(Page { sessions, next })
    }

    /// Sessions last used before `cutoff_ms`, oldest first, at most `limit` (the index is in
    /// time order, so this reads only the expired entries).
    pub fn unused_since(&self, cutoff_ms: u64, limit: usize) -> Result<Vec<SessionId>, StoreError> {
        let mut out = vec![];
        for kv in self.last_used.range(..cutoff_ms.to_be_bytes().as_slice()) {
            let (k, _) = kv.map_err(storage(&self.path, "listing unused sessions"))?;
            if out.len() >= limit {
                break;
            }
            if let Some(id) = k
                .get(8..)
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|s| SessionId::parse("sessionId", s).ok())
            {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// How many sessions are stored: a counter, so no record is read.
    pub fn len(&self) -> usize {
        self.meta.get(COUNT_KEY).map(read_u64).unwrap_or(0) as usize
    }

    /// Whether no session is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep task `id`'s record (bytes the caller encodes).
    pub fn put_task(&self, id: &str, record: &[u8]) -> Result<(), StoreError> {
        self.tasks
            .insert(id.as_bytes(), record)
            .map_err(storage(&self.path, "recording a task"))?;
        Ok(())
    }

    /// Task `id`'s record, if kept.
    pub fn get_task(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .tasks
            .get(id.as_bytes())
            .map_err(storage(&self.path, "reading a task"))?
            .map(|v| v.to_vec()))
    }

    /// Forget task `id`.
    pub fn remove_task(&self, id: &str) -> Result<(), StoreError> {
        self.tasks
            .remove(id.as_bytes())
            .map_err(storage(&self.path, "forgetting a task"))?;
        Ok(())
    }

    /// Every task record kept.
    pub fn tasks(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut out = vec![];
        for kv in self.tasks.iter() {
            let (k, v) = kv.map_err(storage(&self.path, "listing tasks"))?;
            if let Ok(id) = std::str::from_utf8(&k) {
                out.push((id.to_owned(), v.to_vec()));
            }
        }
        Ok(out)
    }

    /// Record the process of a turn in flight.
    pub fn put_inflight(&self, id: &SessionId, turn: &InflightTurn) -> Result<(), StoreError> {
        let v = serde_json::to_vec(turn).map_err(|source| StoreError::Encode {
            dir: self.path.clone(),
            source,
        })?;
        self.inflight
            .insert(id.as_str(), v)
            .map_err(storage(&self.path, "recording a turn in flight"))?;
        Ok(())
    }

    /// Forget the turn in flight of `id`.
    pub fn clear_inflight(&self, id: &SessionId) -> Result<(), StoreError> {
        self.inflight
            .remove(id.as_str())
            .map_err(storage(&self.path, "forgetting a turn in flight"))?;
        Ok(())
    }

    /// Mark every turn in flight as cut off by its MCP client closing the connection (the
    /// process stops next, and what it leaves in flight is then not a crash's); how many.
    /// Records that do not read are left as they are.
    pub fn mark_inflight_client_closed(&self) -> Result<usize, StoreError> {
        let mut marked = 0;
        for (id, mut turn) in self.inflight()? {
            if !turn.client_closed {
                turn.client_closed = true;
                self.put_inflight(&id, &turn)?;
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// The sessions whose record has a worktree of their own.
    pub fn worktree_sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let mut out = vec![];
        for k in self.worktrees.iter().keys() {
            let k = k.map_err(storage(&self.path, "listing sessions with a worktree"))?;
            if let Some(id) = std::str::from_utf8(&k)
                .ok()
                .and_then(|s| SessionId::parse("sessionId", s).ok())
            {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Every turn recorded in flight (after a crash: the turns that were interrupted).
    pub fn inflight(&self) -> Result<Vec<(SessionId, InflightTurn)>, StoreError> {
        let mut out = vec![];
        for kv in self.inflight.iter() {
            let (k, v) = kv.map_err(storage(&self.path, "listing turns in flight"))?;
            let (Some(id), Ok(t)) = (
                std::str::from_utf8(&k)
                    .ok()
                    .and_then(|s| SessionId::parse("sessionId", s).ok()),
                serde_json::from_slice::<InflightTurn>(&v),
            ) else {
                continue;
            };
            out.push((id, t));
        }
        Ok(out)
    }

    /// Make every write so far durable.
    ///
    /// A blocking flush on the blocking pool, not sled's `flush_async`: in sled 0.34 several
    /// `flush_async` futures polled at once can lock up for good (spacejam/sled#1241, #1308;
    /// seen here as a turn that never answered when 16 sessions finished together).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush())
            .await
            .map_err(|source| StoreError::FlushLost {
                dir: self.path.clone(),
                source,
            })?
            .map_err(storage(&self.path, "writing to disk"))?;
        self.check_still_there()
    }

    /// sled keeps writing to its files after the directory was deleted, and those writes are
    /// lost at the next start: refuse to call them durable.
    fn check_still_there(&self) -> Result<(), StoreError> {
        if self.path.join("db").exists() {
            Ok(())
        } else {
            Err(StoreError::Deleted {
                dir: self.path.clone(),
            })
        }
    }

    /// Make every write so far durable, blocking.
    pub fn flush_blocking(&self) -> Result<(), StoreError> {
        self.db
            .flush()
            .map_err(storage(&self.path, "writing to disk"))?;
        self.check_still_there()
    }
}

/// Keep glibc's allocator from holding on to what sled frees (once per process, before sled
/// allocates; an operator's own `MALLOC_ARENA_MAX` / `MALLOC_MMAP_THRESHOLD_` wins).
///
/// sled writes through one 512 KiB buffer per log segment. glibc serves the first from `mmap`,
/// and when it is freed raises its mmap threshold to that size, so every later buffer comes
/// from the heap of the writing thread's arena, where freed buffers stay (tens of arenas, one
/// per thread that wrote). After the sweep of 100 000 expired sessions the server stayed at
/// 64 MB anonymous memory in five 8–15 MB arenas (`/proc/PID/smaps`). A fixed threshold of
/// 128 KiB (large buffers are mapped and unmapped) and one arena bring it to 37 MB
/// (`benches/README.md`). `main` calls it before the runtime starts its threads (each thread
/// that allocated first would own an arena of its own); opening a store calls it too, for
/// library users.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                // SAFETY: mallopt only changes allocator parameters; any value is accepted or
                // refused (returns 0), never undefined behaviour.
                unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
            }
            if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
                // SAFETY: as above.
                unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
            }
        });
    }
}

/// Create the store directory if it is missing (atomically with mode 0700: it never exists
/// with wider permissions) and check that it can be trusted ([`check_dir`]).
pub fn prepare_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        // nothing is made where another user could swap it
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if let Some(existing) = parent.ancestors().find(|a| a.exists()) {
            check_path_to(existing, me).map_err(|why| refusal(dir, why))?;
        }
        std::fs::create_dir_all(parent).map_err(io(dir, "creating the parent directories"))?;
        check_path_to(parent, me).map_err(|why| refusal(dir, why))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // the umask may have taken the owner's own bits away: give them back
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::symlink_metadata(dir)
                .map_err(io(dir, "reading the new directory's mode"))?
                .permissions()
                .mode();
            if mode & 0o777 != 0o700 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(io(dir, "making the directory private (mode 700)"))?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(dir, "creating the directory")(e)),
    }
    check_dir(dir)
}

/// The store directory is trusted only when it is this user's own: a directory (or a symlink
/// of this user's, or root's, to one) owned by the effective user, with no permission bits
/// for group or others. Anyone else who controls it could read the sessions, or listen on its
/// socket and receive the API keys a relay sends there.
pub fn check_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let refuse = |why: String| refusal(dir, why);
    let link = std::fs::symlink_metadata(dir).map_err(io(dir, "checking the directory"))?;
    if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(refuse(format!(
            "is a symbolic link owned by another user (uid {}), who can point it elsewhere",
            link.uid()
        )));
    }
    let meta = std::fs::metadata(dir).map_err(io(dir, "checking the directory"))?;
    if !meta.is_dir() {
        return Err(refuse("is not a directory".into()));
    }
    if meta.uid() != me {
        return Err(refuse(format!(
            "is owned by another user (uid {}, this server runs as uid {me}), who controls it",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(refuse(format!(
            "has mode {mode:o}: group or other users have access to it (run `chmod 700` on it)"
        )));
    }
    check_path_to(dir, me).map_err(refuse)
}

/// The error refusing the store directory `dir`: `why` ends a sentence about it.
fn refusal(dir: &Path, why: String) -> StoreError {
    StoreError::Refused {
        dir: dir.to_path_buf(),
        why,
    }
}

/// The way to the store directory must be beyond other users' reach too: whoever may rename
/// entries in a directory on it can swap the store (or a directory or symbolic link above it)
/// for one of their own between this check and its use, and receive the sessions and the
/// socket. Every directory on the path as written and on the path it leads to (through each
/// symbolic link) is owned by this user or root, and writable by group or others only when
/// sticky (as `/tmp` is); every symbolic link on it is this user's or root's. `Err`: what is
/// wrong, as the end of a sentence about the store directory.
fn check_path_to(dir: &Path, me: u32) -> std::result::Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let trusted = |path: &Path, meta: &std::fs::Metadata| -> std::result::Result<(), String> {
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "lies under {}, which is owned by another user (uid {}, this server runs as uid \
                 {me}), who can replace what is in it",
                path.display(),
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if meta.is_dir() && mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(format!(
                "lies under {}, which has mode {mode:o}: group or other users can replace what \
                 is in it (it is not sticky, as /tmp is)",
                path.display()
            ));
        }
        Ok(())
    };
    let unreadable =
        |path: &Path, e: std::io::Error| format!("cannot check {}: {e}", path.display());
    let chain = |start: &Path| -> std::result::Result<(), String> {
        let real = std::fs::canonicalize(start).map_err(|e| unreadable(start, e))?;
        for a in real.ancestors() {
            let meta = std::fs::metadata(a).map_err(|e| unreadable(a, e))?;
            trusted(a, &meta)?;
        }
        Ok(())
    };
    let written = std::path::absolute(dir).map_err(|e| unreadable(dir, e))?;
    // the directories the store really lives in
    chain(&written)?;
    // and the way to it as written, symbolic links and `..` included
    let mut prefix = PathBuf::new();
    for part in written.components() {
        prefix.push(part);
        let meta = std::fs::symlink_metadata(&prefix).map_err(|e| unreadable(&prefix, e))?;
        trusted(&prefix, &meta)?;
        if meta.file_type().is_symlink() {
            chain(&prefix)?;
        }
    }
    Ok(())
}

/// A transaction's failure (sled's Debug form is unreadable). Nothing here aborts a
/// transaction, so an abort is reported as the storage failure it stands for.
fn tx_error(
    dir: &Path,
    doing: &'static str,
    e: sled::transaction::TransactionError<()>,
) -> StoreError {
    let source = match e {
        sled::transaction::TransactionError::Storage(e) => e,
        sled::transaction::TransactionError::Abort(()) => {
            sled::Error::Unsupported("the write was aborted".to_owned())
        }
    };
    storage(dir, doing)(source)
}

fn index_key(ms: u64, id: &[u8]) -> Vec<u8> {
    let mut k = ms.to_be_bytes().to_vec();
    k.extend_from_slice(id);
    k
}

fn encode_cursor(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(c: &str) -> Option<Vec<u8>> {
    if !c.len().is_multiple_of(2) || c.len() > 2 * (8 + 256) || c.len() < 18 {
        return None;
    }
    (0..c.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(c.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::ids::ThreadId;

    /// What the store requires of a directory it did not make itself.
    fn private(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    fn id(s: &str) -> SessionId {
        SessionId::parse("sessionId", s).unwrap()
    }

    fn rec(s: &str, ms: u64) -> SessionRecord {
        SessionRecord::new(id(s), "/work".into(), ms)
    }

    #[test]
    fn records_round_trip_and_never_hold_a_sandbox_level() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        let mut r = rec("a", 10);
        r.thread_id = Some(ThreadId::parse("550e8400-e29b-41d4-a716-446655440000").unwrap());
        store.put(&r).unwrap();
        assert_eq!(store.get(&id("a")).unwrap(), Some(r.clone()));
        let raw = String::from_utf8(serde_json::to_vec(&r).unwrap()).unwrap();
        assert!(!raw.to_lowercase().contains("sandbox"), "{raw}");
        // the thread id is a string on disk, as before it was typed
        assert!(
            raw.contains(r#""threadId":"550e8400-e29b-41d4-a716-446655440000""#),
            "{raw}"
        );
        assert_eq!(store.schema_version().unwrap(), migrations::CURRENT);
    }

    #[test]
    fn the_sessions_with_a_worktree_are_indexed_in_step_with_their_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        let mut with = rec("w", 10);
        let worktree = Some(WorktreeRecord {
            path: "/wt/r-w".into(),
            branch: "codex-bridge/w".into(),
            base_commit: "0123".into(),
            origin: "/r".into(),
        });
        with.worktree = worktree.clone();
        store.put(&with).unwrap();
        store.put(&rec("plain", 11)).unwrap();
        assert_eq!(store.worktree_sessions().unwrap(), vec![id("w")]);
        // a record put again without it leaves the index, as a removed one does
        with.worktree = None;
        store.put(&with).unwrap();
        assert!(store.worktree_sessions().unwrap().is_empty());
        with.worktree = worktree;
        store.put(&with).unwrap();
        store.remove(&id("w")).unwrap();
        assert!(store.worktree_sessions().unwrap().is_empty());
    }

    #[test]
    fn a_stored_thread_id_is_checked_when_the_record_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        let r = rec("t", 10);
        store.put(&r).unwrap();
        let mut raw: serde_json::Value =
            serde_json::from_slice(&store.sessions.get("t").unwrap().unwrap()).unwrap();
        // a record written before the id was typed reads back as the same id
        raw["threadId"] = "550E8400-E29B-41D4-A716-446655440000".into();
        store
            .sessions
            .insert("t", serde_json::to_vec(&raw).unwrap())
            .unwrap();
        let back = store.get(&id("t")).unwrap().unwrap();
        assert_eq!(
            back.thread_id.unwrap().to_arg(),
            "550e8400-e29b-41d4-a716-446655440000"
        );
        // one that is not a thread id is a clear error naming the session and the field
        for bad in ["--last", "550e8400e29b41d4a716446655440000", ""] {
            raw["threadId"] = bad.into();
            store
                .sessions
                .insert("t", serde_json::to_vec(&raw).unwrap())
                .unwrap();
            let err = store.get(&id("t")).unwrap_err();
            assert!(
                matches!(&err, StoreError::Corrupted { id, .. } if id == "t"),
                "{err}"
            );
            assert!(err.to_string().contains("threadId"), "{err}");
        }
    }

    #[test]
    fn listing_is_newest_first_and_paged_without_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        for i in 0..25u64 {
            store.put(&rec(&format!("s{i:02}"), 1000 + i)).unwrap();
        }
        // touching a session moves it to the front and leaves no stale index entry
        let mut r = store.get(&id("s03")).unwrap().unwrap();
        r.last_used_ms = 5000;
        store.put(&r).unwrap();
        let mut seen = vec![];
        let mut cursor: Option<String> = None;
        loop {
            let page = store.list(cursor.as_deref(), 10).unwrap();
            seen.extend(page.sessions.iter().map(|r| r.session_id.to_string()));
            match page.next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen.len(), 25);
        assert_eq!(
            store.len(),
            25,
            "the counter follows puts of new and known keys"
        );
        assert_eq!(seen[0], "s03");
        assert_eq!(seen[1], "s24");
        let mut dedup = seen.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), 25);
        assert!(store.list(Some("zz"), 10).is_err());
    }

    #[test]
    fn removing_forgets_the_record_its_index_and_its_inflight_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        store.put(&rec("a", 1)).unwrap();
        let t = InflightTurn {
            pid: 1,
            start_ticks: 2,
            argv_hash: 3,
            started_ms: 4,
            cgroup: None,
            client_closed: false,
        };
        store.put_inflight(&id("a"), &t).unwrap();
        assert_eq!(store.inflight().unwrap(), vec![(id("a"), t)]);
        assert_eq!(store.len(), 1);
        assert!(store.remove(&id("a")).unwrap().is_some());
        assert!(store.remove(&id("a")).unwrap().is_none());
        assert_eq!(store.len(), 0);
        assert!(store.get(&id("a")).unwrap().is_none());
        assert!(store.list(None, 10).unwrap().sessions.is_empty());
        assert!(store.inflight().unwrap().is_empty());
    }

    #[test]
    fn an_inflight_record_from_before_client_closed_reads_back_as_a_crash_and_can_be_marked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        // as the previous release wrote it: no `clientClosed`
        let old = br#"{"pid":7,"startTicks":8,"argvHash":9,"startedMs":10,"cgroup":null}"#;
        store.inflight.insert("old", &old[..]).unwrap();
        let read = store.inflight().unwrap();
        assert_eq!(read.len(), 1, "the old record still reads");
        assert_eq!(read[0].1.pid, 7);
        assert!(!read[0].1.client_closed);
        assert_eq!(store.mark_inflight_client_closed().unwrap(), 1);
        assert_eq!(store.mark_inflight_client_closed().unwrap(), 0);
        let read = store.inflight().unwrap();
        assert!(read[0].1.client_closed);
        assert_eq!((read[0].1.pid, read[0].1.argv_hash), (7, 9));
    }

    #[test]
    fn expired_sessions_are_found_through_the_index_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        for (name, ms) in [("old", 100), ("older", 50), ("new", 1000)] {
            store.put(&rec(name, ms)).unwrap();
        }
        let expired: Vec<String> = store
            .unused_since(500, 10)
            .unwrap()
            .iter()
            .map(|i| i.to_string())
            .collect();
        assert_eq!(expired, vec!["older", "old"]);
        assert_eq!(store.unused_since(500, 1).unwrap().len(), 1);
        assert!(store.unused_since(10, 10).unwrap().is_empty());
    }

    #[test]
    fn a_store_directory_is_made_private_and_one_others_can_reach_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("a/b/store");
        prepare_dir(&store).unwrap();
        let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        for bad in [0o750, 0o701, 0o1777] {
            std::fs::set_permissions(&store, std::fs::Permissions::from_mode(bad)).unwrap();
            let err = Store::open(&store).err().unwrap().to_string();
            assert!(
                err.contains(&format!("has mode {bad:o}")) && err.contains("CODEX_BRIDGE_STORE"),
                "{err}"
            );
        }
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
        // a symlink of this user to the directory is fine
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&store, &link).unwrap();
        check_dir(&link).unwrap();
        // a file is no directory
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(
            check_dir(&file)
                .unwrap_err()
                .to_string()
                .contains("is not a directory")
        );
    }

    /// A store directory of this user's own is still refused when another user can replace
    /// it: under a directory of theirs, a directory anyone may write to, or a symbolic link of
    /// theirs (on the way as written, or through `..`). A sticky directory (as /tmp) is fine.
    #[test]
    fn a_store_another_user_can_swap_from_above_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            panic!("this test needs root, to make directories of another user (CI runs as root)");
        }
        const NOBODY: u32 = 65534;
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let nobodys = |p: &Path| std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        let base = tempfile::tempdir().unwrap();
        let base = base.path();
        // a directory of another user's, holding a store of this user's
        let theirs = base.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        nobodys(&theirs);
        let err = Store::open(&theirs.join("store"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("lies under {}", theirs.display()))
                && err.contains("another user (uid 65534")
                && err.contains("CODEX_BRIDGE_STORE"),
            "{err}"
        );
        assert!(!theirs.join("store").exists(), "nothing is made there");
        // ... deeper down, too
        let err = Store::open(&theirs.join("a/b/store"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("lies under {}", theirs.display())),
            "{err}"
        );
        assert!(!theirs.join("a").exists(), "nothing is made there");
        // a directory of this user's that anyone may write to
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        mode(&open, 0o777);
        let err = Store::open(&open.join("store")).err().unwrap().to_string();
        assert!(
            err.contains("has mode 777") && err.contains("not sticky"),
            "{err}"
        );
        // sticky, as /tmp: nobody else can rename what is this user's in it
        mode(&open, 0o1777);
        Store::open(&open.join("store")).unwrap();
        // another user's symbolic link on the way, to a directory of this user's
        let mine = base.join("mine");
        std::fs::create_dir(&mine).unwrap();
        let link = open.join("link");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
        let err = Store::open(&link.join("store")).err().unwrap().to_string();
        assert!(
            err.contains(&format!("lies under {}", link.display())),
            "{err}"
        );
        // through `..` from a directory another user can replace
        std::fs::create_dir(theirs.join("sub")).unwrap();
        let err = Store::open(&theirs.join("sub/../../mine/store"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("lies under {}", theirs.display())),
            "{err}"
        );
        // a symbolic link of this user's, to a directory of this user's: fine
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        Store::open(&link.join("store2")).unwrap();
        // but not when it leads under another user's directory
        let inner = theirs.join("inner");
        std::fs::create_dir(&inner).unwrap();
        let to_theirs = base.join("to-theirs");
        std::os::unix::fs::symlink(&inner, &to_theirs).unwrap();
        let err = Store::open(&to_theirs.join("store"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("lies under {}", theirs.display())),
            "{err}"
        );
    }

    #[test]
    fn a_store_whose_own_lock_is_held_is_in_use_before_sled_is_asked() {
        // A plain flock on `bridge.lock` (no sled lock held): the open is refused as in use.
        // Without the store's own lock, sled would open the store beside its holder.
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s");
        prepare_dir(&store).unwrap();
        let file = std::fs::File::create(store.join(LOCK_FILE)).unwrap();
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        let opened = Store::try_open(&store, std::time::Duration::ZERO).unwrap();
        assert!(opened.is_none(), "opened while another holds bridge.lock");
        drop(held);
        assert!(
            Store::try_open(&store, std::time::Duration::ZERO)
                .unwrap()
                .is_some(),
            "the store opens once the lock is free"
        );
    }

    #[test]
    fn a_second_open_of_a_locked_store_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Store::open(&dir.path().join("s")).unwrap();
        let err = Store::open(&dir.path().join("s"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("CODEX_BRIDGE_STORE") && err.contains("in use"),
            "{err}"
        );
    }

    #[test]
    fn a_store_from_a_newer_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path().join("s")).unwrap();
            private(&dir.path().join("s"));
            db.open_tree("meta")
                .unwrap()
                .insert(VERSION_KEY, &99u64.to_be_bytes())
                .unwrap();
            db.flush().unwrap();
        }
        let err = Store::open(&dir.path().join("s"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("schema version 99") && err.contains("newer"),
            "{err}"
        );
    }

    #[test]
    fn a_v0_fixture_store_is_migrated_to_the_baseline() {
        let dir = tempfile::tempdir().unwrap();
        {
            // a v0 store: sessions only, no meta, no index
            let db = sled::open(dir.path().join("s")).unwrap();
            private(&dir.path().join("s"));
            let sessions = db.open_tree("sessions").unwrap();
            for (i, name) in ["old-a", "old-b", "old-c"].iter().enumerate() {
                let r = rec(name, 100 + i as u64);
                sessions
                    .insert(name.as_bytes(), serde_json::to_vec(&r).unwrap())
                    .unwrap();
            }
            db.flush().unwrap();
        }
        let store = Store::open(&dir.path().join("s")).unwrap();
        assert_eq!(store.schema_version().unwrap(), 1);
        let page = store.list(None, 10).unwrap();
        let names: Vec<String> = page
            .sessions
            .iter()
            .map(|r| r.session_id.to_string())
            .collect();
        assert_eq!(names, vec!["old-c", "old-b", "old-a"]);
        assert_eq!(store.len(), 3, "the baseline counts the sessions it finds");
        drop(store);
        // opening again applies nothing twice
        let store = Store::open(&dir.path().join("s")).unwrap();
        assert_eq!(store.list(None, 10).unwrap().sessions.len(), 3);
    }
}
