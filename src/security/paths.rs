//! Path confinement: a working directory must resolve inside an allowed root, and attached
//! files and images inside the working directory, after following every symlink.
//!
//! Pure: lexical checks ([`check_lexical`], [`normalize`], [`parse_file_ref`]) and the
//! confinement rules a path must pass ([`confine`]) given what the filesystem answered for it.
//! The filesystem is asked by [`crate::confine`] (the IO half: `resolve`, and `recheck` right
//! before a spawn, so a path swapped in between is caught), the only caller of [`confine`]
//! outside tests: a [`Confined`] has private fields, so holding one proves the checks passed.

use std::path::{Component, Path, PathBuf};

use crate::invalid::InvalidArgument;

/// This module's refusals name the argument and the reason.
type Result<T, E = InvalidArgument> = std::result::Result<T, E>;

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
/// `crate::confine::recheck` can repeat the check. Built only by [`confine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// The canonical absolute path (all symlinks resolved).
    path: PathBuf,
    /// The canonical directory it must stay inside.
    within: PathBuf,
    /// What it must be.
    kind: Kind,
    /// The argument it came from, for errors.
    field: String,
}

impl Confined {
    /// The canonical absolute path (all symlinks resolved, valid UTF-8).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The canonical directory it must stay inside.
    pub fn within(&self) -> &Path {
        &self.within
    }

    /// What it must be.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The argument it came from, for errors.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// A `Confined` that passed no check, for unit tests of its users and the argv fuzz target
    /// only: it exists in no build but `cargo test` and cargo-fuzz's (`--cfg fuzzing`).
    #[cfg(any(test, fuzzing))]
    #[doc(hidden)]
    pub fn unchecked(path: &str, within: &str, kind: Kind, field: &str) -> Confined {
        Confined {
            path: path.into(),
            within: within.into(),
            kind,
            field: field.into(),
        }
    }
}

/// What the filesystem answered for a path, as [`confine`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// No such path.
    NotFound,
    /// It could not be canonicalized for another reason.
    Unresolvable,
    /// Its canonical path, and what is there (`None`: its metadata could not be read).
    Found {
        canonical: PathBuf,
        what: Option<Found>,
    },
}

/// What a canonical path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Dir,
    File,
    Other,
}

