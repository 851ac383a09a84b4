//! The policy of the templates and what codex reports back: the fixed thread-level `sandbox`,
//! `approvalPolicy` and `approvalsReviewer`, a turn's `sandboxPolicy` and [`Approvals`], the
//! checked `cwd` and `model` values every template carries, and the [`EffectivePolicy`] codex
//! reports, compared with what the templates sent ([`PolicyMismatch`]).

use crate::security::ids::ModelId;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::frame::{ProtocolError, invalid};
use crate::plan::values::SandboxLevel;

pub(super) fn cwd_value(cwd: &Path) -> Result<String, ProtocolError> {
    let s = cwd
        .to_str()
        .ok_or_else(|| invalid("cwd", "is not valid UTF-8"))?;
    if !cwd.is_absolute() || s.contains('\0') {
        return Err(invalid("cwd", "must be an absolute path without NUL"));
    }
    Ok(s.to_owned())
}

/// A model id for a template: a [`ModelId`] is checked already (where the call was read).
pub(super) fn model_value(model: Option<&ModelId>) -> Option<String> {
    model.map(|m| m.as_str().to_owned())
}

/// A thread-level `sandbox`: never writable (a writable `sandbox` there records the cwd as
/// trusted in `$CODEX_HOME/config.toml`; the turn's level goes in `turn/start.sandboxPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(super) enum ThreadSandbox {
    #[serde(rename = "read-only")]
    ReadOnly,
}

/// A thread-level `approvalPolicy`: `never` (a turn may ask, [`Approvals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(super) enum ThreadApprovals {
    #[serde(rename = "never")]
    Never,
}

/// `approvalsReviewer`: always a person, never a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(super) enum Reviewer {
    #[serde(rename = "user")]
    User,
}

/// The wire `SandboxPolicy` of a turn. Workspace-write gets no extra writable roots (an empty
/// array, always) and no network: the cwd is its only root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(super) enum SandboxPolicy {
    ReadOnly,
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        writable_roots: [String; 0],
        network_access: bool,
    },
    DangerFullAccess,
}

impl SandboxPolicy {
    pub(super) fn of(level: SandboxLevel) -> Self {
        match level {
            SandboxLevel::ReadOnly => SandboxPolicy::ReadOnly,
            SandboxLevel::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
                writable_roots: [],
                network_access: false,
            },
            SandboxLevel::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        }
    }
}

/// The wire `SandboxPolicy` of a turn for a sandbox level, as JSON (what `turn/start` carries).
pub fn sandbox_policy(level: SandboxLevel) -> Value {
    json!(SandboxPolicy::of(level))
}

/// The approval policy a turn is sent with. `Never` is the default; `OnRequest` lets codex ask
/// the client (only for the `approvals = ask` setting, with an answerer that a person stands
/// behind). The reviewer stays `user` either way: no model approves an escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Approvals {
    #[default]
    #[serde(rename = "never")]
    Never,
    #[serde(rename = "on-request")]
    OnRequest,
}

impl Approvals {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Approvals::Never => "never",
            Approvals::OnRequest => "on-request",
        }
    }
}

/// A sandbox as codex reports it (`sandbox` of a thread result, `sandboxPolicy` of settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportedSandbox {
    ReadOnly {
        network: bool,
    },
    WorkspaceWrite {
        writable_roots: Vec<String>,
        network: bool,
    },
    DangerFullAccess,
    /// `externalSandbox`, a type this module does not know, or a known type in a shape it does
    /// not read: never what the bridge sent.
    Other(String),
}

/// The wire shapes of the sandboxes the bridge sends; any other shape is
/// [`ReportedSandbox::Other`] (a policy union codex may extend: read, never matched).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum WireSandbox {
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        #[serde(default = "network_unknown")]
        network_access: bool,
    },
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default = "network_unknown")]
        network_access: bool,
    },
    DangerFullAccess,
}

/// A sandbox that does not say whether it has network counts as one that has it (so it never
/// matches what the bridge sent).
fn network_unknown() -> bool {
    true
}

impl ReportedSandbox {
    fn from_value(v: &Value) -> Self {
        match WireSandbox::deserialize(v) {
            Ok(WireSandbox::ReadOnly { network_access }) => ReportedSandbox::ReadOnly {
                network: network_access,
            },
            Ok(WireSandbox::WorkspaceWrite {
                writable_roots,
                network_access,
            }) => ReportedSandbox::WorkspaceWrite {
                writable_roots,
                network: network_access,
            },
            Ok(WireSandbox::DangerFullAccess) => ReportedSandbox::DangerFullAccess,
            Err(_) => ReportedSandbox::Other(match v.get("type").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => v.to_string(),
            }),
        }
    }

    /// Whether this is exactly what [`sandbox_policy`] asks for at `level`.
    pub fn matches(&self, level: SandboxLevel) -> bool {
        match (self, level) {
            (ReportedSandbox::ReadOnly { network: false }, SandboxLevel::ReadOnly) => true,
            (
                ReportedSandbox::WorkspaceWrite {
                    writable_roots,
                    network: false,
                },
                SandboxLevel::WorkspaceWrite,
            ) => writable_roots.is_empty(),
            (ReportedSandbox::DangerFullAccess, SandboxLevel::DangerFullAccess) => true,
            _ => false,
        }
    }
}

/// The policy codex says a thread runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    pub sandbox: ReportedSandbox,
    /// `approvalPolicy` as a string (a `granular` object is kept as its JSON text).
    pub approval_policy: String,
    pub approvals_reviewer: String,
    pub cwd: String,
}

