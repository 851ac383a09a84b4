//! The `review` tool: what a review looks at ([`review_target`]) and its `codex exec review`
//! invocation ([`build_review`]). No caller prompt, ever.

use crate::invalid::InvalidArgument;
use crate::security::ids::{validate_commit, validate_git_ref};
use crate::security::paths::Confined;

use super::spec::{Common, Deepest, PathKind, Result, SpawnSpec, cwd_str, validate_model};
use super::values::{ReviewMode, SandboxLevel};

/// Longest review title accepted.
pub const MAX_TITLE_LEN: usize = 512;

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewTarget {
    Uncommitted,
    Base(String),
    Commit { sha: String, title: Option<String> },
}

/// A `review` call. No caller prompt, ever.
#[derive(Debug, Clone)]
pub struct ReviewRequest {
    pub target: ReviewTarget,
    pub model: Option<String>,
    pub cwd: Confined,
}

/// Build a `review`: `exec --sandbox=workspace-write review --json --ephemeral
/// --ignore-user-config --ignore-rules --skip-git-repo-check [--model=M]
/// (--uncommitted | --base=B | --commit=C [--title=T]) -c …`. No prompt; stdin is null.
pub fn build_review(common: &Common, req: &ReviewRequest) -> Result<SpawnSpec> {
    if let Some(m) = &req.model {
        validate_model("model", m)?;
    }
    let cwd = cwd_str(&req.cwd)?;
    let sandbox = SandboxLevel::WorkspaceWrite;
    let mut args: Vec<String> = vec![
        "exec".into(),
        format!("--sandbox={}", sandbox.as_arg()),
        "review".into(),
        "--json".into(),
        "--ephemeral".into(),
        "--ignore-user-config".into(),
        "--ignore-rules".into(),
        "--skip-git-repo-check".into(),
    ];
    if let Some(m) = &req.model {
        args.push(format!("--model={m}"));
    }
    match &req.target {
        ReviewTarget::Uncommitted => args.push("--uncommitted".into()),
        ReviewTarget::Base(b) => {
            validate_git_ref("base", b)?;
            args.push(format!("--base={b}"));
        }
        ReviewTarget::Commit { sha, title } => {
            validate_commit("commit", sha)?;
            args.push(format!("--commit={sha}"));
            if let Some(t) = title {
                if t.is_empty() || t.len() > MAX_TITLE_LEN || t.chars().any(char::is_control) {
                    return Err(InvalidArgument::new(
                        "title",
                        format!("must be 1 to {MAX_TITLE_LEN} bytes of text on one line"),
                    ));
                }
                args.push(format!("--title={t}"));
            }
        }
    }
    Deepest::new(common).emit(&mut args, cwd);
    Ok(SpawnSpec {
        program: common.program.clone(),
        args,
        env: common.env.clone(),
        cwd: req.cwd.clone(),
        checked: vec![],
        stdin: None,
        sandbox,
        kind: PathKind::Review,
    })
}

