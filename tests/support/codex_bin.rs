//! Locating the real, pinned Codex CLI binary (`codex-cli 0.145.0`) for integration tests.
//!
//! The binary comes from `scripts/fetch-codex.sh`, which installs the npm package pinned (with
//! integrity hashes) in `scripts/codex-cli/package-lock.json` into `<repo>/.codex-cli`.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The exact `codex --version` output every test expects.
pub const CODEX_VERSION: &str = "codex-cli 0.145.0";

/// Environment variable naming an already-installed codex binary to use instead of fetching one.
pub const CODEX_BIN_ENV: &str = "CODEX_BIN";

/// The crate's root directory (`CARGO_MANIFEST_DIR`).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `<repo>/.test-work`: git-ignored scratch space for tests (outside `/tmp`, which codex
/// refuses for its helper binaries). Created on first use.
pub fn test_work_dir() -> PathBuf {
    let dir = repo_root().join(".test-work");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create test work dir {}: {e}", dir.display()));
    dir
}

/// Absolute path of the pinned codex binary (`codex-cli 0.145.0`).
///
/// - If `CODEX_BIN` is set, that file is used (it must exist and report the pinned version).
/// - Otherwise the binary is obtained once per test process: under an exclusive file lock
///   (`<repo>/.test-work/codex-cli.lock`, so parallel nextest processes do not race on
///   `npm ci`), `scripts/fetch-codex.sh` is run and the path on its last stdout line is used.
///
/// Panics with `cannot obtain codex 0.145.0: <why>` on any failure; tests never skip.
///
/// This blocks (it may run `npm ci` the first time); call it before starting the work the test
/// wants to time, e.g. at the top of the test.
pub fn codex_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match resolve() {
        Ok(path) => path,
        Err(why) => panic!("cannot obtain codex 0.145.0: {why}"),
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
    let out = Command::new("bash")
        .arg(&script)
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
    if !out.status.success() || got != CODEX_VERSION {
        return Err(format!(
            "{} --version printed `{got}` ({}), expected `{CODEX_VERSION}`",
            bin.display(),
            out.status
        ));
    }
    Ok(())
}

/// For bench binaries: the pinned codex, or a clean exit (code 2) saying why it could not be
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