/// Checks that need no filesystem: not empty, not too long, no NUL or other control character,
/// and for images no comma.
pub fn check_lexical(field: &str, raw: &str, kind: Kind) -> Result<()> {
    if raw.is_empty() {
        return Err(InvalidArgument::new(field, "must not be empty"));
    }
    if raw.len() > MAX_PATH_LEN {
        return Err(InvalidArgument::new(
            field,
            format!("is longer than {MAX_PATH_LEN} bytes"),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(InvalidArgument::new(field, "contains a control character"));
    }
    if kind == Kind::Image && raw.contains(',') {
        return Err(InvalidArgument::new(
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
            return Err(InvalidArgument::new(
                field,
                "line range must be START-END with numbers",
            ));
        };
        if start == 0 || end < start {
            return Err(InvalidArgument::new(
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

/// Confine `raw` (relative to `base` when not absolute) inside one of `containers` (already
/// canonical), following every symlink: `look` is asked for the filesystem's answer on the
/// lexically normalized path, only once that path is inside a container. Errors name `field`
/// and the reason and never include file contents.
pub(crate) fn confine(
    field: &str,
    raw: &str,
    base: &Path,
    containers: &[PathBuf],
    kind: Kind,
    look: impl FnOnce(&Path) -> Lookup,
) -> Result<Confined> {
    check_lexical(field, raw, kind)?;
    let Some(lexical) = normalize(base, raw) else {
        return Err(InvalidArgument::new(
            field,
            "climbs above the filesystem root",
        ));
    };
    // A lexical escape is refused before the filesystem is asked anything.
    if !containers.iter().any(|c| is_within(&lexical, c)) {
        return Err(InvalidArgument::new(field, outside_reason(kind)));
    }
    let (path, what) = match look(&lexical) {
        Lookup::Found { canonical, what } => (canonical, what),
        Lookup::NotFound => return Err(InvalidArgument::new(field, "does not exist")),
        Lookup::Unresolvable => return Err(InvalidArgument::new(field, "cannot be resolved")),
    };
    let Some(within) = containers.iter().find(|c| is_within(&path, c)) else {
        return Err(InvalidArgument::new(
            field,
            format!("{} (after following symlinks)", outside_reason(kind)),
        ));
    };
    let what = what.ok_or_else(|| InvalidArgument::new(field, "cannot be read"))?;
    match kind {
        Kind::Dir if what != Found::Dir => {
            return Err(InvalidArgument::new(field, "is not a directory"));
        }
        Kind::File | Kind::Image if what != Found::File => {
            return Err(InvalidArgument::new(field, "is not a regular file"));
        }
        _ => {}
    }
    if path.to_str().is_none() {
        return Err(InvalidArgument::new(field, "is not valid UTF-8"));
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

/// Which of the bridge's own files a path is: what a turn that could write it could take over
/// (the next start runs the codex binary the config file names, with the settings it sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnKind {
    /// The config file named by `--config`/`CODEX_BRIDGE_CONFIG`, or the default location
    /// (absent or not).
    ConfigFile,
    /// The store directory (sessions, the owner's socket).
    Store,
    /// The codex binary the bridge runs.
    CodexBin,
}

impl OwnKind {
    /// The file and the setting that names it, for errors and `doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            OwnKind::ConfigFile => "config file (CODEX_BRIDGE_CONFIG, --config)",
            OwnKind::Store => "store directory (CODEX_BRIDGE_STORE, --store)",
            OwnKind::CodexBin => "codex binary (CODEX_BIN, --codex-bin)",
        }
    }
}

/// One of the bridge's own files: its absolute path as configured (normalized, symlinks kept)
/// and, once the filesystem was asked, the same path with every symlink resolved (for a path
/// that does not exist yet: its nearest existing ancestor resolved, the rest appended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnFile {
    pub kind: OwnKind,
    pub path: PathBuf,
    pub resolved: Option<PathBuf>,
}

impl OwnFile {
    /// Whether `dir` (canonical) holds this file, or lies inside it (the store is a
    /// directory): as configured, so that a symlink on its way that lies inside `dir` counts
    /// (a turn could swap it), and as resolved.
    pub fn overlaps(&self, dir: &Path) -> bool {
        let overlaps = |p: &Path| is_within(p, dir) || is_within(dir, p);
        overlaps(&self.path) || self.resolved.as_deref().is_some_and(overlaps)
    }
}

/// The bridge's own files are never inside a working directory a turn may write: a writable
/// turn (`writable`: workspace-write or danger-full-access) whose working directory `cwd`
/// (canonical) holds one of `own` is refused, naming `field`, the file and its setting. A
/// read-only turn may run there: its sandbox cannot write.
pub fn check_own_files(field: &str, cwd: &Path, writable: bool, own: &[OwnFile]) -> Result<()> {
    if !writable {
        return Ok(());
    }
    let held = held_in(cwd, own);
    if held.is_empty() {
        return Ok(());
    }
    Err(InvalidArgument::new(
        field,
        format!(
            "{} holds the bridge's own {}: a turn that may write there could change what the \
             bridge runs; use sandbox read-only there, or a working directory that does not \
             contain it",
            cwd.display(),
            held.join(" and ")
        ),
    ))
}

/// The own files `dir` holds (or lies inside), each named once with what it is.
fn held_in(dir: &Path, own: &[OwnFile]) -> Vec<String> {
    let mut held: Vec<String> = Vec::new();
    for f in own.iter().filter(|f| f.overlaps(dir)) {
        let named = format!("{} {}", f.kind.describe(), f.path.display());
        if !held.contains(&named) {
            held.push(named);
        }
    }
    held
}

/// Codex lets a workspace-write turn write its temporary directory (`/tmp`) wherever the turn
/// runs: a writable turn is refused, naming `sandbox`, while `temp` (canonical) holds one of
/// the bridge's own files.
pub fn check_own_files_in_temp(temp: &Path, writable: bool, own: &[OwnFile]) -> Result<()> {
    let held = if writable {
        held_in(temp, own)
    } else {
        Vec::new()
    };
    if held.is_empty() {
        return Ok(());
    }
    Err(InvalidArgument::new(
        "sandbox",
        format!(
            "{} holds the bridge's own {}, and codex lets a writable turn write {} wherever it \
             runs: use sandbox read-only, or move it out of {}",
            temp.display(),
            held.join(" and "),
            temp.display(),
            temp.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_turn_is_refused_while_the_temporary_directory_holds_an_own_file() {
        let store = OwnFile {
            kind: OwnKind::Store,
            path: "/tmp/cmb/store".into(),
            resolved: None,
        };
        let err = check_own_files_in_temp(Path::new("/tmp"), true, std::slice::from_ref(&store))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`sandbox`") && err.contains("/tmp/cmb/store"),
            "{err}"
        );
        assert!(
            check_own_files_in_temp(Path::new("/tmp"), false, std::slice::from_ref(&store)).is_ok()
        );
        let elsewhere = OwnFile {
            path: "/home/u/.local/share/cmb".into(),
            ..store
        };
        assert!(check_own_files_in_temp(Path::new("/tmp"), true, &[elsewhere]).is_ok());
    }

    fn own(kind: OwnKind, path: &str, resolved: Option<&str>) -> OwnFile {
        OwnFile {
            kind,
            path: path.into(),
            resolved: resolved.map(PathBuf::from),
        }
    }

    #[test]
    fn a_writable_turn_never_runs_where_the_bridges_own_files_are() {
        let files = [
            own(OwnKind::ConfigFile, "/h/.config/cmb/config.toml", None),
            own(OwnKind::Store, "/h/.local/share/cmb", Some("/data/store")),
            own(
                OwnKind::CodexBin,
                "/usr/bin/codex",
                Some("/opt/codex/bin/codex"),
            ),
        ];
        for (cwd, what) in [
            ("/h", "config file"),
            ("/h/.config", "config file"),
            ("/h/.local/share/cmb/sub", "store directory"),
            ("/data", "store directory"),
            ("/opt/codex", "codex binary"),
            ("/", "config file"),
        ] {
            let err = check_own_files("workingDirectory", Path::new(cwd), true, &files)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("`workingDirectory`") && err.contains(what),
                "{cwd}: {err}"
            );
            // read-only turns may run there
            assert!(check_own_files("workingDirectory", Path::new(cwd), false, &files).is_ok());
        }
        for cwd in ["/h/proj", "/h/.config2", "/data2", "/opt/codex2"] {
            assert!(
                check_own_files("workingDirectory", Path::new(cwd), true, &files).is_ok(),
                "{cwd}"
            );
        }
    }

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
}
