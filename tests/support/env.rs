//! Per-test filesystem environment: a fresh root in the suite's work directory (never in `/tmp`:
//! see `work_dir`) with a `CODEX_HOME`, a quiet `HOME` and a work directory, plus helpers to run
//! codex in it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};

use tempfile::TempDir;
use tokio::process::Command;

use super::codex_bin::test_work_dir;

/// The API key handed to codex in tests; the mock accepts anything.
pub const TEST_API_KEY: &str = "test-key";

/// Set this env var (to anything non-empty) to keep every test's temp root for inspection.
pub const KEEP_ENV: &str = "CODEX_BRIDGE_KEEP_TEST_WORK";

const FALLBACK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A fresh per-test directory tree in the suite's work directory (removed on drop unless
/// `CODEX_BRIDGE_KEEP_TEST_WORK` is set):
///
/// ```text
/// <root>/codex_home/   CODEX_HOME (empty)
/// <root>/home/         HOME, with empty .profile, .bashrc, .bash_profile
/// <root>/work/         the cwd for codex (optionally a git repo, see `init_git`)
/// ```
pub struct TestEnv {
    dir: TempDir,
    codex_home: PathBuf,
    home: PathBuf,
    work: PathBuf,
}

impl TestEnv {
    /// Creates the tree in the suite's work directory. Panics if the filesystem refuses.
    pub fn new() -> Self {
        Self::new_in(&test_work_dir())
    }

    /// Creates the tree in `base` (existing). Panics if the filesystem refuses.
    pub fn new_in(base: &Path) -> Self {
        let mut dir = tempfile::Builder::new()
            .prefix("t-")
            .tempdir_in(base)
            .unwrap_or_else(|e| panic!("create a test root in {}: {e}", base.display()));
        if std::env::var_os(KEEP_ENV).is_some_and(|v| !v.is_empty()) {
            dir.disable_cleanup(true);
        }
        let root = dir.path().to_path_buf();
        let codex_home = root.join("codex_home");
        let home = root.join("home");
        let work = root.join("work");
        for d in [&codex_home, &home, &work] {
            std::fs::create_dir_all(d).expect("create test env dir");
        }
        for f in [".profile", ".bashrc", ".bash_profile"] {
            std::fs::write(home.join(f), "").expect("write empty shell profile");
        }
        TestEnv {
            dir,
            codex_home,
            home,
            work,
        }
    }

    /// Like [`TestEnv::new`], with `work/` turned into a git repository with one commit.
    pub fn with_git() -> Self {
        let env = Self::new();
        init_git_repo(env.work());
        env
    }

    /// The temp root holding everything else.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `<root>/codex_home`, to be used as `CODEX_HOME`.
    pub fn codex_home(&self) -> &Path {
        &self.codex_home
    }

    /// `<root>/home`, to be used as `HOME` (empty login profile, so `bash -lc` is fast).
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `<root>/work`, the working directory for codex.
    pub fn work(&self) -> &Path {
        &self.work
    }

    /// Turns `work/` into a git repository with one commit (see [`init_git_repo`]).
    pub fn init_git(&self) {
        init_git_repo(self.work());
    }

    /// The environment a codex child gets (everything else is cleared): `HOME`, `PATH` (the
    /// test process's), `CODEX_HOME`, `OPENAI_API_KEY=test-key`.
    pub fn codex_env(&self) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.home.clone().into_os_string()),
            ("PATH".into(), path),
            (
                "CODEX_HOME".into(),
                self.codex_home.clone().into_os_string(),
            ),
            ("OPENAI_API_KEY".into(), TEST_API_KEY.into()),
        ]
    }

    /// A `tokio` command for `program` prepared the way tests run codex: `env_clear()` plus
    /// [`TestEnv::codex_env`], cwd = `work/`, stdin null, stdout/stderr piped, killed on drop.
    pub fn command(&self, program: impl AsRef<Path>) -> Command {
        let mut cmd = Command::new(program.as_ref());
        cmd.env_clear()
            .envs(self.codex_env())
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `git init` in `dir` (created if missing) and commits one file (`README.md`) as
/// `t <t@t>`, without needing any global git configuration. Panics on failure.
pub fn init_git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("create git repo dir");
    if !dir.join("README.md").exists() {
        std::fs::write(dir.join("README.md"), "test repository\n").expect("write README.md");
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(
        dir,
        &["commit", "-q", "--no-verify", "-m", "initial commit"],
    );
}

/// Runs `git -c user.name=t -c user.email=t@t <args>` in `dir`, isolated from global/system
/// config; panics with git's stderr on failure. Returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = StdCommand::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
