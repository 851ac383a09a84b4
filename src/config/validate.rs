//! The checks: [`Settings`] (flags, environment, config file) validated into one typed
//! [`Config`], in a fixed order so that the first setting at fault is the one reported, each
//! refusal naming its setting; with the defaults and bounds they apply.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::codex::process::Limits;
use crate::invalid::InvalidArgument;
use crate::security::overrides::{Override, parse_operator_override};

use super::error::ConfigError;
use super::file::config_location;
use super::flags::{ApprovalMode, Backend, NestedMcp, Settings};

/// What the settings refuse (a setting, named; the config file), folded into the crate error by
/// the caller's `?`.
type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Default cap on warm app-server processes.
pub const DEFAULT_MAX_WARM: usize = 16;
/// Default cap on calls waiting behind one session's running turn.
pub const DEFAULT_MAX_QUEUED_TURNS: usize = 16;
/// Default cap on the prompt bytes held by one session's waiting calls (four prompts of the
/// largest size).
pub const DEFAULT_MAX_QUEUED_PROMPT_BYTES: usize = 16 * 1024 * 1024;

/// Validated operator settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The codex binary: an absolute path when found on PATH, else as given.
    pub codex_bin: PathBuf,
    /// Canonical allowed roots.
    pub roots: Vec<PathBuf>,
    pub store_dir: PathBuf,
    /// Where a session's own git worktree goes: absolute, outside the store and the config
    /// file's directory.
    pub worktrees_dir: PathBuf,
    pub allow_danger: bool,
    pub max_concurrent: usize,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub codex_overrides: Vec<Override>,
    pub limits: Limits,
    pub queue_timeout: Duration,
    pub idle_timeout: Duration,
    /// [`NestedMcp::Disable`]: non-required nested MCP servers are off on every call, not only
    /// `query`/`search`.
    pub nested_mcp: NestedMcp,
    /// How a session's turns run.
    pub backend: Backend,
    /// Most warm app-server processes at once.
    pub max_warm: usize,
    /// Most calls waiting behind one session's running turn.
    pub max_queued_turns: usize,
    /// Most prompt bytes held by one session's waiting calls.
    pub max_queued_prompt_bytes: usize,
    /// [`ApprovalMode::Ask`]: codex's approval requests are asked of a person.
    pub approvals: ApprovalMode,
    /// How long a person has to answer one question.
    pub approval_timeout: Duration,
    /// Progress heartbeat interval.
    pub heartbeat: Duration,
    /// Sessions unused for longer are forgotten; `None` keeps them forever.
    pub session_ttl: Option<Duration>,
    /// The Streamable HTTP listener, when the operator asked for one.
    pub http: Option<HttpConfig>,
    /// The bridge's own files (config file, store, codex binary) as configured, absolute: a
    /// writable turn never runs in a working directory that holds one.
    pub own_files: Vec<crate::security::paths::OwnFile>,
}

/// The optional Streamable HTTP listener.
#[derive(Clone)]
pub struct HttpConfig {
    /// A loopback address.
    pub addr: std::net::SocketAddr,
    /// The bearer token every request must carry.
    pub token: String,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("addr", &self.addr)
            .field("token", &"[REDACTED]")
            .finish()
    }
}

/// The environment variable holding the HTTP bearer token (never a flag: argv is visible to
/// every user of the machine).
pub const HTTP_TOKEN_VAR: &str = "CODEX_BRIDGE_HTTP_TOKEN";
/// Shortest bearer token accepted.
pub const MIN_HTTP_TOKEN_LEN: usize = 32;

