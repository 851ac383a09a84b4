//! The `review` tool's `codex exec review` invocation ([`build_review`]) of what a review looks
//! at ([`ReviewTarget`]). No caller prompt, ever.

use crate::invalid::InvalidArgument;
use crate::security::ids::{ModelId, validate_commit, validate_git_ref};
use crate::security::paths::Confined;

use super::spec::{Common, Deepest, PathKind, Result, SpawnSpec, cwd_str};
use crate::plan::review::ReviewTarget;
use crate::plan::values::SandboxLevel;

/// Longest review title accepted.
pub const MAX_TITLE_LEN: usize = 512;

/// A `review` call. No caller prompt, ever.
#[derive(Debug, Clone)]
pub struct ReviewRequest {
    pub target: ReviewTarget,
    pub model: Option<ModelId>,
    pub cwd: Confined,
}

/// Build a `review`: `exec --sandbox=workspace-write review --json --ephemeral
/// --ignore-user-config --ignore-rules --skip-git-repo-check [--model=M]
/// (--uncommitted | --base=B | --commit=C [--title=T]) -c …`. No prompt; stdin is null.
pub fn build_review(common: &Common, req: &ReviewRequest) -> Result<SpawnSpec> {
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
            model: Some(ModelId::parse("model", "gpt-5.5").unwrap()),
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
}
