//! What the git runner reads and answers, as data: its errors, a repository, a worktree's
//! changes (the patch applied, the text shown, each file's status and lines), and the pure
//! rules that read them from git's output (a patch cut at each file, binary by content, lines
//! counted from the text patch, `--numstat`/`--name-status` parsed). No IO.

use std::path::PathBuf;

/// What went wrong running git.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started (not installed, not executable, out of processes).
    #[error("could not start git ({program}): {message}")]
    Start { program: String, message: String },

    /// The directory given is not inside a git repository's working tree.
    #[error("`{field}`: {path} is not inside a git repository's working tree")]
    NotARepository { field: &'static str, path: String },

    /// A ref that names no commit of the repository.
    #[error("`{field}`: `{rev}` names no commit of the repository")]
    UnknownRevision { field: &'static str, rev: String },

    /// git exited with an error.
    #[error("git {what} failed ({status}): {stderr}")]
    Failed {
        what: &'static str,
        status: String,
        stderr: String,
    },

    /// git ran past its time limit; it and its process group were killed.
    #[error("git {what} did not finish within {secs}s and was stopped")]
    TimedOut { what: &'static str, secs: u64 },

    /// The changes are larger than this server reads.
    #[error("the changes are larger than {max} bytes as a patch: show or apply them with git")]
    TooLarge { max: usize },

    /// git printed something this module does not read as it expects (a bug, or a git
    /// whose output changed).
    #[error("git {what} printed output this server does not understand: {detail}")]
    Unexpected { what: &'static str, detail: String },

    /// A file of the server's own (the scratch index) could not be written or read.
    #[error("could not {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

pub(super) type Result<T, E = GitError> = std::result::Result<T, E>;

/// A repository, as git reports it for a directory inside its working tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The top of the working tree holding the directory (the checkout).
    pub toplevel: PathBuf,
    /// The git directory every worktree of the repository shares: what its lock is keyed by.
    pub common_dir: PathBuf,
}

/// How one file differs from the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    /// A type change (a file that became a link, ...).
    TypeChanged,
}

/// One file of a worktree's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the top of the worktree, `/`-separated, as git names it.
    pub path: String,
    pub status: FileStatus,
    /// Lines added and removed; `None` for a binary file.
    pub lines: Option<(u64, u64)>,
}

/// A worktree's changes against its base: tracked, untracked (not ignored) and deleted files.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// The files, in git's order (by path).
    pub files: Vec<FileChange>,
    /// `git diff --binary` of them: a patch `git apply` takes, binary files included.
    pub patch: Vec<u8>,
    /// `git diff --text` of them, what a person is shown: every file as text whatever the
    /// repository's attributes say (a `.gitattributes` of the session's own with `* -diff`
    /// made every file "binary", its content hidden from the diff while the apply landed it);
    /// a file is binary by its content (a NUL byte, or not UTF-8), and only then not shown.
    pub shown: Vec<u8>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The patch cut into one piece per file, in the order of [`Changes::files`].
    pub fn per_file(&self) -> Vec<&[u8]> {
        split_patch(&self.patch)
    }

    /// [`Changes::shown`] cut into one piece per file, in the order of [`Changes::files`].
    pub fn shown_per_file(&self) -> Vec<&[u8]> {
        split_patch(&self.shown)
    }
}

/// What an apply did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Every change landed: the files written, in order.
    Landed(Vec<String>),
    /// Nothing landed: these files conflict (the checkout changed them since the base, or a
    /// file to be created is already there, or git refuses the file's change).
    Refused(Vec<String>),
}

/// What removing a worktree found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// It was there and was removed.
    Removed,
    /// Its directory was already gone (removed by hand): git's record of it was pruned.
    WasGone,
}

/// Whether a file's part of a `--text` patch is binary by its content: a NUL byte, or bytes
/// that are not UTF-8.
pub fn is_binary(part: &[u8]) -> bool {
    part.contains(&0) || std::str::from_utf8(part).is_err()
}

