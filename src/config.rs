//! Operator settings: read once at server start (flags, each with an environment variable, and
//! the config file for what neither gave), validated into one typed [`Config`]. Never per call.
//! An invalid setting fails the start with a message naming the setting.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::invalid::InvalidArgument;
use crate::logging::LogFormat;
use crate::security::overrides::{Override, parse_operator_override};

pub use error::{CONFIG_FILE_KEYS, CONFIG_SETTING, ConfigError};

pub mod error;

/// What the settings refuse (a setting, named; the config file), folded into the crate error by
/// the caller's `?`.
type Result<T, E = ConfigError> = std::result::Result<T, E>;

pub use crate::codex::process::Limits;
pub use crate::codex::versions::{NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION};

/// Where a `codex --version` answer falls relative to the supported range
/// [`OLDEST_SUPPORTED_CODEX_VERSION`]..=[`NEWEST_TESTED_CODEX_VERSION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CodexSupport {
    /// Inside the range: the security pins are proven for it.
    Supported,
    /// Newer than the newest tested: it probably works, but nothing has proven the pins hold.
    NewerThanTested,
    /// Older than the oldest supported: the pins are known to rely on newer behaviour.
    OlderThanSupported,
    /// The answer has no `MAJOR.MINOR.PATCH` version in it.
    Unrecognized,
}

impl CodexSupport {
    /// Classifies a `codex --version` answer such as `codex-cli 0.171.0` (the last word is the
    /// version; a pre-release such as `0.172.0-alpha.1` sorts before its release).
    pub fn of(version_output: &str) -> Self {
        let Some(v) = version_output
            .split_whitespace()
            .last()
            .and_then(parse_version)
        else {
            return Self::Unrecognized;
        };
        let oldest = parse_version(OLDEST_SUPPORTED_CODEX_VERSION).expect("a valid constant");
        let newest = parse_version(NEWEST_TESTED_CODEX_VERSION).expect("a valid constant");
        if v < oldest {
            Self::OlderThanSupported
        } else if v > newest {
            Self::NewerThanTested
        } else {
            Self::Supported
        }
    }
}

/// `MAJOR.MINOR.PATCH[-PRE]` as a sortable key: the three numbers, then 0 for a pre-release and
/// 1 for a release (pre-releases of one version are not ordered among themselves).
fn parse_version(v: &str) -> Option<(u64, u64, u64, u8)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let (core, release) = match v.split_once('-') {
        Some((core, pre)) if !pre.is_empty() => (core, 0),
        Some(_) => return None,
        None => (v, 1),
    };
    let mut parts = core.split('.').map(|n| {
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse::<u64>().ok())
            .flatten()
    });
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    parts
        .next()
        .is_none()
        .then_some((major, minor, patch, release))
}

