//! Path confinement: a working directory must resolve inside an allowed root, and attached
//! files and images inside the working directory, after following every symlink.
//!
//! Two parts: pure lexical checks ([`check_lexical`], [`normalize`], [`parse_file_ref`]), unit
//! tested without a filesystem, and [`resolve`], the one IO function, which is also called
//! again right before a spawn ([`recheck`]) so a path swapped in between is caught.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Longest path string we accept (Linux PATH_MAX).
pub const MAX_PATH_LEN: usize = 4096;

/// What kind of filesystem object a path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A file passed to `codex exec -i`: codex splits `-i` values on `,`, so a comma anywhere
    /// in the path could turn one checked path into another, unchecked one.
    Image,
}

/// A path that was resolved and confined; remembers the container it was checked against so
/// [`recheck`] can repeat the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// The canonical absolute path (all symlinks resolved).
    pub path: PathBuf,
    /// The canonical directory it must stay inside.
    pub within: PathBuf,
    /// What it must be.
    pub kind: Kind,
    /// The argument it came from, for errors.
    pub field: String,
}

/// Checks that need no filesystem: not empty, not too long, no NUL or other control character,
/// and for images no comma.
pub fn check_lexical(field: &str, raw: &str, kind: Kind) -> Result<()> {
    if raw.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if raw.len() > MAX_PATH_LEN {
        return Err(Error::invalid(
            field,
            format!("is longer than {MAX_PATH_LEN} bytes"),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(Error::invalid(field, "contains a control character"));
    }
    if kind == Kind::Image && raw.contains(',') {
        return Err(Error::invalid(
            field,
            "image paths must not contain ',' (codex splits image lists on commas)",
        ));
    }
    Ok(())
}

/// Join `raw` onto `base` (when relative) and remove `.` and `..` without touching the
/// filesystem. `None` when `..` would climb above `/`.
pub fn normalize(base: &Path, raw: &str) -> Option<PathBuf> {
    let joined = base.join(raw);
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
        }
    }
    Some(out)
}

/// Is `path` equal to or below `dir`? Component-wise, so `/root2` is not inside `/root`.
pub fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// A `files` entry: a path with an optional `:START-END` (or `:LINE`) line range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    pub path: String,
    pub lines: Option<(usize, usize)>,
}

/// Split `path:start-end` / `path:line`. A suffix that is not a valid range is part of the
/// path (a file may be named `a:b`); a range with start 0 or end < start is refused.
pub fn parse_file_ref(field: &str, raw: &str) -> Result<FileRef> {
    if let Some((path, range)) = raw.rsplit_once(':')
        && !range.is_empty()
        && range.bytes().all(|b| b.is_ascii_digit() || b == b'-')
    {
        let (start, end) = match range.split_once('-') {
            Some((s, e)) => (s, e),
            None => (range, range),
        };
        let parse = |s: &str| s.parse::<usize>().ok();
        let (Some(start), Some(end)) = (parse(start), parse(end)) else {
            return Err(Error::invalid(
                field,
                "line range must be START-END with numbers",
            ));
        };
        if start == 0 || end < start {
            return Err(Error::invalid(
                field,
                "line range must start at 1 and end at or after its start",
            ));
        }
        return Ok(FileRef {
            path: path.to_owned(),
            lines: Some((start, end)),
        });
    }
    Ok(FileRef {
        path: raw.to_owned(),
        lines: None,
    })
}

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
    check_lexical(field, raw, kind)?;
    let Some(lexical) = normalize(base, raw) else {
        return Err(Error::invalid(field, "climbs above the filesystem root"));
    };
    // A lexical escape is refused before the filesystem is asked anything.
    if !containers.iter().any(|c| is_within(&lexical, c)) {
        return Err(Error::invalid(field, outside_reason(kind)));
    }
    let path = match std::fs::canonicalize(&lexical) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::invalid(field, "does not exist"));
        }
        Err(_) => return Err(Error::invalid(field, "cannot be resolved")),
    };
    let Some(within) = containers.iter().find(|c| is_within(&path, c)) else {
        return Err(Error::invalid(
            field,
            format!("{} (after following symlinks)", outside_reason(kind)),
        ));
    };
    let meta = std::fs::metadata(&path).map_err(|_| Error::invalid(field, "cannot be read"))?;
    match kind {
        Kind::Dir if !meta.is_dir() => return Err(Error::invalid(field, "is not a directory")),
        Kind::File | Kind::Image if !meta.is_file() => {
            return Err(Error::invalid(field, "is not a regular file"));
        }
        _ => {}
    }
    if path.to_str().is_none() {
        return Err(Error::invalid(field, "is not valid UTF-8"));
    }
    // the canonical path is what reaches codex (argv, cwd, the projects pin) and what
    // `recheck` resolves again: it must pass the same lexical rules as the caller's text
    // (a symlink can lead to a name with a control character; found by fuzzing)
    check_lexical(field, path.to_str().unwrap_or_default(), kind)?;
    Ok(Confined {
        path,
        within: within.clone(),
        kind,
        field: field.to_owned(),
    })
}

