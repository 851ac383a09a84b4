//! The one rule for "what codex applied is what the bridge asked": the sandbox level, the
//! approval policy (`never`, or `on-request` for a turn whose questions go to the person who
//! started it), the approvals reviewer (`user`) and, where codex reports it, the working
//! directory. Pure: both what codex reported in its app-server answers (`EffectivePolicy`) and
//! what it recorded in its rollout (`TurnContext`) are judged here, and a difference fails the
//! turn closed where it is found.

use std::path::Path;

use crate::plan::values::SandboxLevel;

/// The approval policies a turn may run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalsAsked {
    /// `never`: codex asks nobody (every escalation is declined).
    Never,
    /// `on-request`: the turn was sent so (its questions reach a person).
    OnRequest,
    /// `never` or `on-request`: a record that does not say which was sent (the rollout of a
    /// turn whose caller could be asked).
    NeverOrOnRequest,
}

impl ApprovalsAsked {
    fn allows(self, policy: &str) -> bool {
        match self {
            ApprovalsAsked::Never => policy == "never",
            ApprovalsAsked::OnRequest => policy == "on-request",
            ApprovalsAsked::NeverOrOnRequest => policy == "never" || policy == "on-request",
        }
    }

    fn expected(self) -> &'static str {
        match self {
            ApprovalsAsked::Never => "never",
            ApprovalsAsked::OnRequest => "on-request",
            ApprovalsAsked::NeverOrOnRequest => "never or on-request",
        }
    }
}

/// What the bridge asked for.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub sandbox: SandboxLevel,
    pub approvals: ApprovalsAsked,
    /// The working directory sent, where codex reports the one it applied.
    pub cwd: Option<&'a Path>,
}

/// What codex reported it applied.
#[derive(Debug, Clone, Copy)]
pub struct Applied<'a> {
    /// Whether codex's sandbox is exactly the level asked for (no extra writable root, no
    /// network), as judged from its own report.
    pub sandbox_matches: bool,
    /// Codex's sandbox, for the message.
    pub sandbox: &'a str,
    pub approval_policy: &'a str,
    pub approvals_reviewer: &'a str,
    /// `None` where codex does not report it (its rollout).
    pub cwd: Option<&'a str>,
}

/// Every difference between what was asked and what codex applied, in words (empty: none).
pub fn differences(asked: &Asked<'_>, applied: &Applied<'_>) -> Vec<String> {
    let mut diffs = Vec::new();
    if !applied.sandbox_matches {
        diffs.push(format!(
            "sandbox is {}, expected {}",
            applied.sandbox,
            asked.sandbox.as_arg()
        ));
    }
    if !asked.approvals.allows(applied.approval_policy) {
        diffs.push(format!(
            "approval policy is {}, expected {}",
            applied.approval_policy,
            asked.approvals.expected()
        ));
    }
    if applied.approvals_reviewer != "user" {
        diffs.push(format!(
            "approvals reviewer is {}, expected user",
            applied.approvals_reviewer
        ));
    }
    if let Some(sent) = asked.cwd
        && applied.cwd.is_none_or(|c| Path::new(c) != sent)
    {
        diffs.push("working directory differs from the one sent".to_owned());
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(approvals: ApprovalsAsked) -> Asked<'static> {
        Asked {
            sandbox: SandboxLevel::ReadOnly,
            approvals,
            cwd: Some(Path::new("/w")),
        }
    }

    fn applied(policy: &'static str) -> Applied<'static> {
        Applied {
            sandbox_matches: true,
            sandbox: "read-only",
            approval_policy: policy,
            approvals_reviewer: "user",
            cwd: Some("/w"),
        }
    }

    #[test]
    fn what_was_asked_passes() {
        assert!(differences(&asked(ApprovalsAsked::Never), &applied("never")).is_empty());
        assert!(differences(&asked(ApprovalsAsked::OnRequest), &applied("on-request")).is_empty());
        for p in ["never", "on-request"] {
            assert!(differences(&asked(ApprovalsAsked::NeverOrOnRequest), &applied(p)).is_empty());
        }
    }

    #[test]
    fn each_difference_is_named() {
        let a = asked(ApprovalsAsked::Never);
        for (policy, want) in [
            (
                "on-request",
                "approval policy is on-request, expected never",
            ),
            ("untrusted", "approval policy is untrusted, expected never"),
        ] {
            assert_eq!(differences(&a, &applied(policy)), vec![want.to_owned()]);
        }
        assert_eq!(
            differences(&asked(ApprovalsAsked::OnRequest), &applied("never")),
            vec!["approval policy is never, expected on-request".to_owned()]
        );
        assert_eq!(
            differences(
                &asked(ApprovalsAsked::NeverOrOnRequest),
                &applied("on-failure")
            ),
            vec!["approval policy is on-failure, expected never or on-request".to_owned()]
        );
        let all = Applied {
            sandbox_matches: false,
            sandbox: "danger-full-access",
            approval_policy: "untrusted",
            approvals_reviewer: "auto_review",
            cwd: Some("/elsewhere"),
        };
        assert_eq!(
            differences(&a, &all),
            vec![
                "sandbox is danger-full-access, expected read-only".to_owned(),
                "approval policy is untrusted, expected never".to_owned(),
                "approvals reviewer is auto_review, expected user".to_owned(),
                "working directory differs from the one sent".to_owned(),
            ]
        );
        // a directory asked for and none reported is a difference; none asked, none checked
        let mut none = applied("never");
        none.cwd = None;
        assert_eq!(differences(&a, &none).len(), 1);
        let no_cwd = Asked { cwd: None, ..a };
        assert!(differences(&no_cwd, &none).is_empty());
    }
}
