//! What a review looks at ([`ReviewTarget`]), read from the `review` tool's arguments
//! ([`review_target`]): exactly one of uncommitted changes, a base branch or a commit.

use crate::invalid::InvalidArgument;

use super::values::ReviewMode;

/// What the rules refuse: an argument, named, with the reason.
type Result<T> = std::result::Result<T, InvalidArgument>;

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewTarget {
    Uncommitted,
    Base(String),
    Commit { sha: String, title: Option<String> },
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
    use super::*;

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
