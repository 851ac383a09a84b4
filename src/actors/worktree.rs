//! A session's own git worktree (issue 44): made for a new session that asks for one, its
//! changes read (as the session tools show them, as a diff), applied onto the checkout it came
//! from, and removed with its branch when the session closes. The git it runs is
//! [`crate::codex::process::git`]'s (no program a repository configures runs); where the
//! worktree goes and its branch are [`crate::security::worktree`]'s pure rules. The record's
//! `worktree` is written by the session actor alone (made in `prepare`, dropped in `close`);
//! the reads and the apply here only read it.

use std::path::{Path, PathBuf};

use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::calls::{ApplyOutcome, ChangedFile, SessionDiff, WorktreeView};
use crate::codex::process::git::{Applied, Changes, FileStatus, Git, Repo};
use crate::error::{Error, Result};
use crate::security::ids::SessionId;
use crate::security::paths::{Confined, Kind};
use crate::security::worktree::{branch_for, check_worktree_path, path_for};
use crate::store::{SessionRecord, WorktreeRecord};

/// The field every refusal about a session's worktree names.
const FIELD: &str = "worktree";

/// The server's git, or a refusal naming `worktree` when it has none.
fn git(shared: &Shared) -> Result<&Git> {
    shared.git.as_ref().ok_or_else(|| {
        Error::invalid(
            FIELD,
            "the server found no `git` on its PATH; a session cannot have its own worktree",
        )
    })
}

/// A worktree as the session tools show it without reading its changes.
pub(crate) fn view_of(wt: &WorktreeRecord) -> WorktreeView {
    WorktreeView {
        path: wt.path.display().to_string(),
        branch: wt.branch.clone(),
        base_commit: wt.base_commit.clone(),
        origin: wt.origin.display().to_string(),
        gone: !wt.path.is_dir(),
        files: None,
        error: None,
    }
}

/// A new session's worktree, made: the working directory the session works in (the
/// worktree's directory that corresponds to the one it was started in) and the record of it.
pub(crate) struct Made {
    pub(crate) cwd: Confined,
    pub(crate) record: WorktreeRecord,
}

/// Make session `id`'s worktree of the repository holding `cwd`, at `base` (a ref; `None`:
/// `HEAD`), where the operator's setting puts it, on its own branch. Nothing of it is left
/// behind when this fails.
pub(crate) async fn create(
    shared: &Shared,
    client: &ClientContext,
    id: &SessionId,
    cwd: &Confined,
    base: Option<&str>,
) -> Result<Made> {
    let git = git(shared)?;
    if let Some(b) = base {
        crate::security::ids::validate_git_ref("base", b)?;
    }
    let repo = git.discover(FIELD, cwd.path()).await?;
    let base = git
        .resolve_commit("base", &repo, base.unwrap_or("HEAD"))
        .await?;
    let (path, branch) = new_place(shared, client, &repo, id)?;
    git.add_worktree(&repo, &path, &branch, &base).await?;
    let record = WorktreeRecord {
        path: path.clone(),
        branch,
        base_commit: base,
        origin: repo.toplevel.clone(),
    };
    let rel = cwd
        .path()
        .strip_prefix(&repo.toplevel)
        .unwrap_or(Path::new(""));
    match confine_in(&path, rel) {
        Ok(cwd) => Ok(Made { cwd, record }),
        Err(e) => {
            discard(shared, &record).await;
            Err(e)
        }
    }
}

/// A worktree for `id`, the fork of a session whose worktree is `parent`: at the parent's
/// base, on its own branch, holding the parent's changes (applied with the same rules as onto
/// a checkout); the directory that corresponds to the parent's `cwd`. Nothing of it is left
/// behind when this fails.
pub(crate) async fn fork(
    shared: &Shared,
    client: &ClientContext,
    parent: &WorktreeRecord,
    id: &SessionId,
    cwd: &Confined,
) -> Result<Made> {
    let git = git(shared)?;
    let repo = origin(git, parent).await?;
    let (path, branch) = new_place(shared, client, &repo, id)?;
    git.add_worktree(&repo, &path, &branch, &parent.base_commit)
        .await?;
    let record = WorktreeRecord {
        path: path.clone(),
        branch,
        base_commit: parent.base_commit.clone(),
        origin: parent.origin.clone(),
    };
    let copied = async {
        let changes = git
            .changes(&repo, &parent.path, &parent.base_commit)
            .await?;
        let here = Repo {
            toplevel: path.clone(),
            common_dir: repo.common_dir.clone(),
        };
        if let Applied::Refused(files) = git.apply(&here, &parent.base_commit, &changes).await? {
            return Err(Error::SessionFailed(format!(
                "the parent's changes did not apply to the fork's worktree: {}",
                files.join(", ")
            )));
        }
        let rel = cwd
            .path()
            .strip_prefix(&parent.path)
            .unwrap_or(Path::new(""));
        confine_in(&path, rel)
    };
    match copied.await {
        Ok(cwd) => Ok(Made { cwd, record }),
        Err(e) => {
            discard(shared, &record).await;
            Err(e)
        }
    }
}

