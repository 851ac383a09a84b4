//! Where a session's own git worktree goes and what its branch is called (issue 44): pure
//! rules, no IO (the paths given are already resolved by the caller).
//!
//! - The worktree of session `S` of a repository whose checkout is `.../NAME` is
//!   `<place>/<NAME>-<S>` on branch `codex-bridge/<S>`; `NAME` is kept to a safe alphabet and
//!   length, and a session id too long for one path component or ref component is replaced by
//!   a digest of it, so that the name is always one component git and the filesystem take.
//! - The place must be absolute, and the worktree must lie outside the repository's working
//!   tree and the store, and hold none of the server's own files (its config files, the
//!   store): a worktree inside the checkout would show in the person's `git status` (and be
//!   applied onto itself); a session's commands write in its worktree, so one inside the store,
//!   or one holding a config file, would let them write where the server keeps its own state.
//!   (A config file's directory itself may hold the place: `/etc`, a home directory.)

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::invalid::InvalidArgument;
use crate::security::ids::SessionId;

/// The prefix of every branch this server creates for a worktree.
pub const BRANCH_PREFIX: &str = "codex-bridge/";

/// Most bytes of a session id kept as it is in a name (a path component and a ref component
/// are at most 255 bytes; the repository's name and a separator take the rest).
const MAX_ID_IN_NAME: usize = 128;

/// Most characters of the repository's name kept in the directory's name.
const MAX_REPO_NAME: usize = 64;

/// The session id as it goes into a name: as it is when short, else `h-` and the first 32 hex
/// digits of its SHA-256 (an id holds only `[A-Za-z0-9_-]`, so a `h-` id of 34 bytes cannot be
/// another id's digest unless it is that long id's digest).
fn id_part(session: &SessionId) -> String {
    let id = session.to_string();
    if id.len() <= MAX_ID_IN_NAME {
        return id;
    }
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("h-{hex}")
}

/// The repository's name as it goes into the directory's name: the last component of its
/// checkout, every character outside `[A-Za-z0-9._-]` made `_`, no leading `.` or `-`, at most
/// 64 characters; `repo` when nothing is left.
fn repo_part(checkout: &Path) -> String {
    let raw = checkout
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_REPO_NAME)
        .collect();
    while name.starts_with(['.', '-']) {
        name.remove(0);
    }
    if name.is_empty() { "repo".into() } else { name }
}

/// The branch of `session`'s worktree.
pub fn branch_for(session: &SessionId) -> String {
    format!("{BRANCH_PREFIX}{}", id_part(session))
}

/// The directory of `session`'s worktree of the repository checked out at `checkout`.
pub fn path_for(place: &Path, checkout: &Path, session: &SessionId) -> PathBuf {
    place.join(format!("{}-{}", repo_part(checkout), id_part(session)))
}

/// Whether a linked worktree whose `HEAD` file reads `head` is on one of this server's
/// branches: a session's own worktree, which no other session may work in.
pub fn is_session_head(head: &str) -> bool {
    head.trim_end()
        .strip_prefix("ref: refs/heads/")
        .is_some_and(|branch| branch.starts_with(BRANCH_PREFIX))
}

/// Whether `path` is `dir` or lies inside it (lexically: both resolved by the caller).
fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// Check that a worktree at `worktree` may be created: absolute, with no `..` or `.`, outside
/// each directory of `keep_out` (the repository's working tree, the store) and holding no path
/// of `keep_clear` (the config files, the store), each named in the refusal. `field` names the
/// setting or argument.
pub fn check_worktree_path(
    field: &str,
    worktree: &Path,
    keep_out: &[(&str, &Path)],
    keep_clear: &[(&str, &Path)],
) -> Result<(), InvalidArgument> {
    if !worktree.is_absolute() {
        return Err(InvalidArgument::new(field, "must be an absolute path"));
    }
    if worktree
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(InvalidArgument::new(field, "must not hold `.` or `..`"));
    }
    for (what, dir) in keep_out {
        if within(worktree, dir) {
            return Err(InvalidArgument::new(
                field,
                format!("would put the worktree inside {what}, where it must never be"),
            ));
        }
    }
    for (what, own) in keep_clear {
        if within(own, worktree) {
            return Err(InvalidArgument::new(
                field,
                format!("would put {what} inside the worktree, where a session writes"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SessionId {
        SessionId::parse("sessionId", s).unwrap()
    }

    #[test]
    fn a_worktree_is_named_after_its_repository_and_session() {
        let p = path_for(Path::new("/wt"), Path::new("/src/my repo"), &id("s-1"));
        assert_eq!(p, PathBuf::from("/wt/my_repo-s-1"));
        assert_eq!(branch_for(&id("s-1")), "codex-bridge/s-1");
        let p = path_for(Path::new("/wt"), Path::new("/src/..hidden"), &id("a"));
        assert_eq!(p, PathBuf::from("/wt/hidden-a"));
        assert_eq!(
            path_for(Path::new("/wt"), Path::new("/"), &id("a")),
            PathBuf::from("/wt/repo-a")
        );
    }

    #[test]
    fn only_a_head_on_a_bridge_branch_is_a_sessions_worktree() {
        assert!(is_session_head("ref: refs/heads/codex-bridge/s1\n"));
        for other in [
            "ref: refs/heads/main\n",
            "ref: refs/heads/x/codex-bridge/s1\n",
            "0123abcd\n",
            "",
        ] {
            assert!(!is_session_head(other), "{other}");
        }
    }

    #[test]
    fn a_long_session_id_becomes_a_digest_that_fits_one_component() {
        let long = "x".repeat(256);
        let b = branch_for(&id(&long));
        let p = path_for(
            Path::new("/wt"),
            &PathBuf::from("/r".to_owned() + &"n".repeat(300)),
            &id(&long),
        );
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.len() < 255, "{name}");
        assert!(b.len() < 255 && b.starts_with("codex-bridge/h-"), "{b}");
        assert_ne!(branch_for(&id(&"y".repeat(256))), b);
    }

    #[test]
    fn a_worktree_never_lies_in_the_checkout_or_the_store_nor_holds_an_own_file() {
        let keep: [(&str, &Path); 2] = [
            ("the repository's working tree", Path::new("/src/repo")),
            ("the store", Path::new("/data/bridge")),
        ];
        let clear: [(&str, &Path); 2] = [
            ("the config file", Path::new("/etc/bridge/config.toml")),
            ("the store", Path::new("/data/bridge")),
        ];
        for (bad, what) in [
            ("/src/repo/wt/repo-s", "working tree"),
            ("/src/repo", "working tree"),
            ("/data/bridge/worktrees/repo-s", "the store"),
            ("/etc/bridge", "config file"),
            ("/data", "the store inside"),
        ] {
            let err = check_worktree_path("worktrees", Path::new(bad), &keep, &clear).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("worktrees") && text.contains(what),
                "{bad}: {text}"
            );
        }
        assert!(
            check_worktree_path("worktrees", Path::new("/src/repo-wt/repo-s"), &keep, &clear)
                .is_ok()
        );
        assert!(
            check_worktree_path(
                "worktrees",
                Path::new("/data/bridge-worktrees/r"),
                &keep,
                &clear
            )
            .is_ok()
        );
        assert!(check_worktree_path("worktrees", Path::new("wt/r"), &keep, &clear).is_err());
        assert!(
            check_worktree_path("worktrees", Path::new("/src/x/../repo/r"), &keep, &clear).is_err()
        );
    }
}
