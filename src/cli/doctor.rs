//! `doctor`: one line per check of what the server needs here (codex and its version,
//! CODEX_HOME and credentials, the sandbox, the settings, the store, nested MCP servers), each
//! with a fix.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::codex::home::{codex_home, nested_servers};
use crate::codex::process::codex_version;
use crate::config::{
    CodexSupport, Config, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION, Settings,
    find_on_path, store_dir,
};
use crate::security::env::filter_env;
use crate::security::redact::redact;
use crate::store::{Store, StoreError};

/// The config file as found.
#[derive(Debug, Clone)]
pub enum ConfigFile {
    /// Read from this path.
    Read(PathBuf),
    /// The default path, absent.
    Absent(PathBuf),
    /// Neither HOME nor XDG_CONFIG_HOME is set, and no `--config`.
    NoLocation,
}

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Works, but something deserves attention.
    Warn,
    /// Blocks use: `doctor` exits non-zero.
    Fail,
}

/// One line of `doctor`.
#[derive(Debug, Clone)]
pub struct Check {
    pub verdict: Verdict,
    pub name: &'static str,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            verdict: Verdict::Ok,
            name,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            verdict: Verdict::Warn,
            name,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A problem that keeps the server from starting, in the words the server says it with
    /// ([`super::startup`]).
    fn problem(name: &'static str, p: super::startup::Problem) -> Check {
        Check::fail(name, p.detail, p.fix)
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            verdict: Verdict::Fail,
            name,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// `ok    name  detail` (and ` -- fix: ...`).
    pub fn line(&self) -> String {
        let v = match self.verdict {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        let mut s = format!("{v:<5} {:<14} {}", self.name, self.detail);
        if let Some(f) = &self.fix {
            s.push_str(" -- fix: ");
            s.push_str(f);
        }
        redact(&s).into_owned()
    }
}

const INSTALL: &str = "npm install -g @openai/codex@";

/// The `codex version` check: where `codex --version`'s answer falls in the supported range.
fn version_check(v: &str) -> Check {
    let range = format!("{OLDEST_SUPPORTED_CODEX_VERSION} to {NEWEST_TESTED_CODEX_VERSION}");
    let install = format!("{INSTALL}{NEWEST_TESTED_CODEX_VERSION}");
    match CodexSupport::of(v) {
        CodexSupport::Supported => Check::ok(
            "codex version",
            format!("{v} (supported: this bridge is tested with codex {range})"),
        ),
        CodexSupport::NewerThanTested => Check::warn(
            "codex version",
            format!(
                "{v} is newer than the newest tested, {NEWEST_TESTED_CODEX_VERSION}: it probably \
                 works, but no test has proven the security pins against it"
            ),
            format!(
                "to be sure, install the newest tested version ({install}); otherwise watch for \
                 errors and report them"
            ),
        ),
        CodexSupport::OlderThanSupported => Check::fail(
            "codex version",
            format!(
                "{v} is older than the oldest supported, {OLDEST_SUPPORTED_CODEX_VERSION}: the \
                 security pins are proven only for codex {range}"
            ),
            format!("upgrade codex: {install}"),
        ),
        CodexSupport::Unrecognized => Check::warn(
            "codex version",
            format!(
                "`{v}` has no version number this bridge recognizes; it supports codex {range}"
            ),
            format!("check CODEX_BIN points at the Codex CLI ({install})"),
        ),
    }
}

/// Why the codex binary cannot be used, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexMissing {
    pub problem: String,
    pub fix: String,
}

impl std::fmt::Display for CodexMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "codex not found: {}; fix: {}", self.problem, self.fix)
    }
}

/// Where the settings look for codex: the given program and which setting gave it.
fn codex_setting(settings: &Settings, vars: &[(String, String)]) -> (PathBuf, &'static str) {
    let cli_path = vars
        .iter()
        .find(|(n, v)| n == "CODEX_CLI_PATH" && !v.is_empty())
        .map(|(_, v)| v.as_str());
    match (&settings.codex_bin, cli_path) {
        (Some(p), _) => (p.clone(), "CODEX_BIN/--codex-bin"),
        (None, Some(p)) => (PathBuf::from(p), "CODEX_CLI_PATH"),
        (None, None) => (PathBuf::from("codex"), "the default, `codex` on PATH"),
    }
}