pub(super) fn one_part_per_file() -> GitError {
    GitError::Unexpected {
        what: "diff",
        detail: "the patch does not hold one part per file".into(),
    }
}

/// Each file's lines counted from its part of the text patch `shown`, `None` for a file binary
/// by its content: the repository's attributes decide nothing a person is shown (numstat says
/// `-` for a `-diff` file).
pub(super) fn count_as_shown(files: &mut [FileChange], shown: &[u8]) -> Result<()> {
    let parts = split_patch(shown);
    if parts.len() != files.len() {
        return Err(one_part_per_file());
    }
    for (file, part) in files.iter_mut().zip(parts) {
        file.lines = (!is_binary(part)).then(|| counted(part));
    }
    Ok(())
}

/// Lines added and removed in one file's part of a text patch.
pub(super) fn counted(part: &[u8]) -> (u64, u64) {
    let mut in_hunks = false;
    let (mut added, mut removed) = (0, 0);
    for line in part.split(|b| *b == b'\n') {
        if line.starts_with(b"@@") {
            in_hunks = true;
        } else if in_hunks && line.starts_with(b"+") {
            added += 1;
        } else if in_hunks && line.starts_with(b"-") {
            removed += 1;
        }
    }
    (added, removed)
}

/// Cut a patch made by [`Git::changes`] at each `diff --git ` line. No line of a hunk starts
/// so (each starts with ` `, `+`, `-`, `\` or `@`), nor a line of a binary patch (base85 has
/// no space).
pub(super) fn split_patch(patch: &[u8]) -> Vec<&[u8]> {
    const HEAD: &[u8] = b"diff --git ";
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    while at < patch.len() {
        if patch[at..].starts_with(HEAD) {
            starts.push(at);
        }
        match patch[at..].iter().position(|b| *b == b'\n') {
            Some(nl) => at += nl + 1,
            None => break,
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, s)| &patch[*s..starts.get(i + 1).copied().unwrap_or(patch.len())])
        .collect()
}

/// Parse `--numstat -z` and `--name-status -z` of the same diff into files.
pub(super) fn parse_changes(numstat: &[u8], status: &[u8]) -> Result<Vec<FileChange>> {
    let bad = |detail: &str| GitError::Unexpected {
        what: "diff",
        detail: detail.to_owned(),
    };
    // --name-status -z: STATUS NUL PATH NUL ...
    let mut fields = status.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut files = Vec::new();
    while let Some(st) = fields.next() {
        let path = fields
            .next()
            .ok_or_else(|| bad("a status without a path"))?;
        let status = match st.first() {
            Some(b'A') => FileStatus::Added,
            Some(b'M') => FileStatus::Modified,
            Some(b'D') => FileStatus::Deleted,
            Some(b'T') => FileStatus::TypeChanged,
            _ => return Err(bad("an unknown file status")),
        };
        files.push(FileChange {
            path: String::from_utf8_lossy(path).into_owned(),
            status,
            lines: None,
        });
    }
    // --numstat -z: ADDED TAB REMOVED TAB PATH NUL ("-" for a binary file)
    let stats: Vec<&[u8]> = numstat
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .collect();
    if stats.len() != files.len() {
        return Err(bad("numstat and name-status disagree"));
    }
    for (file, line) in files.iter_mut().zip(stats) {
        let line = String::from_utf8_lossy(line);
        let mut parts = line.splitn(3, '\t');
        let (a, r) = (parts.next(), parts.next());
        if parts.next() != Some(file.path.as_str()) {
            return Err(bad("numstat and name-status disagree"));
        }
        file.lines = match (
            a.and_then(|a| a.parse().ok()),
            r.and_then(|r| r.parse().ok()),
        ) {
            (Some(a), Some(r)) => Some((a, r)),
            _ => None,
        };
    }
    Ok(files)
}