/// Validate the HTTP listener settings.
fn http_config(listen: Option<&str>, token: Option<&str>) -> Result<Option<HttpConfig>> {
    const SETTING: &str = "CODEX_BRIDGE_HTTP_LISTEN (--http-listen)";
    let Some(listen) = listen.filter(|l| !l.trim().is_empty()) else {
        return Ok(None);
    };
    let addr: std::net::SocketAddr = listen.trim().parse().map_err(|_| {
        ConfigError::setting(
            SETTING,
            "must be a loopback address with a port, like 127.0.0.1:8765 or [::1]:8765",
        )
    })?;
    if !addr.ip().is_loopback() {
        return Err(ConfigError::setting(
            SETTING,
            "must be a loopback address (127.0.0.0/8 or ::1): the HTTP listener is for hosts on \
             this machine only",
        ));
    }
    let token = token.unwrap_or_default();
    if token.len() < MIN_HTTP_TOKEN_LEN || token.chars().any(|c| !c.is_ascii_graphic()) {
        // Not `TOKEN: the ...`: a secret-named key before `:` makes the next word look like
        // its value, and redaction would eat it from the message.
        return Err(ConfigError::setting(
            format!("{HTTP_TOKEN_VAR} (the HTTP listener's bearer token)"),
            format!(
                "must be at least {MIN_HTTP_TOKEN_LEN} printable ASCII characters, without \
                 spaces"
            ),
        ));
    }
    Ok(Some(HttpConfig {
        addr,
        token: token.to_owned(),
    }))
}

/// Default concurrency limit (the reference bridge allows 3; two cores handle 4 codex turns,
/// which mostly wait on the model).
pub const DEFAULT_MAX_CONCURRENT: usize = 4;
/// Upper bound on the concurrency limit.
pub const MAX_MAX_CONCURRENT: usize = 64;
/// Default turn timeout: 10 minutes (Codex turns that edit and test code often take minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// Default cap on a caller's timeout: 1 hour.
pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 3_600_000;
/// Smallest timeout that makes sense for a codex turn.
pub const MIN_TIMEOUT_MS: u64 = 1_000;

impl Config {
    /// Validate settings. `start_dir` is the directory the server started in; `vars` is the
    /// server's environment (for CODEX_CLI_PATH, PATH and the XDG/HOME defaults).
    pub fn from_settings(
        s: &Settings,
        start_dir: &Path,
        vars: &[(String, String)],
    ) -> Result<Config> {
        let var = |k: &str| {
            vars.iter()
                .find(|(n, v)| n == k && !v.is_empty())
                .map(|(_, v)| v.as_str())
        };
        // in this order, so the first setting at fault is the one reported
        let codex_bin = codex_bin(s, var("CODEX_CLI_PATH"), var("PATH"))?;
        let roots = parse_roots(s.roots.as_deref(), start_dir)?;
        let store_dir = store_dir(s, vars)?;
        let max_concurrent = max_concurrent(s)?;
        let (default_timeout, max_timeout) = timeouts(s)?;
        let codex_overrides = s
            .codex_config
            .iter()
            .filter(|r| !r.trim().is_empty())
            .map(|r| parse_operator_override(r))
            .collect::<Result<Vec<_>, _>>()?;
        let limits = limits(s)?;
        let (queue_timeout, idle_timeout) = queue_and_idle(s)?;
        let heartbeat = heartbeat(s)?;
        let max_warm = s.max_warm.unwrap_or(DEFAULT_MAX_WARM);
        if max_warm == 0 {
            return Err(ConfigError::setting(
                "CODEX_BRIDGE_MAX_WARM (--max-warm)",
                "must be at least 1 (use CODEX_BRIDGE_BACKEND=exec for no warm processes)",
            ));
        }
        let approval_timeout = approval_timeout(s)?;
        let session_ttl = session_ttl(s)?;
        let http = http_config(s.http_listen.as_deref(), var(HTTP_TOKEN_VAR))?;
        let own_files = own_files(s, vars, start_dir, &codex_bin, &store_dir);
        let worktrees_dir = worktrees_dir(s, &store_dir, &own_files)?;
        Ok(Config {
            codex_bin,
            roots,
            store_dir,
            worktrees_dir,
            allow_danger: s.allow_danger.unwrap_or(false),
            max_concurrent,
            default_timeout,
            max_timeout,
            codex_overrides,
            limits,
            queue_timeout,
            idle_timeout,
            nested_mcp: s.nested_mcp.unwrap_or_default(),
            backend: s.backend.unwrap_or_default(),
            max_warm,
            max_queued_turns: s.max_queued_turns.unwrap_or(DEFAULT_MAX_QUEUED_TURNS),
            max_queued_prompt_bytes: s
                .max_queued_prompt_bytes
                .unwrap_or(DEFAULT_MAX_QUEUED_PROMPT_BYTES),
            approvals: s.approvals.unwrap_or_default(),
            approval_timeout,
            heartbeat,
            session_ttl,
            http,
            own_files,
        })
    }

