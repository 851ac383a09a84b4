//! What the store keeps: a session's record ([`SessionRecord`]) and a turn's process in flight
//! ([`InflightTurn`]), as they are serialized (camelCase JSON).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::security::ids::{SessionId, SessionName, ThreadId};
use crate::usage::Usage;

pub use crate::status::TurnStatus;

/// What the store keeps of one conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub session_id: SessionId,
    /// The Codex thread id, once codex reported it: a UUID string on disk, checked when the
    /// record is read (a bad one makes the record unreadable, [`StoreError::Corrupted`]).
    #[serde(default)]
    pub thread_id: Option<ThreadId>,
    /// The canonical working directory the session is bound to.
    pub working_directory: PathBuf,
    #[serde(default)]
    pub model: Option<String>,
    /// The CODEX_HOME the thread lives in (threads are files there).
    #[serde(default)]
    pub codex_home: Option<String>,
    pub created_ms: u64,
    pub last_used_ms: u64,
    #[serde(default)]
    pub turn_count: u64,
    /// Sum of the turns' own usage over the session's life.
    #[serde(default)]
    pub usage: Usage,
    /// Codex's running total for the current thread (to compute the next turn's own usage).
    #[serde(default)]
    pub thread_usage: Usage,
    #[serde(default)]
    pub last_status: Option<TurnStatus>,
    /// A short, redacted reason for the last failure.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The name a person gave the session (`renameSession`), checked as it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<SessionName>,
    /// How many turns `rewindSession` dropped from the session's threads in all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_turns: u64,
    /// How many times `compactSession` compacted its threads, and codex's token counts of the
    /// last one (the context before, the summary after), when codex reported them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<(u64, u64)>,
    /// The last turn's answer (redacted, its first [`LAST_RESPONSE_CHARS`] characters): what a
    /// host that lost the call (a background turn, a restart) can still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_response: Option<String>,
    /// The session's own git worktree, when it asked for one (absent in records written
    /// before worktrees existed, and in every other session's: no migration needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRecord>,
}

/// A session's own git worktree: where it is, its branch, the commit it started from, and
/// the checkout (the top of the working tree) it came from, onto which its changes apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeRecord {
    pub path: PathBuf,
    pub branch: String,
    pub base_commit: String,
    pub origin: PathBuf,
}

/// Most characters of the last turn's answer a session's record keeps.
pub const LAST_RESPONSE_CHARS: usize = 4000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SessionRecord {
    /// A new record bound to `working_directory`.
    pub fn new(session_id: SessionId, working_directory: PathBuf, now_ms: u64) -> Self {
        SessionRecord {
            session_id,
            thread_id: None,
            working_directory,
            model: None,
            codex_home: None,
            created_ms: now_ms,
            last_used_ms: now_ms,
            turn_count: 0,
            usage: Usage::default(),
            thread_usage: Usage::default(),
            last_status: None,
            last_error: None,
            name: None,
            dropped_turns: 0,
            compactions: 0,
            last_compaction: None,
            last_response: None,
            worktree: None,
        }
    }
}

/// The process of a turn in flight, recorded so a later start can kill it if it is still ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InflightTurn {
    pub pid: i32,
    /// Start ticks since boot (/proc/PID/stat field 22): the process, even after pid reuse.
    pub start_ticks: u64,
    /// Hash of codex's argv, checked against /proc/PID/cmdline before killing.
    pub argv_hash: u64,
    pub started_ms: u64,
    /// The turn's cgroup, when it ran in one.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// Its process stopped because its MCP client left ([`super::Store::mark_inflight_client_closed`]);
    /// a record without it is a crash's (older records read as `false`).
    #[serde(default)]
    pub client_closed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_without_a_worktree_reads_as_before_and_one_with_it_round_trips() {
        let id = SessionId::parse("sessionId", "s1").unwrap();
        let plain = SessionRecord::new(id.clone(), PathBuf::from("/src/repo"), 1);
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("worktree").is_none(), "{json}");
        let back: SessionRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back.worktree, None);
        let mut rec = plain;
        rec.worktree = Some(WorktreeRecord {
            path: PathBuf::from("/wt/repo-s1"),
            branch: "codex-bridge/s1".into(),
            base_commit: "0123abcd".into(),
            origin: PathBuf::from("/src/repo"),
        });
        let json = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["worktree"]["baseCommit"], "0123abcd");
        assert_eq!(serde_json::from_value::<SessionRecord>(json).unwrap(), rec);
    }
}