fn outside_reason(kind: Kind) -> &'static str {
    match kind {
        Kind::Dir => "is outside the allowed roots",
        Kind::File | Kind::Image => "is outside the working directory",
    }
}

/// Repeat the confinement check on an already resolved path, right before spawning: the path
/// must still resolve to itself, of the same kind, inside the same container.
pub fn recheck(c: &Confined) -> Result<()> {
    let raw = c
        .path
        .to_str()
        .ok_or_else(|| Error::invalid(&c.field, "is not valid UTF-8"))?;
    let again = resolve(
        &c.field,
        raw,
        Path::new("/"),
        std::slice::from_ref(&c.within),
        c.kind,
    )?;
    if again.path != c.path {
        return Err(Error::invalid(
            &c.field,
            "changed while the request was being prepared",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_removes_dots_and_refuses_climbing_above_root() {
        let base = Path::new("/work/repo");
        assert_eq!(
            normalize(base, "a/./b/../c"),
            Some(PathBuf::from("/work/repo/a/c"))
        );
        assert_eq!(normalize(base, "../../.."), None);
        assert_eq!(
            normalize(base, "/etc/passwd"),
            Some(PathBuf::from("/etc/passwd"))
        );
        assert_eq!(
            normalize(base, "../other"),
            Some(PathBuf::from("/work/other"))
        );
    }

    #[test]
    fn within_is_component_wise() {
        assert!(is_within(Path::new("/root/a"), Path::new("/root")));
        assert!(is_within(Path::new("/root"), Path::new("/root")));
        assert!(!is_within(Path::new("/root2/a"), Path::new("/root")));
    }

    #[test]
    fn lexical_checks_name_the_field() {
        for (raw, kind) in [
            ("", Kind::File),
            ("a\0b", Kind::File),
            ("a\nb", Kind::Dir),
            ("pic.png,../x.png", Kind::Image),
        ] {
            let err = check_lexical("files[0]", raw, kind)
                .unwrap_err()
                .to_string();
            assert!(err.contains("files[0]"), "{err}");
        }
        assert!(check_lexical("files[0]", "a,b.txt", Kind::File).is_ok());
        assert!(check_lexical("x", &"a".repeat(MAX_PATH_LEN + 1), Kind::File).is_err());
    }

    #[test]
    fn file_refs_split_line_ranges() {
        let r = parse_file_ref("files[0]", "src/lib.rs:10-20").unwrap();
        assert_eq!((r.path.as_str(), r.lines), ("src/lib.rs", Some((10, 20))));
        let r = parse_file_ref("files[0]", "src/lib.rs:7").unwrap();
        assert_eq!(r.lines, Some((7, 7)));
        let r = parse_file_ref("files[0]", "a:b").unwrap();
        assert_eq!((r.path.as_str(), r.lines), ("a:b", None));
        assert!(parse_file_ref("files[0]", "a:0-3").is_err());
        assert!(parse_file_ref("files[0]", "a:5-3").is_err());
        assert!(parse_file_ref("files[0]", "a:1-2-3").is_err());
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
        assert_eq!(ok.path, root.join("repo"));
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
        assert_eq!(ok.path, root.join("repo/src/lib.rs"));
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

    // Found by mutation testing (scripts/mutants.sh; benches/README.md, "Mutation testing").

    #[test]
    fn path_length_limit_is_inclusive() {
        let longest = "a".repeat(MAX_PATH_LEN);
        assert!(check_lexical("files[0]", &longest, Kind::File).is_ok());
        let err = check_lexical("files[0]", &format!("{longest}a"), Kind::File)
            .unwrap_err()
            .to_string();
        assert!(err.contains("longer than"), "{err}");
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
        assert_eq!(ok.path, repo.join("a,b.png"));
    }
}
