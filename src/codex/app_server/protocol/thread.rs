//! Threads: the fixed thread-level template of `thread/start`, `thread/resume` and
//! `thread/fork` (`cwd`, `sandbox: "read-only"`, `approvalPolicy: "never"`,
//! `approvalsReviewer: "user"`, never `config`), their result ([`ThreadOpened`], with the
//! thread's effective policy), the [`PolicyWatch`] that follows that policy through
//! `thread/settings/updated`, and `thread/unsubscribe`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::frame::{Method, ProtocolError, message, typed_ref};
use super::items::Notification;
use super::policy::{
    EffectivePolicy, PolicyMismatch, Reviewer, ThreadApprovals, ThreadSandbox, WirePolicy,
    cwd_value, model_value,
};
use crate::plan::values::SandboxLevel;
use crate::security::ids::{ModelId, SessionName, ThreadId};

/// The keys every thread-level template carries, and nothing a caller names (never `config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadKeys {
    cwd: String,
    sandbox: ThreadSandbox,
    approval_policy: ThreadApprovals,
    approvals_reviewer: Reviewer,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

fn thread_keys(cwd: &Path, model: Option<&ModelId>) -> Result<ThreadKeys, ProtocolError> {
    Ok(ThreadKeys {
        cwd: cwd_value(cwd)?,
        sandbox: ThreadSandbox::ReadOnly,
        approval_policy: ThreadApprovals::Never,
        approvals_reviewer: Reviewer::User,
        model: model_value(model),
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The params of `thread/start` ([`thread_start`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadStart {
    #[serde(flatten)]
    keys: ThreadKeys,
    #[serde(skip_serializing_if = "is_false")]
    ephemeral: bool,
}

message!(ThreadStart, Method::ThreadStart, ThreadOpened);

/// The params of `thread/resume` ([`thread_resume`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResume {
    thread_id: String,
    #[serde(flatten)]
    keys: ThreadKeys,
}

message!(ThreadResume, Method::ThreadResume, ThreadOpened);

/// The params of `thread/fork` ([`thread_fork`]): those of `thread/resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadFork {
    thread_id: String,
    #[serde(flatten)]
    keys: ThreadKeys,
}

message!(ThreadFork, Method::ThreadFork, ThreadOpened);

/// `thread/start`: a new thread in `cwd` (a confined directory). `ephemeral` threads are never
/// written to disk (and cannot be resumed).
pub fn thread_start(
    cwd: &Path,
    model: Option<&ModelId>,
    ephemeral: bool,
) -> Result<ThreadStart, ProtocolError> {
    Ok(ThreadStart {
        keys: thread_keys(cwd, model)?,
        ephemeral,
    })
}

/// `thread/resume` of a stored thread. On a thread the process already has loaded codex ignores
/// `sandbox`: only the next `turn/start`'s `sandboxPolicy` resets it.
pub fn thread_resume(
    thread: &ThreadId,
    cwd: &Path,
    model: Option<&ModelId>,
) -> Result<ThreadResume, ProtocolError> {
    Ok(ThreadResume {
        thread_id: thread.to_arg(),
        keys: thread_keys(cwd, model)?,
    })
}

/// `thread/fork` of a stored thread: a new, stored thread that starts with a copy of its
/// history. The fixed thread-level template of `thread/start` (`cwd`, `sandbox: "read-only"`,
/// `approvalPolicy: "never"`, `approvalsReviewer: "user"`, never `config`); the fork's turns
/// carry their own sandbox like any turn. Its result is a [`ThreadOpened`] (the same shape on
/// 0.145.0 and 0.171.0). Give the thread's own `model`: a fork to another model hands the
/// history over as a summary, which costs a model call (measured on both versions).
pub fn thread_fork(
    thread: &ThreadId,
    cwd: &Path,
    model: Option<&ModelId>,
) -> Result<ThreadFork, ProtocolError> {
    Ok(ThreadFork {
        thread_id: thread.to_arg(),
        keys: thread_keys(cwd, model)?,
    })
}

/// The `thread/start` / `thread/resume` / `thread/fork` result: the thread and its effective
/// policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "WireOpened")]
pub struct ThreadOpened {
    pub thread: ThreadId,
    pub policy: EffectivePolicy,
    /// `thread.path`: the rollout file (`None` for an ephemeral thread).
    pub path: Option<String>,
    /// How many turns the thread already holds (a resumed thread's history).
    pub turns: usize,
}

/// A thread as the bridge reads it: its id, its rollout and how many turns it holds.
#[derive(Deserialize)]
struct WireThread {
    id: ThreadId,
    path: Option<String>,
    turns: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct WireOpened {
    thread: WireThread,
    #[serde(flatten)]
    policy: WirePolicy,
}

/// Read a `thread/start` / `thread/resume` / `thread/fork` result.
pub fn parse_thread_opened(result: &Value) -> Result<ThreadOpened, ProtocolError> {
    typed_ref("thread result", result)
}

impl From<WireOpened> for ThreadOpened {
    fn from(w: WireOpened) -> Self {
        ThreadOpened {
            thread: w.thread.id,
            policy: w.policy.into(),
            path: w.thread.path,
            turns: w.thread.turns.len(),
        }
    }
}

/// The policy a loaded thread runs with, as codex last reported it: the `thread/start` /
/// `thread/resume` result, then every `thread/settings/updated` of the thread (codex sends one,
/// before `turn/started`, whenever a `turn/start` changed a setting, and none otherwise). Check it
/// at each `turn/started` against what that `turn/start` sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyWatch {
    thread: ThreadId,
    current: EffectivePolicy,
}

impl PolicyWatch {
    /// Start from the policy of a `thread/start` / `thread/resume` result.
    pub fn new(opened: &ThreadOpened) -> Self {
        PolicyWatch {
            thread: opened.thread,
            current: opened.policy.clone(),
        }
    }

    /// Take in a notification (those of other threads and of other kinds change nothing).
    pub fn observe(&mut self, n: &Notification) {
        if let Notification::ThreadSettingsUpdated { thread_id, policy } = n
            && *thread_id == self.thread
        {
            self.current = policy.clone();
        }
    }

    /// The last reported policy.
    pub fn current(&self) -> &EffectivePolicy {
        &self.current
    }

    /// Whether it is what the turn's template sent.
    pub fn check(&self, level: SandboxLevel, cwd: &Path) -> Result<(), PolicyMismatch> {
        self.current.check(level, cwd)
    }
}

/// The params of `thread/unsubscribe` ([`thread_unsubscribe`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribe {
    thread_id: String,
}

/// `status` of the `thread/unsubscribe` result (a status of a later version reads as
/// `Unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnsubscribeStatus {
    Unsubscribed,
    NotLoaded,
    NotSubscribed,
    #[serde(other)]
    Unknown,
}

/// The `thread/unsubscribe` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Unsubscribed {
    pub status: UnsubscribeStatus,
}