    /// The timeout of one call: the caller's (capped) or the default. Zero is refused.
    pub fn timeout_for(&self, requested_ms: Option<u64>) -> Result<Duration, InvalidArgument> {
        match requested_ms {
            None => Ok(self.default_timeout),
            Some(0) => Err(InvalidArgument::new(
                "timeout",
                "must be a positive number of milliseconds",
            )),
            Some(ms) => Ok(Duration::from_millis(ms).min(self.max_timeout)),
        }
    }
}

/// The bridge's own files, absolute and normalized (symlinks kept): the config file named by
/// `--config`/`CODEX_BRIDGE_CONFIG`, the default config file location (a turn could create the
/// file there), the store directory and the codex binary.
fn own_files(
    s: &Settings,
    vars: &[(String, String)],
    start_dir: &Path,
    codex_bin: &Path,
    store_dir: &Path,
) -> Vec<crate::security::paths::OwnFile> {
    use crate::security::paths::{OwnFile, OwnKind, normalize};
    let explicit = s.config_file.clone().or_else(|| {
        vars.iter()
            .find(|(k, v)| k == "CODEX_BRIDGE_CONFIG" && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    });
    let mut files = Vec::new();
    for p in explicit
        .into_iter()
        .chain(config_location(None, vars).map(|l| l.path))
    {
        files.push((OwnKind::ConfigFile, p));
    }
    files.push((OwnKind::Store, store_dir.to_path_buf()));
    // a bare name not found on PATH is looked up again at each spawn: no file to name
    if codex_bin.components().count() > 1 {
        files.push((OwnKind::CodexBin, codex_bin.to_path_buf()));
    }
    files
        .into_iter()
        .map(|(kind, p)| OwnFile {
            kind,
            // not UTF-8, or climbing above `/`: as given (joined to the start directory)
            path: p
                .to_str()
                .and_then(|raw| normalize(start_dir, raw))
                .unwrap_or_else(|| start_dir.join(&p)),
            resolved: None,
        })
        .collect()
}

/// The codex binary a server with the environment `vars` and the settings `s` runs, for the
/// `sessions` command line (whose own settings hold the store only): CODEX_BIN, else the
/// config file's `codex_bin`, else CODEX_CLI_PATH, else `codex`; an absolute path when found
/// on PATH.
pub fn codex_program(s: &Settings, vars: &[(String, String)]) -> PathBuf {
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.as_str())
    };
    let given = var("CODEX_BIN").map(PathBuf::from).or(s.codex_bin.clone());
    let path = given
        .or(var("CODEX_CLI_PATH").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("codex"));
    find_on_path(&path, var("PATH")).unwrap_or(path)
}

/// The codex binary: `--codex-bin`, else CODEX_CLI_PATH, else `codex`; an absolute path when
/// found on PATH.
fn codex_bin(s: &Settings, cli_path: Option<&str>, path_var: Option<&str>) -> Result<PathBuf> {
    let codex_bin = match (&s.codex_bin, cli_path) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => PathBuf::from("codex"),
    };
    if codex_bin.as_os_str().is_empty() {
        return Err(ConfigError::setting(
            "CODEX_BIN (--codex-bin)",
            "must not be empty",
        ));
    }
    Ok(find_on_path(&codex_bin, path_var).unwrap_or(codex_bin))
}

fn max_concurrent(s: &Settings) -> Result<usize> {
    let max_concurrent = s.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT);
    if !(1..=MAX_MAX_CONCURRENT).contains(&max_concurrent) {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_MAX_CONCURRENT (--max-concurrent)",
            format!("must be between 1 and {MAX_MAX_CONCURRENT}"),
        ));
    }
    Ok(max_concurrent)
}

/// The default turn timeout and the cap on a caller's.
fn timeouts(s: &Settings) -> Result<(Duration, Duration)> {
    let default_ms = s.default_timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    let max_ms = s
        .max_timeout_ms
        .unwrap_or(DEFAULT_MAX_TIMEOUT_MS.max(default_ms));
    if default_ms < MIN_TIMEOUT_MS {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_DEFAULT_TIMEOUT_MS (--default-timeout-ms)",
            format!("must be at least {MIN_TIMEOUT_MS}"),
        ));
    }
    if max_ms < default_ms {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_MAX_TIMEOUT_MS (--max-timeout-ms)",
            "must be at least the default timeout",
        ));
    }
    Ok((
        Duration::from_millis(default_ms),
        Duration::from_millis(max_ms),
    ))
}

