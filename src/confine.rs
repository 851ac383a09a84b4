//! The IO half of path confinement: ask the filesystem about a caller's path (canonical form,
//! what is there) and let [`crate::security::paths::confine`] apply the rules to the answer.
//! The only place a resolved [`Confined`] is made, and again, right before a spawn,
//! [`recheck`]ed so a path swapped in between is caught. It also resolves the bridge's own
//! files for [`paths::check_own_files`].

use std::path::{Path, PathBuf};

use crate::invalid::InvalidArgument;
use crate::security::paths::{self, Confined, Found, Kind, Lookup, OwnFile};

/// What confinement refuses: the argument, named, with the reason (folded into the crate error
/// with the same words by the caller's `?`).
type Result<T> = std::result::Result<T, InvalidArgument>;

/// Resolve `raw` (relative to `base` when not absolute), follow every symlink, and confine it
/// inside one of `containers` (already canonical). Errors name `field` and the reason and
/// never include file contents.
pub fn resolve(
    field: &str,
    raw: &str,
    base: &Path,
    containers: &[PathBuf],
    kind: Kind,
) -> Result<Confined> {
    paths::confine(field, raw, base, containers, kind, lookup)
}

/// The filesystem's answer for `path`.
fn lookup(path: &Path) -> Lookup {
    let canonical = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::NotFound,
        Err(_) => return Lookup::Unresolvable,
    };
    let what = std::fs::metadata(&canonical).ok().map(|m| {
        if m.is_dir() {
            Found::Dir
        } else if m.is_file() {
            Found::File
        } else {
            Found::Other
        }
    });
    Lookup::Found { canonical, what }
}

/// Whether `dir` (canonical) lies in a session's own worktree, wherever that lies (not only
/// under the worktrees directory of this process's settings: a relay's, or an earlier
/// `--worktrees`, may differ from the one its owner made it under): `dir` or one of its
/// ancestors holds a `.git` file (a linked worktree) naming a git directory whose `HEAD` is on
/// one of this server's branches ([`crate::security::worktree::is_session_head`]). A
/// session's commands cannot change that `HEAD`: it lies in the repository's own `.git`,
/// outside the worktree.
pub fn in_session_worktree(dir: &Path) -> bool {
    dir.ancestors().any(|top| {
        let Ok(link) = std::fs::read_to_string(top.join(".git")) else {
            return false;
        };
        let Some(gitdir) = link.trim_end().strip_prefix("gitdir: ") else {
            return false;
        };
        std::fs::read_to_string(top.join(gitdir).join("HEAD"))
            .is_ok_and(|head| crate::security::worktree::is_session_head(&head))
    })
}

/// Repeat the confinement check on an already resolved path, right before spawning: the path
/// must still resolve to itself, of the same kind, inside the same container.
pub fn recheck(c: &Confined) -> Result<()> {
    let raw = c
        .path()
        .to_str()
        .ok_or_else(|| InvalidArgument::new(c.field(), "is not valid UTF-8"))?;
    let again = resolve(
        c.field(),
        raw,
        Path::new("/"),
        &[c.within().to_path_buf()],
        c.kind(),
    )?;
    if again.path() != c.path() {
        return Err(InvalidArgument::new(
            c.field(),
            "changed while the request was being prepared",
        ));
    }
    Ok(())
}

/// `files` with what the filesystem says now: each one's path with every symlink resolved (for
/// one that does not exist yet, its nearest existing ancestor resolved and the rest appended).
pub fn resolve_own(files: &[OwnFile]) -> Vec<OwnFile> {
    files
        .iter()
        .map(|f| OwnFile {
            resolved: resolved_or_ancestor(&f.path),
            ..f.clone()
        })
        .collect()
}

/// `path` canonical, or its nearest existing ancestor canonical with the rest appended.
fn resolved_or_ancestor(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(c, |p: PathBuf, n| p.join(n)));
        }
        rest.push(at.file_name()?.to_os_string());
        at = at.parent()?;
    }
}

/// Refuse a writable turn in `cwd` when it holds one of the bridge's own files (see
/// [`paths::check_own_files`]), with what the filesystem says of them right now.
pub fn check_own_files(cwd: &Confined, writable: bool, files: &[&[OwnFile]]) -> Result<()> {
    if !writable {
        return Ok(());
    }
    let own: Vec<OwnFile> = files.iter().flat_map(|f| resolve_own(f)).collect();
    paths::check_own_files(cwd.field(), cwd.path(), writable, &own)?;
    // codex's workspace-write also makes its temporary directory writable (codex is given no
    // TMPDIR: the environment allowlist does not pass one), wherever the turn runs
    let temp = Path::new(CODEX_TEMP_DIR);
    let temp = temp.canonicalize().unwrap_or_else(|_| temp.to_path_buf());
    paths::check_own_files_in_temp(&temp, writable, &own)
}