impl Unsubscribed {
    /// Whether the thread is no longer loaded (`unsubscribed`, or `notLoaded`).
    /// `notSubscribed` (another client holds it) and anything else is `false`.
    pub fn unloaded(&self) -> bool {
        matches!(
            self.status,
            UnsubscribeStatus::Unsubscribed | UnsubscribeStatus::NotLoaded
        )
    }
}

message!(ThreadUnsubscribe, Method::ThreadUnsubscribe, Unsubscribed);

/// `thread/unsubscribe`: the process unloads `thread` (an ephemeral thread, never written to
/// disk, is gone with it).
pub fn thread_unsubscribe(thread: &ThreadId) -> ThreadUnsubscribe {
    ThreadUnsubscribe {
        thread_id: thread.to_arg(),
    }
}

/// Read a `thread/unsubscribe` result: [`Unsubscribed::unloaded`].
pub fn parse_unsubscribed(result: &Value) -> Result<bool, ProtocolError> {
    typed_ref::<Unsubscribed>("thread/unsubscribe result", result).map(|u| u.unloaded())
}

/// The params of `thread/name/set` ([`thread_set_name`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSetName {
    thread_id: String,
    name: String,
}

message!(ThreadSetName, Method::ThreadSetName, super::turn::Empty);

/// `thread/name/set`: `thread` carries `name` (a [`SessionName`], checked), which codex's own
/// app shows in its list of threads.
pub fn thread_set_name(thread: &ThreadId, name: &SessionName) -> ThreadSetName {
    ThreadSetName {
        thread_id: thread.to_arg(),
        name: name.as_str().to_owned(),
    }
}