/// The output caps of one turn.
fn limits(s: &Settings) -> Result<Limits> {
    let mut limits = Limits::default();
    if let Some(n) = s.max_line_bytes {
        if n < 4096 {
            return Err(ConfigError::setting(
                "CODEX_BRIDGE_MAX_LINE_BYTES (--max-line-bytes)",
                "must be at least 4096",
            ));
        }
        limits.max_line_bytes = n;
    }
    if let Some(n) = s.max_output_bytes {
        if n < limits.max_line_bytes {
            return Err(ConfigError::setting(
                "CODEX_BRIDGE_MAX_OUTPUT_BYTES (--max-output-bytes)",
                "must be at least the line limit",
            ));
        }
        limits.max_output_bytes = n;
    }
    Ok(limits)
}

/// How long a call waits for a slot, and an idle session stays in memory.
fn queue_and_idle(s: &Settings) -> Result<(Duration, Duration)> {
    let queue_timeout = Duration::from_millis(s.queue_timeout_ms.unwrap_or(600_000));
    let idle_timeout = Duration::from_millis(s.idle_timeout_ms.unwrap_or(900_000));
    if idle_timeout < Duration::from_millis(100) {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_IDLE_TIMEOUT_MS (--idle-timeout-ms)",
            "must be at least 100",
        ));
    }
    Ok((queue_timeout, idle_timeout))
}

/// How long a person has to answer one of codex's questions.
fn approval_timeout(s: &Settings) -> Result<Duration> {
    let t = Duration::from_millis(s.approval_timeout_ms.unwrap_or(120_000));
    let longest = crate::approval::LONGEST_WAIT;
    if t < Duration::from_secs(1) || t > longest {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_APPROVAL_TIMEOUT_MS (--approval-timeout-ms)",
            format!("must be between 1000 and {} ms", longest.as_millis()),
        ));
    }
    Ok(t)
}

/// The interval of progress heartbeats.
fn heartbeat(s: &Settings) -> Result<Duration> {
    let heartbeat = Duration::from_millis(s.heartbeat_ms.unwrap_or(10_000));
    if heartbeat < Duration::from_millis(100) {
        return Err(ConfigError::setting(
            "CODEX_BRIDGE_HEARTBEAT_MS (--heartbeat-ms)",
            "must be at least 100",
        ));
    }
    Ok(heartbeat)
}

fn session_ttl(s: &Settings) -> Result<Option<Duration>> {
    match s.session_ttl_days.unwrap_or(30) {
        0 => Ok(None),
        d if d > 36_500 => Err(ConfigError::setting(
            "CODEX_BRIDGE_SESSION_TTL_DAYS (--session-ttl-days)",
            "must be at most 36500",
        )),
        d => Ok(Some(Duration::from_secs(d * 86_400))),
    }
}

const STORE: &str = "CODEX_BRIDGE_STORE (--store)";

/// The store directory the settings name: `--store`/`CODEX_BRIDGE_STORE` (absolute), else
/// `$XDG_DATA_HOME/codex-mcp-bridge`, else `$HOME/.local/share/codex-mcp-bridge`. Validates
/// nothing else (the `sessions` and `doctor` subcommands use it without a roots check).
pub fn store_dir(s: &Settings, vars: &[(String, String)]) -> Result<PathBuf> {
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.as_str())
    };
    match &s.store {
        Some(p) if p.is_absolute() => Ok(p.clone()),
        Some(_) => Err(ConfigError::setting(STORE, "must be an absolute path")),
        None => match (var("XDG_DATA_HOME"), var("HOME")) {
            (Some(x), _) if x.starts_with('/') => Ok(PathBuf::from(x).join("codex-mcp-bridge")),
            (_, Some(h)) => Ok(PathBuf::from(h).join(".local/share/codex-mcp-bridge")),
            _ => Err(ConfigError::setting(
                STORE,
                "neither XDG_DATA_HOME nor HOME is set; give the store directory explicitly",
            )),
        },
    }
}