/// Operator settings as given (clap flags with environment equivalents).
#[derive(Debug, Clone, Default, clap::Args, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// The codex binary (default: `codex` on PATH). CODEX_CLI_PATH is accepted too, as the
    /// reference bridge reads it.
    #[arg(long, env = "CODEX_BIN", value_name = "PATH")]
    pub codex_bin: Option<PathBuf>,

    /// Directories a `workingDirectory` must resolve inside, `:`-separated (default: the
    /// directory the server starts in, unless that is `/`).
    #[arg(long, env = "CODEX_BRIDGE_ROOTS", value_name = "DIR[:DIR...]")]
    pub roots: Option<String>,

    /// Where sessions are stored (default: $XDG_DATA_HOME/codex-mcp-bridge).
    #[arg(long, env = "CODEX_BRIDGE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,

    /// Allow callers to request `danger-full-access` (default: off).
    #[arg(long, env = "CODEX_BRIDGE_ALLOW_DANGER", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_danger: Option<bool>,

    /// Most codex turns running at once, across all sessions (default: 4).
    #[arg(long, env = "CODEX_BRIDGE_MAX_CONCURRENT", value_name = "N")]
    pub max_concurrent: Option<usize>,

    /// Timeout of a turn when the caller gives none, in milliseconds (default: 600000).
    #[arg(long, env = "CODEX_BRIDGE_DEFAULT_TIMEOUT_MS", value_name = "MS")]
    pub default_timeout_ms: Option<u64>,

    /// Largest timeout a caller may ask for, in milliseconds (default: 3600000).
    #[arg(long, env = "CODEX_BRIDGE_MAX_TIMEOUT_MS", value_name = "MS")]
    pub max_timeout_ms: Option<u64>,

    /// Extra `-c key=value` overrides for every codex call (repeatable; in the environment,
    /// one per line). Keys that widen a capability are refused at start.
    #[arg(
        long = "codex-config",
        env = "CODEX_BRIDGE_CODEX_CONFIG",
        value_name = "KEY=VALUE",
        value_delimiter = '\n'
    )]
    pub codex_config: Vec<String>,

    /// Longest JSONL line kept from codex, in bytes (default: 8388608); longer lines are
    /// skipped and counted.
    #[arg(long, env = "CODEX_BRIDGE_MAX_LINE_BYTES", value_name = "BYTES")]
    pub max_line_bytes: Option<usize>,

    /// Most stdout bytes read from one turn before it is stopped (default: 67108864).
    #[arg(long, env = "CODEX_BRIDGE_MAX_OUTPUT_BYTES", value_name = "BYTES")]
    pub max_output_bytes: Option<usize>,

    /// How long a call may wait for a free codex slot, in milliseconds (default: 600000).
    #[arg(long, env = "CODEX_BRIDGE_QUEUE_TIMEOUT_MS", value_name = "MS")]
    pub queue_timeout_ms: Option<u64>,

    /// How long an idle session stays in memory, in milliseconds (default: 900000); it comes
    /// back from the store on its next call.
    #[arg(long, env = "CODEX_BRIDGE_IDLE_TIMEOUT_MS", value_name = "MS")]
    pub idle_timeout_ms: Option<u64>,

    /// Nested MCP servers from codex's config on `codex`, `structured` and `review` calls:
    /// `keep` (default) or `disable` (every non-required one). `query` and `search` always
    /// disable them.
    #[arg(
        long,
        env = "CODEX_BRIDGE_NESTED_MCP",
        value_name = "POLICY",
        value_enum
    )]
    pub nested_mcp: Option<NestedMcp>,

    /// How a session's turns run: `app-server` (default: each live session keeps a `codex
    /// app-server` process with its thread loaded) or `exec` (a `codex exec` process per turn).
    #[arg(long, env = "CODEX_BRIDGE_BACKEND", value_name = "BACKEND", value_enum)]
    pub backend: Option<Backend>,

    /// Most warm `codex app-server` processes at once (default: 16); past it the least
    /// recently used idle one is closed. Each costs about 23 MB PSS.
    #[arg(long, env = "CODEX_BRIDGE_MAX_WARM", value_name = "N")]
    pub max_warm: Option<usize>,

    /// Most calls waiting behind a session's running turn (default: 16); one more is refused
    /// as busy.
    #[arg(long, env = "CODEX_BRIDGE_MAX_QUEUED_TURNS", value_name = "N")]
    pub max_queued_turns: Option<usize>,

    /// Most prompt bytes held by the calls waiting on one session (default: 16777216); a call
    /// that would pass it is refused as busy.
    #[arg(
        long,
        env = "CODEX_BRIDGE_MAX_QUEUED_PROMPT_BYTES",
        value_name = "BYTES"
    )]
    pub max_queued_prompt_bytes: Option<usize>,
    /// Codex's approval requests (escalations, file changes, permissions, questions): `decline`
    /// (default: every one is declined at once) or `ask` (the person behind an MCP client that
    /// declared form elicitation is asked, once per request; anything but their accept is a
    /// decline).
    #[arg(
        long,
        env = "CODEX_BRIDGE_APPROVALS",
        value_name = "POLICY",
        value_enum
    )]
    pub approvals: Option<ApprovalMode>,
    /// How long a person has to answer one of codex's questions under `approvals = ask`, in
    /// milliseconds (default: 120000; at most 600000). No answer in time is a decline.
    #[arg(long, env = "CODEX_BRIDGE_APPROVAL_TIMEOUT_MS", value_name = "MS")]
    pub approval_timeout_ms: Option<u64>,

    /// Interval of progress heartbeats while Codex is quiet, in milliseconds (default: 10000).
    #[arg(long, env = "CODEX_BRIDGE_HEARTBEAT_MS", value_name = "MS")]
    pub heartbeat_ms: Option<u64>,

    /// Forget sessions unused for this many days (default: 30; 0 keeps them forever).
    #[arg(long, env = "CODEX_BRIDGE_SESSION_TTL_DAYS", value_name = "DAYS")]
    pub session_ttl_days: Option<u64>,

    /// Also serve MCP over Streamable HTTP on this loopback address (`127.0.0.1:PORT` or
    /// `[::1]:PORT`), from the process that owns the store; every request must carry
    /// `Authorization: Bearer $CODEX_BRIDGE_HTTP_TOKEN`. Off by default.
    #[arg(long, env = "CODEX_BRIDGE_HTTP_LISTEN", value_name = "ADDR")]
    pub http_listen: Option<String>,

    /// The config file named by `--config`/`CODEX_BRIDGE_CONFIG` (set from the command line,
    /// not a setting of its own): one of the bridge's own files, which no writable turn may
    /// run next to.
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<PathBuf>,
}