/// How to fix a codex binary that cannot be used, for these settings.
fn codex_fix(settings: &Settings, vars: &[(String, String)]) -> String {
    let (_, from) = codex_setting(settings, vars);
    if from == "the default, `codex` on PATH" {
        format!(
            "install it ({INSTALL}{NEWEST_TESTED_CODEX_VERSION}) or set CODEX_BIN to the codex executable"
        )
    } else {
        format!(
            "point {from} at the codex executable, or unset it to use `codex` on PATH \
             (install: {INSTALL}{NEWEST_TESTED_CODEX_VERSION})"
        )
    }
}

/// The codex executable, resolved as [`Config`](crate::config::Config) does
/// (--codex-bin/CODEX_BIN, CODEX_CLI_PATH, then `codex` on PATH), with the setting that named
/// it; or what is wrong and how to fix it. Shared by `doctor` and the server's start.
pub fn locate_codex(
    settings: &Settings,
    vars: &[(String, String)],
) -> Result<(PathBuf, &'static str), CodexMissing> {
    let (given, from) = codex_setting(settings, vars);
    let path_var = vars
        .iter()
        .find(|(n, v)| n == "PATH" && !v.is_empty())
        .map(|(_, v)| v.as_str());
    if let Some(p) = find_on_path(&given, path_var) {
        return Ok((p, from));
    }
    let problem = if given.components().count() > 1 || given.is_absolute() {
        if is_executable(&given) {
            return Ok((given, from));
        }
        format!(
            "{} (from {from}) does not exist or is not an executable file",
            given.display()
        )
    } else {
        format!("`{}` (from {from}) is not on PATH", given.display())
    };
    Err(CodexMissing {
        problem,
        fix: codex_fix(settings, vars),
    })
}

/// Run every check; `start_dir` stands for the directory the server would start in.
pub async fn doctor_checks(
    settings: &Settings,
    config_file: &ConfigFile,
    vars: &[(String, String)],
    start_dir: &Path,
) -> Vec<Check> {
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.as_str())
    };
    let mut checks = vec![config_file_check(config_file)];
    checks.extend(codex_checks(settings, vars).await);
    // CODEX_HOME and credentials (never their values)
    let home = codex_home(vars);
    checks.push(codex_home_check(&home));
    checks.push(credentials_check(var("OPENAI_API_KEY").is_some(), &home));
    checks.push(sandbox_check(var("PATH")));
    // settings, as the server validates them
    let config = Config::from_settings(settings, start_dir, vars);
    checks.push(match &config {
        Ok(c) => Check::ok("settings", describe(c)),
        Err(e) => Check::problem("settings", super::startup::setting_problem(e)),
    });
    if let Ok(c) = config {
        checks.push(own_files_check(&c));
        checks.push(backend_check(c, vars).await);
    }
    checks.push(store_check(settings, vars));
    checks.push(nested_check(&home));
    checks
}

/// Whether a root holds one of the bridge's own files (config file, store, codex binary): a
/// writable turn is refused in a working directory that holds one.
fn own_files_check(c: &Config) -> Check {
    let own = crate::confine::resolve_own(&c.own_files);
    let found: Vec<String> = c
        .roots
        .iter()
        .flat_map(|root| {
            own.iter().filter(|f| f.overlaps(root)).map(move |f| {
                format!(
                    "root {} holds the {} {}",
                    root.display(),
                    f.kind.describe(),
                    f.path.display()
                )
            })
        })
        .collect();
    if found.is_empty() {
        Check::ok(
            "own files",
            "no root holds the config file, the store or the codex binary",
        )
    } else {
        Check::warn(
            "own files",
            found.join("; "),
            "workspace-write and danger-full-access turns are refused in a working directory \
             that holds one of these (read-only turns run); move them out of the roots, or \
             narrow CODEX_BRIDGE_ROOTS",
        )
    }
}