/// The policy keys of a thread result and of `threadSettings`, every one required; the sandbox
/// (`sandbox` there, `sandboxPolicy` here) is read by [`ReportedSandbox::from_value`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WirePolicy {
    #[serde(alias = "sandboxPolicy")]
    sandbox: Value,
    approval_policy: Value,
    approvals_reviewer: String,
    cwd: String,
}

impl From<WirePolicy> for EffectivePolicy {
    fn from(w: WirePolicy) -> Self {
        EffectivePolicy {
            sandbox: ReportedSandbox::from_value(&w.sandbox),
            approval_policy: match w.approval_policy {
                Value::String(s) => s,
                other => other.to_string(),
            },
            approvals_reviewer: w.approvals_reviewer,
            cwd: w.cwd,
        }
    }
}

impl EffectivePolicy {
    /// Compare with what the templates send: `level`, `never`, `user`, `cwd`
    /// ([`crate::codex::applied`]). The error names every difference.
    pub fn check(&self, level: SandboxLevel, cwd: &Path) -> Result<(), PolicyMismatch> {
        self.check_with(level, cwd, Approvals::Never)
    }
}

impl EffectivePolicy {
    /// [`EffectivePolicy::check`] for a turn sent with `approvals`.
    pub fn check_with(
        &self,
        level: SandboxLevel,
        cwd: &Path,
        approvals: Approvals,
    ) -> Result<(), PolicyMismatch> {
        use crate::codex::applied::{Applied, ApprovalsAsked, Asked, differences};
        let asked = Asked {
            sandbox: level,
            approvals: match approvals {
                Approvals::Never => ApprovalsAsked::Never,
                Approvals::OnRequest => ApprovalsAsked::OnRequest,
            },
            cwd: Some(cwd),
        };
        let sandbox = format!("{:?}", self.sandbox);
        let applied = Applied {
            sandbox_matches: self.sandbox.matches(level),
            sandbox: &sandbox,
            approval_policy: &self.approval_policy,
            approvals_reviewer: &self.approvals_reviewer,
            cwd: Some(&self.cwd),
        };
        let diffs = differences(&asked, &applied);
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(PolicyMismatch(diffs.join("; ")))
        }
    }
}

/// Codex reports a policy other than the one the bridge sent: the turn must not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("codex app-server reports a policy other than the one the bridge set: {0}")]
pub struct PolicyMismatch(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::app_server::protocol::fixtures::thread;
    use crate::codex::app_server::protocol::{Incoming, Notification, parse_line};

    fn policy_of(v: &Value) -> EffectivePolicy {
        WirePolicy::deserialize(v).unwrap().into()
    }

    #[test]
    fn a_sticky_or_widened_setting_is_a_mismatch() {
        // 0.145.0, after a workspaceWrite turn (0.171.0 adds disabledPluginIds, environments)
        let l = r#"{"method":"thread/settings/updated","params":{"threadId":"01a22759-e393-7f71-bea4-35a12106bc11","threadSettings":{"cwd":"/w","approvalPolicy":"never","approvalsReviewer":"user","sandboxPolicy":{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false},"activePermissionProfile":null,"model":"gpt-5.6-sol","modelProvider":"mock","serviceTier":null,"effort":null,"summary":null,"collaborationMode":{"mode":"default","settings":{"model":"gpt-5.6-sol","reasoning_effort":null,"developer_instructions":null}},"multiAgentMode":"explicitRequestOnly","personality":"pragmatic"}},"emittedAtMs":1796153840207}"#;
        let Incoming::Notification(Notification::ThreadSettingsUpdated { thread_id, policy }) =
            parse_line(l).unwrap()
        else {
            panic!()
        };
        assert_eq!(thread_id, thread());
        assert_eq!(
            policy.check(SandboxLevel::WorkspaceWrite, Path::new("/w")),
            Ok(())
        );
        // the next turn sent read-only: codex still reporting workspace-write is a mismatch
        assert!(
            policy
                .check(SandboxLevel::ReadOnly, Path::new("/w"))
                .is_err()
        );
        let widened = |patch: Value| {
            let mut p = json!({"cwd": "/w", "approvalPolicy": "never", "approvalsReviewer": "user",
                "sandboxPolicy": {"type": "readOnly", "networkAccess": false}});
            for (k, v) in patch.as_object().unwrap() {
                p[k] = v.clone();
            }
            policy_of(&p).check(SandboxLevel::ReadOnly, Path::new("/w"))
        };
        assert_eq!(widened(json!({})), Ok(()));
        for patch in [
            json!({"approvalPolicy": "on-request"}),
            json!({"approvalPolicy": {"granular": {"rules": true}}}),
            json!({"approvalsReviewer": "auto_review"}),
            json!({"sandboxPolicy": {"type": "readOnly", "networkAccess": true}}),
            json!({"sandboxPolicy": {"type": "externalSandbox"}}),
            json!({"sandboxPolicy": {"type": "dangerFullAccess"}}),
        ] {
            assert!(widened(patch.clone()).is_err(), "{patch}");
        }
        let roots = EffectivePolicy {
            sandbox: ReportedSandbox::WorkspaceWrite {
                writable_roots: vec!["/".into()],
                network: false,
            },
            approval_policy: "never".into(),
            approvals_reviewer: "user".into(),
            cwd: "/w".into(),
        };
        assert!(
            roots
                .check(SandboxLevel::WorkspaceWrite, Path::new("/w"))
                .is_err()
        );
    }
}