/// What happens to the nested MCP servers of codex's config on `codex`, `structured` and
/// `review` calls (`query` and `search` always disable them). Each value is spelled once, here:
/// clap parses the flag and the environment variable with it, the config file's key goes
/// through it too (and the hello line, by serde with the same names), and its error lists these
/// names.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NestedMcp {
    /// Keep them (the default).
    #[default]
    Keep,
    /// Disable every non-required one.
    Disable,
}

/// How a session's turns run. Spelled once, like [`NestedMcp`].
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// A `codex exec` (or `exec resume`) process per turn.
    Exec,
    /// A warm `codex app-server` process per live session, its thread loaded (the default).
    #[default]
    AppServer,
}

/// The value's one spelling (`exec`, `app-server`), from its clap name.
impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match clap::ValueEnum::to_possible_value(self) {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

/// The value's one spelling (`keep`, `disable`), from its clap name.
impl std::fmt::Display for NestedMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match clap::ValueEnum::to_possible_value(self) {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

/// What happens to codex's approval requests (and its questions). Spelled once, here, as
/// [`NestedMcp`] is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Decline every one at once (the default).
    #[default]
    Decline,
    /// Ask the person behind the client connection that started the turn (MCP elicitation).
    Ask,
}

/// The value's one spelling (`decline`, `ask`), from its clap name.
impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match clap::ValueEnum::to_possible_value(self) {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

/// The accepted values of a [`clap::ValueEnum`], for a message: "`a` or `b`".
fn one_of<E: clap::ValueEnum>() -> String {
    let names: Vec<String> = E::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| format!("`{}`", p.get_name()))
        .collect();
    names.join(" or ")
}

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
        Ok(Config {
            codex_bin,
            roots,
            store_dir,
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
    let longest = crate::question::LONGEST_WAIT;
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

// ---------------------------------------------------------------------------------------------
// The config file

/// Where the config file is looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigLocation {
    pub path: PathBuf,
    /// Named by `--config`/`CODEX_BRIDGE_CONFIG`: it must exist. The default one may be absent.
    pub explicit: bool,
}

/// What a config file sets.
#[derive(Debug, Clone, Default)]
pub struct FileSettings {
    /// The operator settings the file sets (`None`/empty: not set there).
    pub settings: Settings,
    pub log_format: Option<LogFormat>,
}

/// The config file: `explicit` (from `--config`/`CODEX_BRIDGE_CONFIG`) when given and not empty,
/// else `$XDG_CONFIG_HOME/codex-mcp-bridge/config.toml` (an absolute XDG_CONFIG_HOME), else
/// `$HOME/.config/codex-mcp-bridge/config.toml`; `None` when neither variable is set.
pub fn config_location(
    explicit: Option<&Path>,
    vars: &[(String, String)],
) -> Option<ConfigLocation> {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Some(ConfigLocation {
            path: p.to_path_buf(),
            explicit: true,
        });
    }
    let var = |k: &str| {
        vars.iter()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| v.as_str())
    };
    let dir = match (var("XDG_CONFIG_HOME"), var("HOME")) {
        (Some(x), _) if x.starts_with('/') => PathBuf::from(x),
        (_, Some(h)) => PathBuf::from(h).join(".config"),
        _ => return None,
    };
    Some(ConfigLocation {
        path: dir.join("codex-mcp-bridge").join("config.toml"),
        explicit: false,
    })
}

