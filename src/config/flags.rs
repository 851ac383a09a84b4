//! The operator settings as given: [`Settings`], one clap flag with an environment variable
//! each, and the closed value sets of three of them ([`NestedMcp`], [`Backend`],
//! [`ApprovalMode`]), each spelled once for the flag, the variable and the config file.

use std::path::PathBuf;

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

    /// Where sessions that ask for their own git worktree get it (default: beside the store,
    /// `<store>-worktrees`). Never inside the store, never holding it or a config file.
    #[arg(long, env = "CODEX_BRIDGE_WORKTREES", value_name = "DIR")]
    pub worktrees: Option<PathBuf>,

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

    /// Which process owns the session store and runs the turns: `daemon` (default: a small
    /// process of its own, in a session of its own, started on demand and gone once no turn
    /// runs and no client is connected; a task's or a background call's turn outlives the host
    /// that started it) or `process` (the first server process itself; every turn ends with
    /// it).
    #[arg(long, env = "CODEX_BRIDGE_OWNER", value_name = "OWNER", value_enum)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<OwnerMode>,

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

/// Which process owns the store. Spelled once, like [`NestedMcp`].
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
pub enum OwnerMode {
    /// A detached owner process started on demand (the default).
    #[default]
    Daemon,
    /// The first server process on the store.
    Process,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_settings_table_lists_every_setting() {
        use clap::Args;
        let readme = include_str!("../../docs/settings.md");
        let cmd = Settings::augment_args(clap::Command::new("x"));
        for a in cmd.get_arguments() {
            let env = a
                .get_env()
                .and_then(|e| e.to_str())
                .expect("every setting has an environment variable");
            assert!(
                readme.contains(&format!("`{env}`")),
                "docs/settings.md lacks {env}"
            );
            let long = a.get_long().expect("every setting has a flag");
            assert!(
                readme.contains(&format!("`--{long}`")),
                "docs/settings.md lacks --{long}"
            );
        }
    }
}