/// The temporary directory a workspace-write turn of codex may write.
pub const CODEX_TEMP_DIR: &str = "/tmp";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_worktree_is_known_by_its_head_wherever_it_lies() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        // a linked worktree (a `.git` file) anywhere, not under any worktrees directory
        let linked = |name: &str, head: &str| {
            let wt = base.join(name);
            let gitdir = base.join("repo.git/worktrees").join(name);
            std::fs::create_dir_all(wt.join("deep/er")).unwrap();
            std::fs::create_dir_all(&gitdir).unwrap();
            std::fs::write(gitdir.join("HEAD"), head).unwrap();
            std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
            wt
        };
        let session = linked("s1", "ref: refs/heads/codex-bridge/s1\n");
        assert!(in_session_worktree(&session));
        assert!(in_session_worktree(&session.join("deep/er")));
        // a relative gitdir too
        std::fs::write(session.join(".git"), "gitdir: ../repo.git/worktrees/s1\n").unwrap();
        assert!(in_session_worktree(&session.join("deep")));
        // a person's own linked worktree, a detached one, and no worktree at all
        let own = linked("mine", "ref: refs/heads/feature\n");
        assert!(!in_session_worktree(&own.join("deep")));
        let detached = linked("det", "0123456789abcdef0123456789abcdef01234567\n");
        assert!(!in_session_worktree(&detached));
        assert!(!in_session_worktree(&base));
    }

    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap().join("root");
        let outside = t.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(root.join("repo/src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("repo/src/lib.rs"), "fn main() {}").unwrap();
        std::fs::write(outside.join("secret.txt"), "TOP SECRET CONTENT").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("repo/escape")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("repo/link.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("repo/src/lib.rs"), root.join("repo/ok.rs")).unwrap();
        (t, root, outside)
    }

    #[test]
    fn working_directories_must_resolve_inside_a_root() {
        let (_t, root, outside) = tree();
        let roots = vec![root.clone()];
        let ok = resolve("workingDirectory", "repo", &root, &roots, Kind::Dir).unwrap();
        assert_eq!(ok.path(), root.join("repo"));
        for (raw, why) in [
            (
                "repo/escape",
                "outside the allowed roots (after following symlinks)",
            ),
            (outside.to_str().unwrap(), "outside the allowed roots"),
            ("repo/../../outside", "outside the allowed roots"),
            ("missing", "does not exist"),
            ("repo/src/lib.rs", "is not a directory"),
        ] {
            let err = resolve("workingDirectory", raw, &root, &roots, Kind::Dir)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("`workingDirectory`") && err.contains(why),
                "{raw}: {err}"
            );
        }
    }

    #[test]
    fn files_must_resolve_inside_the_working_directory_and_never_echo_contents() {
        let (_t, root, _outside) = tree();
        let wd = vec![root.join("repo")];
        let base = root.join("repo");
        let ok = resolve("files[0]", "ok.rs", &base, &wd, Kind::File).unwrap();
        assert_eq!(ok.path(), root.join("repo/src/lib.rs"));
        for raw in [
            "link.txt",
            "escape/secret.txt",
            "../../outside/secret.txt",
            "src",
            "nope",
        ] {
            let err = resolve("files[0]", raw, &base, &wd, Kind::File)
                .unwrap_err()
                .to_string();
            assert!(err.contains("`files[0]`"), "{raw}: {err}");
            assert!(!err.contains("TOP SECRET"), "{err}");
        }
    }

    #[test]
    fn recheck_catches_a_path_swapped_for_a_symlink() {
        let (_t, root, outside) = tree();
        let roots = vec![root.clone()];
        std::fs::create_dir(root.join("swap")).unwrap();
        let c = resolve("workingDirectory", "swap", &root, &roots, Kind::Dir).unwrap();
        assert!(recheck(&c).is_ok());
        std::fs::remove_dir(root.join("swap")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("swap")).unwrap();
        assert!(recheck(&c).is_err());
    }

    /// Found by fuzzing: a clean name that is a symlink to a name with a control character
    /// was accepted, then refused by `recheck` right before the spawn.
    #[test]
    fn a_symlink_to_a_name_with_a_control_character_is_refused_at_once() {
        let (_t, root, _outside) = tree();
        let roots = vec![root.clone()];
        std::fs::write(root.join("bad\u{c}name"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("bad\u{c}name"), root.join("clean")).unwrap();
        let err = resolve("files[0]", "clean", &root, &roots, Kind::File)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`files[0]`") && err.contains("control"),
            "{err}"
        );
        std::fs::create_dir(root.join("dir\u{7}")).unwrap();
        std::os::unix::fs::symlink(root.join("dir\u{7}"), root.join("cleandir")).unwrap();
        assert!(resolve("workingDirectory", "cleandir", &root, &roots, Kind::Dir).is_err());
    }

    #[test]
    fn a_path_that_cannot_be_resolved_is_not_reported_missing() {
        let (_t, root, _outside) = tree();
        let wd = vec![root.join("repo")];
        let err = resolve(
            "files[0]",
            "src/lib.rs/x",
            &root.join("repo"),
            &wd,
            Kind::File,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("cannot be resolved"), "{err}");
    }

    #[test]
    fn an_image_whose_real_path_has_a_comma_is_refused() {
        let (_t, root, _outside) = tree();
        let repo = root.join("repo");
        std::fs::write(repo.join("a,b.png"), "png").unwrap();
        std::os::unix::fs::symlink(repo.join("a,b.png"), repo.join("pic.png")).unwrap();
        let wd = vec![repo.clone()];
        let err = resolve("files[0]", "pic.png", &repo, &wd, Kind::Image)
            .unwrap_err()
            .to_string();
        assert!(err.contains("','"), "{err}");
        // the same file as a text attachment is fine: only codex's `-i` splits on commas
        let ok = resolve("files[0]", "pic.png", &repo, &wd, Kind::File).unwrap();
        assert_eq!(ok.path(), repo.join("a,b.png"));
    }
}