/// The params of `thread/rollback` ([`thread_rollback`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRollback {
    thread_id: String,
    num_turns: u32,
}

/// The `thread/rollback` result: the thread with the turns it kept.
#[derive(Debug, Deserialize)]
pub struct RolledBack {
    thread: KeptTurns,
}

#[derive(Debug, Deserialize)]
struct KeptTurns {
    turns: Vec<serde::de::IgnoredAny>,
}

impl RolledBack {
    /// How many turns the thread kept.
    pub fn kept(&self) -> usize {
        self.thread.turns.len()
    }
}

message!(ThreadRollback, Method::ThreadRollback, RolledBack);

/// `thread/rollback` (codex 0.145.0): the last `turns` turns of `thread` dropped from its
/// history (files codex changed stay as they are).
pub fn thread_rollback(thread: &ThreadId, turns: u32) -> ThreadRollback {
    ThreadRollback {
        thread_id: thread.to_arg(),
        num_turns: turns,
    }
}

/// The params of `thread/turns/list` ([`thread_turns_list`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsList {
    thread_id: String,
    limit: u32,
    sort_direction: &'static str,
    items_view: &'static str,
}

/// A page of a thread's turns (their ids only).
#[derive(Debug, Deserialize)]
pub struct TurnsPage {
    data: Vec<TurnId>,
}

#[derive(Debug, Deserialize)]
struct TurnId {
    id: String,
}

impl TurnsPage {
    /// The turns' ids, as listed (newest first).
    pub fn ids(&self) -> Vec<&str> {
        self.data.iter().map(|t| t.id.as_str()).collect()
    }
}

message!(ThreadTurnsList, Method::ThreadTurnsList, TurnsPage);

/// `thread/turns/list` (codex 0.171.0): the newest `limit` turns of `thread`, without items.
pub fn thread_turns_list(thread: &ThreadId, limit: u32) -> ThreadTurnsList {
    ThreadTurnsList {
        thread_id: thread.to_arg(),
        limit,
        sort_direction: "desc",
        items_view: "notLoaded",
    }
}

/// The params of `thread/revert` ([`thread_revert`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevert {
    thread_id: String,
    before_turn_id: String,
}

/// The `thread/revert` result (what it carries is not read).
#[derive(Debug, Deserialize)]
pub struct Reverted {}

message!(ThreadRevert, Method::ThreadRevert, Reverted);

/// `thread/revert` (codex 0.171.0): `thread`'s history cut back to before the turn `before`
/// (a turn id codex listed), that turn and every later one dropped.
pub fn thread_revert(thread: &ThreadId, before: &str) -> ThreadRevert {
    ThreadRevert {
        thread_id: thread.to_arg(),
        before_turn_id: before.to_owned(),
    }
}

/// The params of `thread/compact/start` ([`thread_compact_start`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCompactStart {
    thread_id: String,
}

message!(ThreadCompactStart, Method::ThreadCompactStart, Reverted);