const WORKTREES: &str = "CODEX_BRIDGE_WORKTREES (--worktrees)";

/// Where sessions' own worktrees go: `--worktrees`/`CODEX_BRIDGE_WORKTREES` (absolute), else
/// `<store>-worktrees` beside the store. Refused inside the store, or holding the store or a
/// config file (a session's commands write in its worktree).
fn worktrees_dir(
    s: &Settings,
    store_dir: &Path,
    own_files: &[crate::security::paths::OwnFile],
) -> Result<PathBuf> {
    use crate::security::paths::OwnKind;
    let dir = match &s.worktrees {
        Some(p) => p.clone(),
        None => {
            let mut name = store_dir.file_name().unwrap_or_default().to_os_string();
            name.push("-worktrees");
            store_dir.with_file_name(name)
        }
    };
    let mut keep_clear: Vec<(&str, &Path)> = vec![("the store", store_dir)];
    keep_clear.extend(
        own_files
            .iter()
            .filter(|f| f.kind == OwnKind::ConfigFile)
            .map(|f| ("a config file", f.path.as_path())),
    );
    let keep_out: [(&str, &Path); 1] = [("the store", store_dir)];
    crate::security::worktree::check_worktree_path(WORKTREES, &dir, &keep_out, &keep_clear)
        .map_err(|e| ConfigError::setting(WORKTREES, e.reason))?;
    Ok(dir)
}

const ROOTS: &str = "CODEX_BRIDGE_ROOTS (--roots)";