/// Where session `id`'s worktree of `repo` goes, checked (see the module doc), and its branch.
fn new_place(
    shared: &Shared,
    client: &ClientContext,
    repo: &Repo,
    id: &SessionId,
) -> Result<(PathBuf, String)> {
    let place = place(&shared.config.worktrees_dir)?;
    let path = path_for(&place, &repo.toplevel, id);
    let config = &shared.config;
    let keep_out: Vec<(&str, &Path)> = vec![
        ("the repository's working tree", repo.toplevel.as_path()),
        ("the store", config.store_dir.as_path()),
    ];
    let keep_clear: Vec<(&str, &Path)> = config
        .own_files
        .iter()
        .chain(client.config.own_files.iter())
        .map(|f| ("the server's own files", f.path.as_path()))
        .collect();
    check_worktree_path(FIELD, &path, &keep_out, &keep_clear)?;
    if path.symlink_metadata().is_ok() {
        return Err(Error::invalid(
            FIELD,
            format!(
                "{} is already there: a worktree of this session's id was left behind; remove \
                 it (`git worktree remove`) or use another sessionId",
                path.display()
            ),
        ));
    }
    Ok((path, branch_for(id)))
}

/// The directory `rel` of the worktree at `path`, confined to it.
fn confine_in(path: &Path, rel: &Path) -> Result<Confined> {
    Ok(crate::confine::resolve(
        "workingDirectory",
        &path.join(rel).to_string_lossy(),
        Path::new("/"),
        &[path.to_path_buf()],
        Kind::Dir,
    )?)
}

/// When `rec`'s worktree is gone (removed by hand): git's record of it pruned, its branch
/// deleted, and the record stored without it (saying so in `last_error`); whether it was.
/// Not flushed.
pub(crate) async fn forget_if_gone(shared: &Shared, rec: &mut SessionRecord) -> bool {
    let Some(wt) = rec.worktree.clone().filter(|wt| !wt.path.is_dir()) else {
        return false;
    };
    discard(shared, &wt).await;
    rec.worktree = None;
    rec.last_error = Some(format!(
        "its worktree {} was removed by hand; the session's changes there are gone",
        wt.path.display()
    ));
    if let Err(e) = shared.store.put(rec) {
        tracing::error!(error = %e, "could not store a session whose worktree is gone");
    }
    true
}

/// At the start, before any session actor lives: every stored session whose worktree is gone
/// no longer points at it ([`forget_if_gone`]; the store's index of worktree sessions, no
/// full scan).
pub(crate) async fn sweep_gone(shared: &Shared) -> Result<()> {
    let mut forgotten = 0usize;
    for id in shared.store.worktree_sessions()? {
        if let Some(mut rec) = shared.store.get(&id)?
            && forget_if_gone(shared, &mut rec).await
        {
            tracing::warn!(session = %id, "a session's worktree was removed by hand");
            forgotten += 1;
        }
    }
    if forgotten > 0 {
        shared.store.flush().await?;
    }
    Ok(())
}

/// The operator's place for worktrees, made (0700) when missing, canonical.
fn place(dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let io = |source| Error::Io {
        doing: "creating the worktrees directory",
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    std::fs::canonicalize(dir).map_err(io)
}

/// Remove a worktree and its branch, best effort (a failure is logged): what a failed start
/// leaves must not stay.
pub(crate) async fn discard(shared: &Shared, wt: &WorktreeRecord) {
    if let Err(e) = remove(shared, wt).await {
        tracing::warn!(path = %wt.path.display(), error = %e, "could not remove a worktree");
    }
}

/// Remove a worktree (its changes with it: the caller decided) and its branch; `true` when its
/// directory was already gone.
pub(crate) async fn remove(shared: &Shared, wt: &WorktreeRecord) -> Result<bool> {
    let git = git(shared)?;
    let repo = origin(git, wt).await?;
    let removed = git.remove_worktree(&repo, &wt.path, &wt.branch).await?;
    Ok(removed == crate::codex::process::git::Removed::WasGone)
}

/// The repository of the checkout a worktree came from.
async fn origin(git: &Git, wt: &WorktreeRecord) -> Result<Repo> {
    Ok(git.discover(FIELD, &wt.origin).await?)
}

/// A worktree's changes against its base; `None` when its directory is gone.
async fn changes(shared: &Shared, wt: &WorktreeRecord) -> Result<Option<(Repo, Changes)>> {
    if !wt.path.is_dir() {
        return Ok(None);
    }
    let git = git(shared)?;
    let repo = origin(git, wt).await?;
    let changes = git.changes(&repo, &wt.path, &wt.base_commit).await?;
    Ok(Some((repo, changes)))
}

fn changed_files(c: &Changes) -> Vec<ChangedFile> {
    c.files
        .iter()
        .map(|f| ChangedFile {
            path: f.path.clone(),
            status: match f.status {
                FileStatus::Added => "added",
                FileStatus::Modified => "modified",
                FileStatus::Deleted => "deleted",
                FileStatus::TypeChanged => "typeChanged",
            }
            .into(),
            added: f.lines.map(|l| l.0),
            removed: f.lines.map(|l| l.1),
            binary: f.lines.is_none(),
        })
        .collect()
}

/// A worktree as the session tools show it, with the files it changed (+/-); a worktree whose
/// directory is gone is said so, one whose changes cannot be read says why.
pub(crate) async fn view(shared: &Shared, wt: &WorktreeRecord) -> WorktreeView {
    let mut v = view_of(wt);
    match changes(shared, wt).await {
        Ok(Some((_, c))) => v.files = Some(changed_files(&c)),
        Ok(None) => v.gone = true,
        Err(e) => v.error = Some(e.to_string()),
    }
    v
}

/// The worktree of session `id`'s record, or a refusal naming `sessionId`.
fn of_record<'a>(id: &SessionId, wt: Option<&'a WorktreeRecord>) -> Result<&'a WorktreeRecord> {
    wt.ok_or_else(|| {
        Error::invalid(
            "sessionId",
            format!(
                "session {id} has no worktree of its own (start a session with `worktree: true`)"
            ),
        )
    })
}