/// Read the config file at `loc`: `None` when it is the default one and absent. An explicit
/// file that is missing, a file that is not TOML, an unknown key or a value of the wrong type
/// is an error naming the file (and the key); values are never echoed.
pub fn read_config_file(loc: &ConfigLocation) -> Result<Option<FileSettings>, ConfigError> {
    let text = match std::fs::read_to_string(&loc.path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !loc.explicit => return Ok(None),
        Err(source) => {
            return Err(ConfigError::FileUnreadable {
                path: loc.path.clone(),
                source,
            });
        }
    };
    parse_config_file(&loc.path, &text).map(Some)
}

/// A string or an array of strings (`roots`, `codex_config`).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// The config file's keys: serde refuses any other and any value of the wrong type; the
/// error is rebuilt from the key alone ([`wrong_type`]), as serde's own words quote the value.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    codex_bin: Option<PathBuf>,
    roots: Option<OneOrMany>,
    store: Option<PathBuf>,
    allow_danger: Option<bool>,
    max_concurrent: Option<usize>,
    default_timeout_ms: Option<u64>,
    max_timeout_ms: Option<u64>,
    codex_config: Option<OneOrMany>,
    max_line_bytes: Option<usize>,
    max_output_bytes: Option<usize>,
    queue_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    nested_mcp: Option<String>,
    backend: Option<String>,
    max_warm: Option<usize>,
    max_queued_turns: Option<usize>,
    max_queued_prompt_bytes: Option<usize>,
    approvals: Option<String>,
    approval_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    session_ttl_days: Option<u64>,
    http_listen: Option<String>,
    log_format: Option<String>,
}

/// What a key's value must be, for the error about a value of the wrong type.
fn expected(key: &str) -> String {
    match key {
        "roots" | "codex_config" => "a string or an array of strings".into(),
        "allow_danger" => "true or false".into(),
        "log_format" => one_of::<LogFormat>(),
        "nested_mcp" => one_of::<NestedMcp>(),
        "backend" => one_of::<Backend>(),
        "approvals" => one_of::<ApprovalMode>(),
        "max_concurrent"
        | "default_timeout_ms"
        | "max_timeout_ms"
        | "max_line_bytes"
        | "max_output_bytes"
        | "queue_timeout_ms"
        | "idle_timeout_ms"
        | "heartbeat_ms"
        | "session_ttl_days"
        | "max_warm"
        | "max_queued_turns"
        | "max_queued_prompt_bytes"
        | "approval_timeout_ms" => "a non-negative integer".into(),
        _ => "a string".into(),
    }
}

/// Parse a config file's text (`path` only names it in errors).
pub fn parse_config_file(path: &Path, text: &str) -> Result<FileSettings, ConfigError> {
    let keys = read_keys(path, text)?;
    let log_format = value_of::<LogFormat>(path, "log_format", keys.log_format)?;
    let nested_mcp = value_of::<NestedMcp>(path, "nested_mcp", keys.nested_mcp)?;
    let backend = value_of::<Backend>(path, "backend", keys.backend)?;
    let approvals = value_of::<ApprovalMode>(path, "approvals", keys.approvals)?;
    Ok(FileSettings {
        settings: Settings {
            codex_bin: keys.codex_bin,
            roots: keys.roots.map(|r| r.into_vec().join(":")),
            store: keys.store,
            allow_danger: keys.allow_danger,
            max_concurrent: keys.max_concurrent,
            default_timeout_ms: keys.default_timeout_ms,
            max_timeout_ms: keys.max_timeout_ms,
            codex_config: keys
                .codex_config
                .map(OneOrMany::into_vec)
                .unwrap_or_default(),
            max_line_bytes: keys.max_line_bytes,
            max_output_bytes: keys.max_output_bytes,
            queue_timeout_ms: keys.queue_timeout_ms,
            idle_timeout_ms: keys.idle_timeout_ms,
            nested_mcp,
            backend,
            max_warm: keys.max_warm,
            max_queued_turns: keys.max_queued_turns,
            max_queued_prompt_bytes: keys.max_queued_prompt_bytes,
            approvals,
            approval_timeout_ms: keys.approval_timeout_ms,
            heartbeat_ms: keys.heartbeat_ms,
            session_ttl_days: keys.session_ttl_days,
            http_listen: keys.http_listen,
            config_file: None,
        },
        log_format,
    })
}