fn parse_roots(raw: Option<&str>, start_dir: &Path) -> Result<Vec<PathBuf>> {
    let given: Vec<&str> = raw
        .map(|r| r.split(':').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let candidates: Vec<PathBuf> = if given.is_empty() {
        if start_dir == Path::new("/") {
            return Err(ConfigError::setting(
                ROOTS,
                "the server started in /, which is never taken as an implicit root; set the \
                 directories callers may work in explicitly",
            ));
        }
        vec![start_dir.to_path_buf()]
    } else {
        given.iter().map(PathBuf::from).collect()
    };
    let mut roots = Vec::with_capacity(candidates.len());
    for c in candidates {
        if !c.is_absolute() {
            return Err(ConfigError::setting(
                ROOTS,
                format!("`{}` is not an absolute path", c.display()),
            ));
        }
        let canon = std::fs::canonicalize(&c).map_err(|_| {
            ConfigError::setting(ROOTS, format!("`{}` does not exist", c.display()))
        })?;
        if !canon.is_dir() {
            return Err(ConfigError::setting(
                ROOTS,
                format!("`{}` is not a directory", c.display()),
            ));
        }
        if !roots.contains(&canon) {
            roots.push(canon);
        }
    }
    Ok(roots)
}

/// Resolve a bare program name against PATH; paths with a `/` are returned as given.
pub fn find_on_path(program: &Path, path_var: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.components().count() > 1 || program.is_absolute() {
        return None;
    }
    path_var?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::super::file::parse_config_file;
    use super::*;

    fn vars() -> Vec<(String, String)> {
        vec![("HOME".into(), "/home/u".into())]
    }

    #[test]
    fn defaults_are_documented_values() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::from_settings(&Settings::default(), dir.path(), &vars()).unwrap();
        assert_eq!(c.roots, vec![dir.path().canonicalize().unwrap()]);
        assert_eq!(
            c.store_dir,
            PathBuf::from("/home/u/.local/share/codex-mcp-bridge")
        );
        assert!(!c.allow_danger);
        assert_eq!(c.max_concurrent, 4);
        assert_eq!(c.default_timeout, Duration::from_secs(600));
        assert_eq!(c.max_timeout, Duration::from_secs(3600));
        assert_eq!(c.codex_bin, PathBuf::from("codex"));
    }

    #[test]
    fn slash_is_never_an_implicit_root() {
        let err = Config::from_settings(&Settings::default(), Path::new("/"), &vars()).unwrap_err();
        assert!(err.to_string().contains("CODEX_BRIDGE_ROOTS"), "{err}");
        let s = Settings {
            roots: Some("/".into()),
            ..Default::default()
        };
        assert_eq!(
            Config::from_settings(&s, Path::new("/"), &vars())
                .unwrap()
                .roots,
            vec![PathBuf::from("/")]
        );
    }

    #[test]
    fn invalid_settings_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(Settings, &str)> = vec![
            (
                Settings {
                    roots: Some("relative".into()),
                    ..Default::default()
                },
                "CODEX_BRIDGE_ROOTS",
            ),
            (
                Settings {
                    roots: Some("/definitely/not/here".into()),
                    ..Default::default()
                },
                "CODEX_BRIDGE_ROOTS",
            ),
            (
                Settings {
                    max_concurrent: Some(0),
                    ..Default::default()
                },
                "CODEX_BRIDGE_MAX_CONCURRENT",
            ),
            (
                Settings {
                    default_timeout_ms: Some(10),
                    ..Default::default()
                },
                "CODEX_BRIDGE_DEFAULT_TIMEOUT_MS",
            ),
            (
                Settings {
                    default_timeout_ms: Some(5000),
                    max_timeout_ms: Some(2000),
                    ..Default::default()
                },
                "CODEX_BRIDGE_MAX_TIMEOUT_MS",
            ),
            (
                Settings {
                    codex_config: vec!["approvals_reviewer=\"auto_review\"".into()],
                    ..Default::default()
                },
                "CODEX_BRIDGE_CODEX_CONFIG",
            ),
            (
                Settings {
                    store: Some("rel".into()),
                    ..Default::default()
                },
                "CODEX_BRIDGE_STORE",
            ),
            (
                Settings {
                    max_line_bytes: Some(1),
                    ..Default::default()
                },
                "CODEX_BRIDGE_MAX_LINE_BYTES",
            ),
        ];
        for (s, name) in cases {
            let err = Config::from_settings(&s, dir.path(), &vars())
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{name}: {err}");
        }
    }

    #[test]
    fn codex_cli_path_is_accepted_as_the_reference_bridge_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars();
        v.push(("CODEX_CLI_PATH".into(), "/opt/codex".into()));
        let c = Config::from_settings(&Settings::default(), dir.path(), &v).unwrap();
        assert_eq!(c.codex_bin, PathBuf::from("/opt/codex"));
        let s = Settings {
            codex_bin: Some("/x/codex".into()),
            ..Default::default()
        };
        assert_eq!(
            Config::from_settings(&s, dir.path(), &v).unwrap().codex_bin,
            PathBuf::from("/x/codex")
        );
    }

    #[test]
    fn timeouts_are_capped_and_zero_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::from_settings(&Settings::default(), dir.path(), &vars()).unwrap();
        assert_eq!(c.timeout_for(None).unwrap(), Duration::from_secs(600));
        assert_eq!(
            c.timeout_for(Some(5_000_000)).unwrap(),
            Duration::from_secs(3600)
        );
        assert!(
            c.timeout_for(Some(0))
                .unwrap_err()
                .to_string()
                .contains("`timeout`")
        );
    }

    /// Precedence flag > env > file > default: clap gives flag > env (a value it found either
    /// way is `Some`); the file fills only what clap left unset; `Config` applies the default.
    #[test]
    fn precedence_is_flag_then_env_then_file_then_default() {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: Settings,
        }
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let file = parse_config_file(
            Path::new("/c.toml"),
            "max_concurrent = 3\nheartbeat_ms = 700\ncodex_config = [\"a=1\"]\nidle_timeout_ms = 5000\n",
        )
        .unwrap();
        // flags (they win over any environment variable, so this holds whatever the test's
        // environment is)
        let parsed = P::try_parse_from(["x", "--max-concurrent", "7", "--codex-config", "b=2"])
            .unwrap()
            .s;
        let mut flags = Settings {
            max_concurrent: parsed.max_concurrent,
            codex_config: parsed.codex_config,
            // what clap gives for a value found only in the environment: also `Some`
            heartbeat_ms: Some(900),
            ..Default::default()
        };
        flags.fill_from(&file.settings);
        let c = Config::from_settings(&flags, dir.path(), &vars()).unwrap();
        assert_eq!(c.max_concurrent, 7, "flag over file");
        assert_eq!(c.heartbeat, Duration::from_millis(900), "env over file");
        assert_eq!(
            c.idle_timeout,
            Duration::from_millis(5000),
            "file over default"
        );
        assert_eq!(
            c.default_timeout,
            Duration::from_millis(DEFAULT_TIMEOUT_MS),
            "default"
        );
        assert_eq!(
            c.codex_overrides.len(),
            1,
            "a flag's -c list replaces the file's"
        );
        // nothing given anywhere: the file's values
        let mut none = Settings::default();
        none.fill_from(&file.settings);
        let c = Config::from_settings(&none, dir.path(), &vars()).unwrap();
        assert_eq!(c.max_concurrent, 3);
        assert_eq!(c.codex_overrides.len(), 1);
    }

    #[test]
    fn the_bridges_own_files_are_the_config_files_the_store_and_the_codex_binary() {
        use crate::security::paths::OwnKind;
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars();
        v.push(("CODEX_BRIDGE_CONFIG".into(), "/etc/cmb/../cmb.toml".into()));
        let s = Settings {
            codex_bin: Some("bin/codex".into()),
            store: Some("/data/store".into()),
            ..Default::default()
        };
        let c = Config::from_settings(&s, dir.path(), &v).unwrap();
        let got: Vec<(OwnKind, PathBuf)> = c
            .own_files
            .iter()
            .map(|f| (f.kind, f.path.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (OwnKind::ConfigFile, PathBuf::from("/etc/cmb.toml")),
                (
                    OwnKind::ConfigFile,
                    PathBuf::from("/home/u/.config/codex-mcp-bridge/config.toml")
                ),
                (OwnKind::Store, PathBuf::from("/data/store")),
                (OwnKind::CodexBin, dir.path().join("bin/codex")),
            ]
        );
        // `--config` wins over the variable; a bare `codex` not on PATH names no file
        let s = Settings {
            config_file: Some("/flag.toml".into()),
            ..Default::default()
        };
        let c = Config::from_settings(&s, dir.path(), &vars()).unwrap();
        assert_eq!(c.own_files[0].path, PathBuf::from("/flag.toml"));
        assert!(c.own_files.iter().all(|f| f.kind != OwnKind::CodexBin));
    }

    #[test]
    fn the_store_dir_helper_agrees_with_config() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars();
        v.push(("XDG_DATA_HOME".into(), "/xdg".into()));
        let c = Config::from_settings(&Settings::default(), dir.path(), &v).unwrap();
        assert_eq!(store_dir(&Settings::default(), &v).unwrap(), c.store_dir);
        assert_eq!(c.store_dir, PathBuf::from("/xdg/codex-mcp-bridge"));
        assert!(store_dir(&Settings::default(), &[]).is_err());
    }

    #[test]
    fn worktrees_go_beside_the_store_by_default_and_never_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars();
        v.push(("XDG_DATA_HOME".into(), "/xdg".into()));
        let c = Config::from_settings(&Settings::default(), dir.path(), &v).unwrap();
        assert_eq!(
            c.worktrees_dir,
            PathBuf::from("/xdg/codex-mcp-bridge-worktrees")
        );
        for (bad, why) in [
            ("/xdg/codex-mcp-bridge/worktrees", "inside the store"),
            ("worktrees", "absolute"),
        ] {
            let s = Settings {
                worktrees: Some(PathBuf::from(bad)),
                ..Settings::default()
            };
            let err = Config::from_settings(&s, dir.path(), &v)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("CODEX_BRIDGE_WORKTREES") && err.contains(why),
                "{err}"
            );
        }
        let s = Settings {
            worktrees: Some(PathBuf::from("/etc/bridge")),
            config_file: Some(PathBuf::from("/etc/bridge/config.toml")),
            ..Settings::default()
        };
        let err = Config::from_settings(&s, dir.path(), &v)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a config file inside the worktree"), "{err}");
    }

    #[test]
    fn the_short_http_token_message_survives_its_own_redaction() {
        let err = http_config(Some("127.0.0.1:8765"), Some("short"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            crate::security::redact::Redactor::default().redact(&err),
            err,
            "redaction changes the message"
        );
        assert_eq!(
            err,
            "invalid setting CODEX_BRIDGE_HTTP_TOKEN (the HTTP listener's bearer token): must be \
             at least 32 printable ASCII characters, without spaces"
        );
    }
}