/// Build the review target from the tool's arguments: exactly one of uncommitted, base,
/// commit; a title only with a commit (codex silently drops it otherwise).
pub fn review_target(
    mode: Option<ReviewMode>,
    base: Option<&str>,
    commit: Option<&str>,
    title: Option<&str>,
) -> Result<ReviewTarget> {
    let mode = match (mode, base, commit) {
        (Some(m), _, _) => m,
        (None, Some(_), None) => ReviewMode::Base,
        (None, None, Some(_)) => ReviewMode::Commit,
        (None, None, None) => ReviewMode::Uncommitted,
        (None, Some(_), Some(_)) => {
            return Err(InvalidArgument::new(
                "base",
                "give either base or commit, not both",
            ));
        }
    };
    if title.is_some() && mode != ReviewMode::Commit {
        return Err(InvalidArgument::new(
            "title",
            "is only meaningful with mode \"commit\"",
        ));
    }
    match mode {
        ReviewMode::Uncommitted => {
            if base.is_some() || commit.is_some() {
                return Err(InvalidArgument::new(
                    "mode",
                    "\"uncommitted\" takes neither base nor commit",
                ));
            }
            Ok(ReviewTarget::Uncommitted)
        }
        ReviewMode::Base => {
            if commit.is_some() {
                return Err(InvalidArgument::new(
                    "commit",
                    "is not used with mode \"base\"",
                ));
            }
            let b =
                base.ok_or_else(|| InvalidArgument::new("base", "is required with mode \"base\""))?;
            Ok(ReviewTarget::Base(b.to_owned()))
        }
        ReviewMode::Commit => {
            if base.is_some() {
                return Err(InvalidArgument::new(
                    "base",
                    "is not used with mode \"commit\"",
                ));
            }
            let c = commit.ok_or_else(|| {
                InvalidArgument::new("commit", "is required with mode \"commit\"")
            })?;
            Ok(ReviewTarget::Commit {
                sha: c.to_owned(),
                title: title.map(str::to_owned),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{common, confined, expect};
    use super::*;

    #[test]
    fn snapshot_review() {
        let req = ReviewRequest {
            target: ReviewTarget::Commit {
                sha: "abc1234".into(),
                title: Some("--uncommitted".into()),
            },
            model: Some("gpt-5.5".into()),
            cwd: confined("/work/repo"),
        };
        let spec = build_review(&common(), &req).unwrap();
        assert_eq!(
            spec.args,
            expect(
                &[
                    "exec",
                    "--sandbox=workspace-write",
                    "review",
                    "--json",
                    "--ephemeral",
                    "--ignore-user-config",
                    "--ignore-rules",
                    "--skip-git-repo-check",
                    "--model=gpt-5.5",
                    "--commit=abc1234",
                    "--title=--uncommitted",
                    "-c",
                    "model_provider=\"mock\"",
                ],
                &[]
            )
        );
        assert!(spec.stdin.is_none());
    }

    #[test]
    fn review_targets_take_exactly_one_and_title_only_with_commit() {
        assert_eq!(
            review_target(None, None, None, None).unwrap(),
            ReviewTarget::Uncommitted
        );
        assert_eq!(
            review_target(Some(ReviewMode::Base), Some("main"), None, None).unwrap(),
            ReviewTarget::Base("main".into())
        );
        assert!(review_target(Some(ReviewMode::Uncommitted), None, None, Some("t")).is_err());
        assert!(review_target(Some(ReviewMode::Base), Some("main"), None, Some("t")).is_err());
        assert!(review_target(Some(ReviewMode::Base), None, None, None).is_err());
        assert!(review_target(Some(ReviewMode::Commit), Some("main"), Some("abc"), None).is_err());
        assert!(review_target(None, Some("a"), Some("b"), None).is_err());
        assert!(ReviewMode::parse("mode", "all").is_err());
    }

    #[test]
    fn review_refs_that_look_like_flags_are_refused_before_spawn() {
        for target in [
            ReviewTarget::Base("-x".into()),
            ReviewTarget::Commit {
                sha: "-cfoo=bar".into(),
                title: None,
            },
            ReviewTarget::Commit {
                sha: "abc".into(),
                title: Some("a\nb".into()),
            },
        ] {
            let req = ReviewRequest {
                target,
                model: None,
                cwd: confined("/w"),
            };
            assert!(build_review(&common(), &req).is_err());
        }
    }

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn review_titles_are_one_bounded_line() {
        let with_title = |t: &str| ReviewRequest {
            target: ReviewTarget::Commit {
                sha: "abc1234".into(),
                title: Some(t.into()),
            },
            model: None,
            cwd: confined("/w"),
        };
        let longest = "t".repeat(MAX_TITLE_LEN);
        let spec = build_review(&common(), &with_title(&longest)).unwrap();
        assert!(spec.args.contains(&format!("--title={longest}")));
        for bad in [String::new(), "t".repeat(MAX_TITLE_LEN + 1), "a\tb".into()] {
            let err = build_review(&common(), &with_title(&bad))
                .unwrap_err()
                .to_string();
            assert!(err.contains("`title`"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn review_targets_for_a_commit_and_uncommitted_changes() {
        let commit = ReviewTarget::Commit {
            sha: "abc1234".into(),
            title: Some("t".into()),
        };
        assert_eq!(
            review_target(Some(ReviewMode::Commit), None, Some("abc1234"), Some("t")).unwrap(),
            commit
        );
        assert_eq!(
            review_target(None, None, Some("abc1234"), Some("t")).unwrap(),
            commit
        );
        assert!(review_target(Some(ReviewMode::Commit), None, None, None).is_err());
        assert!(review_target(Some(ReviewMode::Uncommitted), Some("main"), None, None).is_err());
        assert!(review_target(Some(ReviewMode::Uncommitted), None, Some("abc"), None).is_err());
    }
}