/// A config file's keys: TOML, every key known, each value of its key's type.
fn read_keys(path: &Path, text: &str) -> Result<FileKeys, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::NotToml {
        path: path.to_path_buf(),
        line: e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
        message: e.message().to_owned(),
    })?;
    // an unknown key first, by name (serde's error for it carries no path to the key)
    if let Some(key) = table
        .keys()
        .find(|k| !CONFIG_FILE_KEYS.contains(&k.as_str()))
    {
        return Err(ConfigError::UnknownKey {
            path: path.to_path_buf(),
            key: key.clone(),
        });
    }
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        match e.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => wrong_type(path, key),
            _ => wrong_type(path, &e.path().to_string()),
        }
    })
}

/// The error about `key`'s value in the config file at `path`: not of the key's type.
fn wrong_type(path: &Path, key: &str) -> ConfigError {
    ConfigError::WrongType {
        path: path.to_path_buf(),
        key: key.to_owned(),
        expected: expected(key),
    }
}

/// `key`'s value as one of a fixed value set, spelled as on the command line.
fn value_of<T: clap::ValueEnum>(
    path: &Path,
    key: &str,
    value: Option<String>,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|v| T::from_str(&v, false).map_err(|_| wrong_type(path, key)))
        .transpose()
}

impl Settings {
    /// Fill every setting clap left unset (neither flag nor environment variable) from the
    /// config file's: so the precedence is flag > environment > file > default.
    pub fn fill_from(&mut self, file: &Settings) {
        // destructured so that a new setting cannot be forgotten here
        let Settings {
            codex_bin,
            roots,
            store,
            allow_danger,
            max_concurrent,
            default_timeout_ms,
            max_timeout_ms,
            codex_config,
            max_line_bytes,
            max_output_bytes,
            queue_timeout_ms,
            idle_timeout_ms,
            nested_mcp,
            backend,
            max_warm,
            max_queued_turns,
            max_queued_prompt_bytes,
            approvals,
            approval_timeout_ms,
            heartbeat_ms,
            session_ttl_days,
            http_listen,
            // not read from a file
            config_file: _,
        } = file;
        fn or<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
        or(&mut self.codex_bin, codex_bin);
        or(&mut self.roots, roots);
        or(&mut self.store, store);
        or(&mut self.allow_danger, allow_danger);
        or(&mut self.max_concurrent, max_concurrent);
        or(&mut self.default_timeout_ms, default_timeout_ms);
        or(&mut self.max_timeout_ms, max_timeout_ms);
        if self.codex_config.is_empty() {
            self.codex_config.clone_from(codex_config);
        }
        or(&mut self.max_line_bytes, max_line_bytes);
        or(&mut self.max_output_bytes, max_output_bytes);
        or(&mut self.queue_timeout_ms, queue_timeout_ms);
        or(&mut self.idle_timeout_ms, idle_timeout_ms);
        or(&mut self.nested_mcp, nested_mcp);
        or(&mut self.backend, backend);
        or(&mut self.max_warm, max_warm);
        or(&mut self.max_queued_turns, max_queued_turns);
        or(&mut self.max_queued_prompt_bytes, max_queued_prompt_bytes);
        or(&mut self.approvals, approvals);
        or(&mut self.approval_timeout_ms, approval_timeout_ms);
        or(&mut self.heartbeat_ms, heartbeat_ms);
        or(&mut self.session_ttl_days, session_ttl_days);
        or(&mut self.http_listen, http_listen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vec<(String, String)> {
        vec![("HOME".into(), "/home/u".into())]
    }

    #[test]
    fn codex_versions_are_classified_against_the_supported_range() {
        use CodexSupport::*;
        for (answer, want) in [
            ("codex-cli 0.145.0", Supported),
            ("codex-cli 0.171.0", Supported),
            ("codex-cli 0.160.3", Supported),
            ("0.171.0", Supported),
            ("codex-cli 0.144.9", OlderThanSupported),
            ("codex-cli 0.145.0-alpha.2", OlderThanSupported),
            ("codex-cli 0.9.0", OlderThanSupported),
            ("codex-cli 0.171.1", NewerThanTested),
            ("codex-cli 0.172.0-alpha.1", NewerThanTested),
            ("codex-cli 1.0.0", NewerThanTested),
            ("codex-cli 0.1710.0", NewerThanTested),
            ("codex-cli", Unrecognized),
            ("", Unrecognized),
            ("codex-cli 0.171", Unrecognized),
            ("codex-cli 0.171.0.1", Unrecognized),
            ("codex-cli 0.171.x", Unrecognized),
            ("codex-cli 0.171.0-", Unrecognized),
            ("codex-cli +1.2.3", Unrecognized),
        ] {
            assert_eq!(CodexSupport::of(answer), want, "{answer:?}");
        }
        assert_eq!(CodexSupport::of(OLDEST_SUPPORTED_CODEX_VERSION), Supported);
        assert_eq!(CodexSupport::of(NEWEST_TESTED_CODEX_VERSION), Supported);
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

    #[test]
    fn the_readme_settings_table_lists_every_setting() {
        use clap::Args;
        let readme = include_str!("../README.md");
        let cmd = Settings::augment_args(clap::Command::new("x"));
        for a in cmd.get_arguments() {
            let env = a
                .get_env()
                .and_then(|e| e.to_str())
                .expect("every setting has an environment variable");
            assert!(
                readme.contains(&format!("`{env}`")),
                "README.md lacks {env}"
            );
            let long = a.get_long().expect("every setting has a flag");
            assert!(
                readme.contains(&format!("`--{long}`")),
                "README.md lacks --{long}"
            );
        }
    }

    #[test]
    fn the_config_file_keys_are_the_settings_names() {
        use clap::Args;
        let cmd = Settings::augment_args(clap::Command::new("x"));
        let mut ids: Vec<&str> = cmd.get_arguments().map(|a| a.get_id().as_str()).collect();
        ids.push("log_format");
        ids.sort_unstable();
        let mut keys = CONFIG_FILE_KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(ids, keys);
    }

    const FULL_FILE: &str = r#"
codex_bin = "/opt/codex"
roots = "/a:/b"
store = "/var/lib/bridge"
allow_danger = true
max_concurrent = 3
default_timeout_ms = 5000
max_timeout_ms = 9000
codex_config = ["model=\"o3\"", "k=v"]
max_line_bytes = 10000
max_queued_turns = 5
max_queued_prompt_bytes = 4096
max_output_bytes = 20000
queue_timeout_ms = 1000
idle_timeout_ms = 2000
nested_mcp = "disable"
approvals = "ask"
heartbeat_ms = 500
log_format = "json"
"#;

    #[test]
    fn a_bad_nested_mcp_value_names_the_key_and_the_accepted_values() {
        let err = parse_config_file(Path::new("/c.toml"), "nested_mcp = \"drop\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nested_mcp"), "{err}");
        assert!(err.contains("`keep` or `disable`"), "{err}");
        assert!(!err.contains("drop"), "the value is never echoed: {err}");
        for v in [NestedMcp::Keep, NestedMcp::Disable] {
            let text = format!("nested_mcp = \"{v}\"");
            let f = parse_config_file(Path::new("/c.toml"), &text).unwrap();
            assert_eq!(f.settings.nested_mcp, Some(v));
        }
    }

    #[test]
    fn approvals_default_to_decline_and_a_bad_value_names_the_key() {
        assert_eq!(ApprovalMode::default(), ApprovalMode::Decline);
        let err = parse_config_file(Path::new("/c.toml"), "approvals = \"always\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("approvals"), "{err}");
        assert!(err.contains("`decline` or `ask`"), "{err}");
        assert!(!err.contains("always"), "the value is never echoed: {err}");
        for v in [ApprovalMode::Decline, ApprovalMode::Ask] {
            let text = format!("approvals = \"{v}\"");
            let f = parse_config_file(Path::new("/c.toml"), &text).unwrap();
            assert_eq!(f.settings.approvals, Some(v));
        }
    }

    #[test]
    fn a_config_file_sets_every_setting() {
        let f = parse_config_file(Path::new("/c.toml"), FULL_FILE).unwrap();
        let s = &f.settings;
        assert_eq!(s.codex_bin, Some(PathBuf::from("/opt/codex")));
        assert_eq!(s.roots.as_deref(), Some("/a:/b"));
        assert_eq!(s.store, Some(PathBuf::from("/var/lib/bridge")));
        assert_eq!(s.allow_danger, Some(true));
        assert_eq!(s.max_concurrent, Some(3));
        assert_eq!(s.default_timeout_ms, Some(5000));
        assert_eq!(s.max_timeout_ms, Some(9000));
        assert_eq!(s.codex_config, vec!["model=\"o3\"", "k=v"]);
        assert_eq!(s.max_line_bytes, Some(10000));
        assert_eq!(s.max_queued_turns, Some(5));
        assert_eq!(s.max_queued_prompt_bytes, Some(4096));
        assert_eq!(s.max_output_bytes, Some(20000));
        assert_eq!(s.queue_timeout_ms, Some(1000));
        assert_eq!(s.idle_timeout_ms, Some(2000));
        assert_eq!(s.nested_mcp, Some(NestedMcp::Disable));
        assert_eq!(s.approvals, Some(ApprovalMode::Ask));
        assert_eq!(s.heartbeat_ms, Some(500));
        assert_eq!(f.log_format, Some(LogFormat::Json));
        // roots may also be an array
        let f = parse_config_file(Path::new("/c.toml"), "roots = [\"/a\", \"/b\"]").unwrap();
        assert_eq!(f.settings.roots.as_deref(), Some("/a:/b"));
    }

    #[test]
    fn config_file_errors_name_the_file_and_the_key_and_never_the_value() {
        let path = Path::new("/etc/bridge.toml");
        let err = parse_config_file(path, "roots = \"/a\"\nmax_concurent = 4\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`max_concurent`")
                && err.contains("/etc/bridge.toml")
                && err.contains("unknown key")
                && err.contains("max_concurrent"),
            "{err}"
        );
        let err = parse_config_file(path, "max_concurrent = \"sk-secret-value\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`max_concurrent`") && err.contains("/etc/bridge.toml"),
            "{err}"
        );
        assert!(!err.contains("sk-secret-value"), "{err}");
        let err = parse_config_file(path, "roots = \"/a\"\nthis is not toml = [\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/etc/bridge.toml") && err.contains("line 2"),
            "{err}"
        );
        assert!(!err.contains("this is not"), "{err}");
        let err = parse_config_file(path, "[server]\nroots = \"/a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `server`"), "{err}");
        let err = parse_config_file(path, "log_format = \"xml\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`log_format`"), "{err}");
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
    fn the_config_file_is_looked_for_under_xdg_config_home_then_home() {
        let v = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let loc = config_location(None, &v(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            loc.path,
            PathBuf::from("/h/.config/codex-mcp-bridge/config.toml")
        );
        assert!(!loc.explicit);
        let loc = config_location(None, &v(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")])).unwrap();
        assert_eq!(loc.path, PathBuf::from("/x/codex-mcp-bridge/config.toml"));
        // a relative XDG_CONFIG_HOME is ignored, as the XDG spec says
        let loc = config_location(None, &v(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")])).unwrap();
        assert_eq!(
            loc.path,
            PathBuf::from("/h/.config/codex-mcp-bridge/config.toml")
        );
        let loc = config_location(Some(Path::new("/e.toml")), &v(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            loc,
            ConfigLocation {
                path: "/e.toml".into(),
                explicit: true
            }
        );
        assert!(config_location(None, &[]).is_none());
        // an absent default file is fine; an absent explicit one is not
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        let default = ConfigLocation {
            path: missing.clone(),
            explicit: false,
        };
        assert!(read_config_file(&default).unwrap().is_none());
        let explicit = ConfigLocation {
            path: missing,
            explicit: true,
        };
        let err = read_config_file(&explicit).unwrap_err().to_string();
        assert!(
            err.contains("CODEX_BRIDGE_CONFIG") && err.contains("none.toml"),
            "{err}"
        );
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
