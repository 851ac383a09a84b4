//! Locating the real Codex CLI binary under test for integration tests.
//!
//! The suite runs against one supported codex version at a time, the version under test:
//! `CODEX_VERSION_UNDER_TEST` (e.g. `0.145.0`), by default the newest tested
//! ([`NEWEST_TESTED_CODEX_VERSION`]). The binary is `CODEX_BIN` when set, else the one
//! `scripts/fetch-codex.sh VERSION` installs from the npm package pinned (with integrity hashes)
//! in `scripts/codex-cli/VERSION/package-lock.json` into `<repo>/.codex-cli/VERSION`. Either way
//! its `--version` must be exactly `codex-cli VERSION`.
//!
//! Where the versions behave differently (mostly the unsafe forms the negative controls run),
//! a test matches on [`under_test`]: adding a version to [`Codex`] makes the compiler list every
//! place whose behaviour must be measured and recorded for it.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use codex_mcp_bridge::config::NEWEST_TESTED_CODEX_VERSION;

/// Environment variable naming the codex version the suite tests (default: the newest tested).
pub const VERSION_ENV: &str = "CODEX_VERSION_UNDER_TEST";

/// The codex versions whose behaviour the suite records, oldest first. Each has its pinned
/// npm lock in `scripts/codex-cli/<version>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Codex {
    /// `codex-cli 0.145.0`, the oldest supported.
    V0_145_0,
    /// `codex-cli 0.171.0`, the newest tested.
    V0_171_0,
}

impl Codex {
    /// Every recorded version, oldest first.
    pub const ALL: [Codex; 2] = [Codex::V0_145_0, Codex::V0_171_0];

    /// `0.145.0`.
    pub fn number(self) -> &'static str {
        match self {
            Codex::V0_145_0 => "0.145.0",
            Codex::V0_171_0 => "0.171.0",
        }
    }

    /// What `codex --version` prints: `codex-cli 0.145.0`.
    pub fn version_line(self) -> String {
        format!("codex-cli {}", self.number())
    }

    fn parse(number: &str) -> Option<Codex> {
        Codex::ALL.into_iter().find(|c| c.number() == number)
    }
}

/// The codex version under test: `CODEX_VERSION_UNDER_TEST`, or the newest tested.
///
/// Panics (tests never skip) if it names a version the suite has no recorded behaviour for.
pub fn under_test() -> Codex {
    static UNDER_TEST: OnceLock<Codex> = OnceLock::new();
    *UNDER_TEST.get_or_init(|| {
        let number = std::env::var(VERSION_ENV)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| NEWEST_TESTED_CODEX_VERSION.to_owned());
        Codex::parse(&number).unwrap_or_else(|| {
            panic!(
                "{VERSION_ENV}={number}: the suite records the behaviour of codex {:?} only \
                 (to add a version see 'Adding a Codex CLI version' in docs/operating.md)",
                Codex::ALL.map(Codex::number)
            )
        })
    })
}

/// The exact `codex --version` output every test expects: the version under test's.
pub fn codex_version() -> String {
    under_test().version_line()
}

/// Environment variable naming an already-installed codex binary to use instead of fetching one.
pub const CODEX_BIN_ENV: &str = "CODEX_BIN";

/// The crate's root directory (`CARGO_MANIFEST_DIR`).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `$CARGO_TARGET_DIR`, else the target dir this binary was built into, else `<repo>/target`
/// (where the benches write their reports).
pub fn target_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return std::path::PathBuf::from(dir);
    }
    // <target>/<profile>/deps/<bench>-<hash>
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let deps = exe.parent()?;
            (deps.file_name()? == "deps")
                .then(|| deps.parent()?.parent().map(std::path::PathBuf::from))?
        })
        .unwrap_or_else(|| repo_root().join("target"))
}

/// The suite's work directory (`<repo>/.test-work` where the checkout allows; see
/// [`super::work_dir`]): scratch space for tests and the fetch locks. Created on first use.
pub fn test_work_dir() -> PathBuf {
    let dir = super::work_dir::placement().work.clone();
    super::work_dir::create_dir(&dir);
    dir
}