/// Which config file was read.
fn config_file_check(config_file: &ConfigFile) -> Check {
    match config_file {
        ConfigFile::Read(p) => Check::ok("config file", format!("{} (read)", p.display())),
        ConfigFile::Absent(p) => Check::ok(
            "config file",
            format!("none ({} does not exist; optional)", p.display()),
        ),
        ConfigFile::NoLocation => Check::ok(
            "config file",
            "none (neither HOME nor XDG_CONFIG_HOME is set)",
        ),
    }
}

/// The codex binary, and its version when it is there.
async fn codex_checks(settings: &Settings, vars: &[(String, String)]) -> Vec<Check> {
    let (codex, from) = match locate_codex(settings, vars) {
        Ok(found) => found,
        Err(missing) => return vec![Check::fail("codex binary", missing.problem, missing.fix)],
    };
    let found = Check::ok("codex binary", format!("{} (from {from})", codex.display()));
    let env = filter_env(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let version = match codex_version(&codex, &env, None).await {
        None => Check::fail(
            "codex version",
            format!("{} did not answer `--version`", codex.display()),
            codex_fix(settings, vars),
        ),
        Some(v) => version_check(&v),
    };
    vec![found, version]
}

/// CODEX_HOME exists (codex creates it at its first login).
fn codex_home_check(home: &Path) -> Check {
    if home.is_dir() {
        Check::ok("CODEX_HOME", home.display().to_string())
    } else {
        Check::warn(
            "CODEX_HOME",
            format!("{} does not exist yet", home.display()),
            "run `codex login` once (it creates it), or set CODEX_HOME",
        )
    }
}

/// Some credentials are there (never their values).
fn credentials_check(api_key_set: bool, home: &Path) -> Check {
    if api_key_set {
        Check::ok("credentials", "OPENAI_API_KEY is set")
    } else if home.join("auth.json").is_file() {
        Check::ok(
            "credentials",
            format!("{} exists (codex login)", home.join("auth.json").display()),
        )
    } else {
        Check::warn(
            "credentials",
            "neither OPENAI_API_KEY nor $CODEX_HOME/auth.json",
            "run `codex login`, or set OPENAI_API_KEY in the server's environment (a custom \
             provider in --codex-config may not need either)",
        )
    }
}

/// The store: where it is, and whether it can be used (by variant: a store a server holds is
/// fine, a directory others can reach is not).
fn store_check(settings: &Settings, vars: &[(String, String)]) -> Check {
    let dir = match store_dir(settings, vars) {
        Err(e) => {
            return Check::fail(
                "store",
                e.to_string(),
                "set CODEX_BRIDGE_STORE to an absolute directory",
            );
        }
        Ok(dir) => dir,
    };
    if !dir.exists() {
        return Check::ok(
            "store",
            format!(
                "{} does not exist yet; the server creates it on its first start",
                dir.display()
            ),
        );
    }
    match crate::store::check_dir(&dir).and_then(|()| Store::open(&dir)) {
        Ok(s) => Check::ok(
            "store",
            format!(
                "{}: schema version {}, {} session(s)",
                dir.display(),
                s.schema_version().unwrap_or(0),
                s.len()
            ),
        ),
        Err(StoreError::InUse { .. }) => Check::ok(
            "store",
            format!(
                "{} is in use by a running codex-mcp-bridge server (fine: that server owns it, \
                 and a second server started on it relays its client to that one)",
                dir.display()
            ),
        ),
        Err(e) => Check::problem("store", super::startup::store_problem(&e)),
    }
}

/// The nested MCP servers codex's config declares.
fn nested_check(home: &Path) -> Check {
    let nested = nested_servers(home);
    Check::ok(
        "nested MCP",
        if nested.is_empty() {
            format!("none configured in {}", home.join("config.toml").display())
        } else {
            nested
                .iter()
                .map(|s| {
                    let mut flags = vec![];
                    if !s.enabled {
                        flags.push("disabled");
                    }
                    if s.required {
                        flags.push("required");
                    }
                    if flags.is_empty() {
                        s.name.clone()
                    } else {
                        format!("{} ({})", s.name, flags.join(", "))
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        },
    )
}

/// Codex's Linux sandbox is bubblewrap: on PATH, or the copy codex bundles. Unprivileged user
/// namespaces turned off by a sysctl stop either one; that is reported, not proven.
fn sandbox_check(path_var: Option<&str>) -> Check {
    let bwrap = find_on_path(Path::new("bwrap"), path_var);
    let sysctl = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let blocked = if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        Some("user.max_user_namespaces is 0")
    } else if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        Some("kernel.unprivileged_userns_clone is 0")
    } else if bwrap.is_none()
        && sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
    {
        Some("kernel.apparmor_restrict_unprivileged_userns is 1")
    } else {
        None
    };
    let found = match &bwrap {
        Some(p) => format!("bubblewrap at {}", p.display()),
        None => "bwrap is not on PATH: codex will use its bundled bubblewrap".to_owned(),
    };
    match blocked {
        None => Check::ok("sandbox", found),
        Some(why) => Check::warn(
            "sandbox",
            format!("{found}; {why}, so the sandbox may fail to start"),
            "allow unprivileged user namespaces (or install bubblewrap from your distribution), \
             else every turn fails before running a command",
        ),
    }
}

fn describe(c: &Config) -> String {
    let roots: Vec<String> = c.roots.iter().map(|r| r.display().to_string()).collect();
    format!(
        "roots={} max_concurrent={} default_timeout_ms={} max_timeout_ms={} \
         queue_timeout_ms={} idle_timeout_ms={} heartbeat_ms={} allow_danger={} nested_mcp={} \
         backend={} max_warm={} max_line_bytes={} max_output_bytes={} codex_config={} override(s)",
        roots.join(":"),
        c.max_concurrent,
        c.default_timeout.as_millis(),
        c.max_timeout.as_millis(),
        c.queue_timeout.as_millis(),
        c.idle_timeout.as_millis(),
        c.heartbeat.as_millis(),
        c.allow_danger,
        c.nested_mcp,
        c.backend,
        c.max_warm,
        c.limits.max_line_bytes,
        c.limits.max_output_bytes,
        c.codex_overrides.len(),
    )
}

/// How session turns will run: with `app-server` set, a probe starts one (in a scratch
/// directory, with the server's codex and environment) and closes it.
async fn backend_check(c: Config, vars: &[(String, String)]) -> Check {
    match c.backend {
        crate::config::Backend::Exec => Check::ok("backend", "exec: a codex exec process per turn"),
        crate::config::Backend::AppServer => {
            let max_warm = c.max_warm;
            let client = crate::actors::ClientContext::new(c, vars);
            match crate::actors::pool::warm::probe(&client.common, None, None).await {
                Ok(()) => Check::ok(
                    "backend",
                    format!(
                        "app-server: codex app-server starts and answers; at most {max_warm} warm processes"
                    ),
                ),
                Err(why) => Check::warn(
                    "backend",
                    format!(
                        "app-server is set, but codex has no usable app-server ({why}); session turns will run with codex exec"
                    ),
                    "upgrade codex to a supported version, or set CODEX_BRIDGE_BACKEND=exec",
                ),
            }
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Run `doctor`, writing one line per check and a summary to `out`; `true` when nothing
/// blocks use.
pub async fn doctor(
    settings: &Settings,
    config_file: &ConfigFile,
    vars: &[(String, String)],
    start_dir: &Path,
    out: &mut dyn Write,
) -> bool {
    let checks = doctor_checks(settings, config_file, vars, start_dir).await;
    let failures = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    let warnings = checks.iter().filter(|c| c.verdict == Verdict::Warn).count();
    let mut text: String = checks.iter().map(|c| c.line() + "\n").collect();
    text.push_str(&match (failures, warnings) {
        (0, 0) => "All checks passed.\n".to_owned(),
        (0, w) => format!("No blocking problem; {w} warning(s).\n"),
        (f, _) => format!("{f} problem(s) stop the server from working here.\n"),
    });
    let _ = out.write_all(text.as_bytes());
    failures == 0
}