/// `thread/compact/start`: codex compacts `thread`'s context (a turn of its own: its
/// `turn/started`, items and `turn/completed` follow on the thread).
pub fn thread_compact_start(thread: &ThreadId) -> ThreadCompactStart {
    ThreadCompactStart {
        thread_id: thread.to_arg(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::{THREAD, TURN, keys, line, thread};
    use crate::codex::app_server::protocol::{Message, ReportedSandbox};
    use serde_json::json;

    #[test]
    fn thread_templates_never_carry_config_or_a_writable_sandbox() {
        let cwd = Path::new("/w/repo");
        let start = thread_start(
            cwd,
            Some(&ModelId::parse("model", "gpt-5.5").unwrap()),
            false,
        )
        .unwrap();
        assert_eq!(
            line(&start, 2),
            json!({"method": "thread/start", "id": 2, "params": {
                "cwd": "/w/repo", "sandbox": "read-only", "approvalPolicy": "never",
                "approvalsReviewer": "user", "model": "gpt-5.5"}})
        );
        let resume = thread_resume(&thread(), cwd, None).unwrap();
        assert_eq!(
            keys(&resume),
            [
                "approvalPolicy",
                "approvalsReviewer",
                "cwd",
                "sandbox",
                "threadId"
            ]
            .map(String::from)
            .into()
        );
        let eph = thread_start(cwd, None, true).unwrap();
        assert_eq!(eph.params().unwrap()["ephemeral"], json!(true));
        for p in [start.params(), resume.params(), eph.params()] {
            let p = p.unwrap();
            assert!(p.get("config").is_none());
            assert_eq!(p["sandbox"], "read-only");
        }
    }

    // Lines as measured (0.145.0 / 0.171.0), trimmed of fields the parser ignores.

    #[test]
    fn thread_results_of_both_versions_give_the_effective_policy() {
        let v145 = json!({"thread": {"id": THREAD, "ephemeral": false, "historyMode": "legacy",
            "path": "/h/sessions/2026/12/01/rollout-x.jsonl", "cwd": "/w", "cliVersion": "0.145.0",
            "source": "vscode", "turns": []},
            "model": "gpt-5.6-sol", "modelProvider": "mock", "serviceTier": null, "cwd": "/w",
            "runtimeWorkspaceRoots": ["/w"], "instructionSources": [], "approvalPolicy": "never",
            "approvalsReviewer": "user", "sandbox": {"type": "readOnly", "networkAccess": false},
            "activePermissionProfile": null, "reasoningEffort": null, "multiAgentMode": "explicitRequestOnly"});
        let mut v171 = v145.clone();
        v171["disabledPluginIds"] = json!([]);
        v171["thread"]["historyMode"] = json!("paginated");
        v171["thread"]["turns"] = json!([{"id": TURN, "status": "completed", "items": []}]);
        for (v, turns) in [(v145, 0), (v171, 1)] {
            let o = parse_thread_opened(&v).unwrap();
            assert_eq!(o.thread, thread());
            assert_eq!(o.turns, turns);
            assert!(o.path.is_some());
            assert_eq!(
                o.policy.check(SandboxLevel::ReadOnly, Path::new("/w")),
                Ok(())
            );
            let err = o
                .policy
                .check(SandboxLevel::WorkspaceWrite, Path::new("/other"))
                .unwrap_err()
                .0;
            assert!(
                err.contains("expected workspace-write") && err.contains("working directory"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_watch_follows_only_its_own_threads_settings() {
        let opened = ThreadOpened {
            thread: thread(),
            policy: EffectivePolicy {
                sandbox: ReportedSandbox::ReadOnly { network: false },
                approval_policy: "never".into(),
                approvals_reviewer: "user".into(),
                cwd: "/w".into(),
            },
            path: None,
            turns: 0,
        };
        let mut watch = PolicyWatch::new(&opened);
        let widened = |thread_id: &str| Notification::ThreadSettingsUpdated {
            thread_id: ThreadId::parse(thread_id).unwrap(),
            policy: EffectivePolicy {
                sandbox: ReportedSandbox::DangerFullAccess,
                ..opened.policy.clone()
            },
        };
        watch.observe(&widened("01a22759-e393-7f71-bea4-000000000000"));
        watch.observe(&Notification::Other {
            method: "thread/status/changed".into(),
        });
        assert_eq!(watch.check(SandboxLevel::ReadOnly, Path::new("/w")), Ok(()));
        watch.observe(&widened(THREAD));
        assert_eq!(watch.current().sandbox, ReportedSandbox::DangerFullAccess);
        assert!(
            watch
                .check(SandboxLevel::ReadOnly, Path::new("/w"))
                .is_err()
        );
        assert_eq!(
            watch.check(SandboxLevel::DangerFullAccess, Path::new("/w")),
            Ok(())
        );
    }
}