/// A worktree that is gone, refused naming `sessionId`.
fn gone(id: &SessionId, wt: &WorktreeRecord) -> Error {
    Error::invalid(
        "sessionId",
        format!(
            "session {id}'s worktree {} is gone (removed by hand); close the session",
            wt.path.display()
        ),
    )
}

/// The header of one file's part of a patch: `diff --git`, its mode lines (a file made
/// executable says so, binary or not) and `index`, up to its content (git quotes a path that
/// is not plain, so the header is text).
fn header_of(part: &[u8]) -> String {
    let mut header = String::new();
    for line in part.split_inclusive(|b| *b == b'\n') {
        if line.starts_with(b"--- ")
            || line.starts_with(b"@@")
            || line.starts_with(b"Binary files ")
            || line.starts_with(b"GIT binary patch")
        {
            break;
        }
        header.push_str(&String::from_utf8_lossy(line));
    }
    header
}

/// Session `id`'s changes against its base, file by file (a binary file's part names it).
pub(crate) async fn diff(
    shared: &Shared,
    id: &SessionId,
    wt: Option<&WorktreeRecord>,
) -> Result<SessionDiff> {
    let wt = of_record(id, wt)?;
    let Some((_, c)) = changes(shared, wt).await? else {
        return Err(gone(id, wt));
    };
    let files = changed_files(&c);
    let parts = c
        .shown_per_file()
        .iter()
        .zip(&files)
        .map(|(part, f)| {
            if f.binary {
                format!(
                    "{}Binary file {} {} (not shown)\n",
                    header_of(part),
                    f.path,
                    f.status
                )
            } else {
                String::from_utf8_lossy(part).into_owned()
            }
        })
        .collect();
    let mut worktree = view_of(wt);
    worktree.files = Some(files.clone());
    Ok(SessionDiff {
        worktree,
        files,
        parts,
        digest: digest(&c),
    })
}

/// The digest of a worktree's changes: the SHA-256 (lowercase hex) of the whole patch an apply
/// lands (binary files included), so that an apply can be bound to the diff a person read.
pub(crate) fn digest(c: &Changes) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(&c.patch)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Apply session `id`'s changes onto the checkout it came from, all or nothing, never staged
/// or committed. With `expected` (a digest `diffSession` gave), refused naming `digest`, and
/// nothing landed, when the changes are no longer those ([`digest`]).
pub(crate) async fn apply(
    shared: &Shared,
    id: &SessionId,
    wt: Option<&WorktreeRecord>,
    expected: Option<&str>,
) -> Result<ApplyOutcome> {
    let wt = of_record(id, wt)?;
    let Some((repo, c)) = changes(shared, wt).await? else {
        return Err(gone(id, wt));
    };
    if let Some(expected) = expected
        && !expected.trim().eq_ignore_ascii_case(&digest(&c))
    {
        return Err(Error::invalid(
            "digest",
            format!(
                "session {id}'s changes are no longer the ones this digest was taken of (they \
                 changed since that diffSession); read them again with diffSession and pass its \
                 digest (nothing was applied)"
            ),
        ));
    }
    Ok(
        match git(shared)?.apply(&repo, &wt.base_commit, &c).await? {
            Applied::Landed(files) => ApplyOutcome::Landed(files),
            Applied::Refused(files) => ApplyOutcome::Refused(files),
        },
    )
}

/// The files of a worktree's changes that are not in the checkout it came from (an apply did
/// not land them, or they changed since): what closing it would lose. Empty when it has no
/// changes, they were applied, or its directory is gone.
pub(crate) async fn unapplied(shared: &Shared, wt: &WorktreeRecord) -> Result<Vec<String>> {
    let Some((repo, c)) = changes(shared, wt).await? else {
        return Ok(Vec::new());
    };
    if git(shared)?.is_applied(&repo, &c).await? {
        return Ok(Vec::new());
    }
    Ok(c.files.into_iter().map(|f| f.path).collect())
}