/// Absolute path of the codex binary under test (`codex-cli <version under test>`).
///
/// - If `CODEX_BIN` is set, that file is used (it must exist and report the version under test).
/// - Otherwise the binary is obtained once per test process: under an exclusive file lock
///   (`<work dir>/codex-cli.lock`, so parallel nextest processes do not race on `npm ci`),
///   `scripts/fetch-codex.sh VERSION [DEST]` is run (DEST: the work dir's `codex-cli/VERSION`
///   when the work dir is not the checkout's) and the path on its last stdout line is used.
///
/// Panics with `cannot obtain codex <version>: <why>` on any failure; tests never skip.
///
/// This blocks (it may run `npm ci` the first time); call it before starting the work the test
/// wants to time, e.g. at the top of the test.
pub fn codex_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match resolve() {
        Ok(path) => path,
        Err(why) => panic!("cannot obtain codex {}: {why}", under_test().number()),
    })
    .clone()
}

fn resolve() -> Result<PathBuf, String> {
    if let Some(from_env) = std::env::var_os(CODEX_BIN_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(from_env);
        if !path.is_file() {
            return Err(format!(
                "{CODEX_BIN_ENV}={} does not exist or is not a file",
                path.display()
            ));
        }
        // as given (a link there counts: a turn could swap it) and resolved, as the server has it
        let temps = &super::work_dir::facts().temp_dirs;
        let given = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        if let Some(temp) = super::work_dir::in_temp(&given, temps)
            .or_else(|| super::work_dir::in_temp(&super::work_dir::resolved(&path), temps))
        {
            return Err(format!(
                "{CODEX_BIN_ENV}={} lies in {}, which codex's workspace-write sandbox may write: \
                 the server refuses every writable turn while its codex binary lies there; unset \
                 {CODEX_BIN_ENV} (the suite fetches codex {} itself, into {}) or name a binary \
                 elsewhere",
                path.display(),
                temp.display(),
                under_test().number(),
                super::work_dir::placement()
                    .codex_cli
                    .clone()
                    .unwrap_or_else(|| repo_root().join(".codex-cli"))
                    .display()
            ));
        }
        check_version(&path)?;
        return Ok(path);
    }

    let lock_path = test_work_dir().join("codex-cli.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open lock file {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let result = fetch();
    drop::<File>(lock); // releases the lock
    result
}

fn fetch() -> Result<PathBuf, String> {
    let script = repo_root().join("scripts").join("fetch-codex.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script).arg(under_test().number());
    if let Some(dir) = &super::work_dir::placement().codex_cli {
        cmd.arg(dir.join(under_test().number()));
    }
    let out = cmd
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}):\n{stderr}",
            script.display(),
            out.status
        ));
    }
    let last = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .ok_or_else(|| format!("{} printed no path; stderr:\n{stderr}", script.display()))?;
    let path = PathBuf::from(last);
    if !path.is_absolute() || !path.is_file() {
        return Err(format!(
            "{} printed `{last}`, which is not an existing absolute file",
            script.display()
        ));
    }
    check_version(&path)?;
    Ok(path)
}

fn check_version(bin: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", bin.display()))?;
    let got = String::from_utf8_lossy(&out.stdout);
    let got = got.trim();
    let want = codex_version();
    if !out.status.success() || got != want {
        return Err(format!(
            "{} --version printed `{got}` ({}), expected `{want}` (the version under test; set \
             {VERSION_ENV} to test another supported version)",
            bin.display(),
            out.status
        ));
    }
    Ok(())
}

/// For bench binaries: the codex under test, or a clean exit (code 2) saying why it could not be
/// obtained (the fetcher panics; the default hook would add a backtrace).
pub fn codex_bin_or_exit(bench: &str) -> PathBuf {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let fetched = std::panic::catch_unwind(codex_bin);
    std::panic::set_hook(hook);
    fetched.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown error".to_owned());
        eprintln!("{bench}: error: the real codex binary is required: {why}");
        std::process::exit(2);
    })
}
