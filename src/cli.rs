//! The command line: `serve` (the default), `sessions` (the store, directly), `doctor`
//! (what would stop the server from working here), and the config file that fills the settings
//! no flag or environment variable gave.
//!
//! Only the subcommands that are not the server write to stdout, and only through the writer
//! they are given; the server's stdout is the MCP channel and nothing here touches it.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::{Value, json};

use crate::codex::home::{codex_home, nested_servers};
use crate::codex::process::codex_version;
use crate::config::{
    self, CodexSupport, Config, ConfigLocation, NEWEST_TESTED_CODEX_VERSION,
    OLDEST_SUPPORTED_CODEX_VERSION, Settings, find_on_path, store_dir,
};
use crate::hub::{StoreAnswer, StoreRequest};
use crate::logging::LogFormat;
use crate::security::env::filter_env;
use crate::security::ids::SessionId;
use crate::security::redact::redact;
use crate::store::{SessionRecord, Store, StoreError};

/// A hardened MCP server for the OpenAI Codex CLI: persistent sessions, progress, cancellation.
///
/// Without a subcommand it serves MCP on stdio, like `serve`.
#[derive(Parser)]
#[command(
    name = "codex-mcp-bridge",
    version,
    about,
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Log line format on stderr: `text` (default) or `json`.
    #[arg(
        long,
        env = "CODEX_BRIDGE_LOG_FORMAT",
        value_enum,
        global = true,
        display_order = 1000
    )]
    pub log_format: Option<LogFormat>,
    /// The config file (TOML; keys are the settings' names in snake_case). Default:
    /// $XDG_CONFIG_HOME/codex-mcp-bridge/config.toml, read when present. Flags and
    /// environment variables win over it.
    #[arg(
        long,
        env = "CODEX_BRIDGE_CONFIG",
        value_name = "FILE",
        global = true,
        display_order = 1000
    )]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub settings: Settings,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve MCP on stdio (what running without a subcommand does).
    Serve(Box<Settings>),
    /// The stored sessions: through the running server that owns the store, else from the
    /// store directly.
    Sessions(SessionsArgs),
    /// Check that everything the server needs is in place; one line per check, with a fix.
    Doctor(Box<Settings>),
}

/// `sessions` and its subcommands.
#[derive(Args)]
pub struct SessionsArgs {
    /// Where sessions are stored (default: $XDG_DATA_HOME/codex-mcp-bridge).
    // its own id: a global's value is also recorded in the parent's matches, where `store` is
    // the server's setting
    #[arg(
        id = "sessions_store",
        long = "store",
        env = "CODEX_BRIDGE_STORE",
        value_name = "DIR",
        global = true
    )]
    pub store: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Subcommand)]
pub enum SessionsCommand {
    /// Every stored session, newest first.
    List,
    /// One session's record.
    Show {
        /// The session id.
        id: String,
    },
    /// Forget a session: its record leaves the store (Codex's thread files stay in CODEX_HOME).
    Close {
        /// The session id.
        id: String,
    },
    /// One session's full record, as JSON.
    Export {
        /// The session id.
        id: String,
    },
}

/// The clap command, with environment values hidden from `--help` (a `-c` override in the
/// environment may hold a secret).
pub fn command() -> clap::Command {
    fn hide(cmd: clap::Command) -> clap::Command {
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        let mut cmd = cmd.mut_args(|a| a.hide_env_values(true));
        for s in subs {
            cmd = cmd.mut_subcommand(s, hide);
        }
        cmd
    }
    hide(Cli::command())
}

/// Parse the process's arguments (exits with clap's message and code on a usage error, and
/// for `--help`/`--version`).
pub fn parse() -> Cli {
    try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parse `args`. A setting given before a subcommand (`--store X sessions list`) would be
/// silently ignored by it, so it is refused.
pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    if let Some((sub, _)) = matches.subcommand() {
        let settings = Settings::augment_args(clap::Command::new("settings"));
        for a in settings.get_arguments() {
            if matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine) {
                let flag = a.get_long().unwrap_or_default();
                return Err(cmd.error(
                    ErrorKind::ArgumentConflict,
                    format!(
                        "`--{flag}` before the subcommand `{sub}` would be ignored; give \
                         settings after it (`codex-mcp-bridge {sub} --{flag} ...`)"
                    ),
                ));
            }
        }
    }
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// The process environment as UTF-8 pairs (others are skipped).
pub fn env_vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

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

/// What to run, with settings complete (flag > environment > config file; defaults later).
pub enum Run {
    Serve(Settings),
    Sessions(SessionsArgs, Settings),
    Doctor(Settings),
}

/// The parsed command line merged with the config file.
pub struct Prepared {
    pub log_format: LogFormat,
    pub config_file: ConfigFile,
    pub run: Run,
}

/// Read the config file and fill every setting clap left unset from it.
pub fn prepare(cli: Cli, vars: &[(String, String)]) -> crate::Result<Prepared> {
    let location = config::config_location(cli.config.as_deref(), vars);
    let file = match &location {
        Some(loc) => config::read_config_file(loc)?,
        None => None,
    };
    let config_file = match (location, &file) {
        (Some(ConfigLocation { path, .. }), Some(_)) => ConfigFile::Read(path),
        (Some(ConfigLocation { path, .. }), None) => ConfigFile::Absent(path),
        (None, _) => ConfigFile::NoLocation,
    };
    let fill = |mut s: Settings| {
        if let Some(f) = &file {
            s.fill_from(&f.settings);
        }
        s
    };
    let run = match cli.command {
        None => Run::Serve(fill(cli.settings)),
        Some(Command::Serve(s)) => Run::Serve(fill(*s)),
        Some(Command::Doctor(s)) => Run::Doctor(fill(*s)),
        Some(Command::Sessions(args)) => {
            let s = fill(Settings {
                store: args.store.clone(),
                ..Default::default()
            });
            Run::Sessions(args, s)
        }
    };
    let log_format = cli
        .log_format
        .or(file.and_then(|f| f.log_format))
        .unwrap_or_default();
    Ok(Prepared {
        log_format,
        config_file,
        run,
    })
}

// ---------------------------------------------------------------------------------------------
// sessions

/// A failed subcommand: the message for stderr (the exit code is non-zero).
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn failed(e: impl std::fmt::Display) -> Failed {
    Failed(redact(&e.to_string()).into_owned())
}

/// How long `sessions` looks for the store's owner or the store's lock (a server may be
/// starting, or exiting, at that moment).
const FIND_STORE: std::time::Duration = std::time::Duration::from_secs(5);

/// What `sessions` reached.
enum Reached {
    /// The process that owns the store (a running server) answered.
    Owner(StoreAnswer),
    /// No process owns the store: opened directly.
    Store(Store),
}

/// Ask the store's owner over its socket, or, when no process owns the store, open it
/// directly; `dir` exists.
fn reach(dir: &Path, request: StoreRequest) -> Result<Reached, Failed> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failed(format!("cannot start the runtime: {e}")))?;
    let deadline = std::time::Instant::now() + FIND_STORE;
    loop {
        if let Some(answer) = rt
            .block_on(crate::hub::ask_owner(dir, request.clone()))
            .map_err(failed)?
        {
            return Ok(Reached::Owner(answer));
        }
        match Store::try_open(dir, std::time::Duration::from_millis(200)) {
            Ok(Some(store)) => return Ok(Reached::Store(store)),
            Ok(None) if std::time::Instant::now() < deadline => {}
            Ok(None) => {
                return Err(Failed(format!(
                    "the store at {} is locked by a process that does not answer on its socket \
                     {} there (a codex-mcp-bridge of another version, or another `sessions` \
                     command at this moment); try again, or stop that process",
                    dir.display(),
                    crate::hub::SOCKET_NAME
                )));
            }
            Err(e) => return Err(failed(e)),
        }
    }
}

/// The records of every stored session, newest first.
fn list_all(dir: &Path) -> Result<Vec<SessionRecord>, Failed> {
    match reach(dir, StoreRequest::List)? {
        Reached::Owner(StoreAnswer::Sessions { sessions }) => Ok(sessions),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => {
            let mut all = vec![];
            let mut cursor: Option<String> = None;
            loop {
                let page = store.list(cursor.as_deref(), 500).map_err(failed)?;
                all.extend(page.sessions);
                match page.next {
                    Some(c) => cursor = Some(c),
                    None => return Ok(all),
                }
            }
        }
    }
}

/// One session's record.
fn get(dir: &Path, id: &SessionId) -> Result<Option<SessionRecord>, Failed> {
    match reach(
        dir,
        StoreRequest::Get {
            session_id: id.clone(),
        },
    )? {
        Reached::Owner(StoreAnswer::Session { session }) => Ok(session.map(|s| *s)),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => store.get(id).map_err(failed),
    }
}

/// Close a session; its record, when there was one.
fn close(dir: &Path, id: &SessionId) -> Result<Option<SessionRecord>, Failed> {
    match reach(
        dir,
        StoreRequest::Close {
            session_id: id.clone(),
        },
    )? {
        Reached::Owner(StoreAnswer::Session { session }) => Ok(session.map(|s| *s)),
        Reached::Owner(other) => Err(unexpected(other)),
        Reached::Store(store) => {
            let removed = store.remove(id).map_err(failed)?;
            store.flush_blocking().map_err(failed)?;
            Ok(removed)
        }
    }
}

fn unexpected(answer: StoreAnswer) -> Failed {
    match answer {
        StoreAnswer::Failed { message } => Failed(redact(&message).into_owned()),
        _ => Failed(
            "the codex-mcp-bridge process that owns the store gave an answer that does not fit \
             the request"
                .into(),
        ),
    }
}

/// Run a `sessions` subcommand, writing its output to `out`. While a server owns the store,
/// the subcommands go through it (over the store's socket); otherwise they open the store
/// directly. The output is the same either way.
pub fn sessions(
    args: &SessionsArgs,
    settings: &Settings,
    vars: &[(String, String)],
    out: &mut dyn Write,
) -> Result<(), Failed> {
    let dir = store_dir(settings, vars).map_err(failed)?;
    // a store that does not exist is not created
    let exists = dir.exists();
    let id = |raw: &str| SessionId::parse("ID", raw).map_err(failed);
    let missing = |id: &SessionId| {
        Failed(if exists {
            format!("no session `{id}` in the store at {}", dir.display())
        } else {
            format!(
                "no session `{id}`: there is no store at {} yet",
                dir.display()
            )
        })
    };
    let found = |id: &SessionId| -> Result<SessionRecord, Failed> {
        let rec = if exists { get(&dir, id)? } else { None };
        rec.ok_or_else(|| missing(id))
    };
    let text = match &args.command {
        SessionsCommand::List => {
            let all = if exists { list_all(&dir)? } else { vec![] };
            if args.json {
                json_text(&json!({
                    "store": dir,
                    "sessions": all,
                }))
            } else {
                list_table(&all, &dir, exists)
            }
        }
        SessionsCommand::Show { id: raw } => {
            let rec = found(&id(raw)?)?;
            if args.json {
                json_text(&json!(rec))
            } else {
                show_text(&rec)
            }
        }
        SessionsCommand::Export { id: raw } => json_text(&json!(found(&id(raw)?)?)),
        SessionsCommand::Close { id: raw } => {
            let id = id(raw)?;
            if !exists {
                return Err(missing(&id));
            }
            close(&dir, &id)?.ok_or_else(|| missing(&id))?;
            if args.json {
                json_text(&json!({ "sessionId": id, "closed": true, "store": dir }))
            } else {
                format!("Session {id} closed.\n")
            }
        }
    };
    out.write_all(text.as_bytes()).map_err(failed)
}

/// Pretty JSON with every string redacted (redacting the serialized text could break it).
fn json_text(v: &Value) -> String {
    fn scrub(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(redact(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(scrub).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), scrub(v))).collect())
            }
            other => other.clone(),
        }
    }
    let mut s = serde_json::to_string_pretty(&scrub(v)).unwrap_or_default();
    s.push('\n');
    s
}

fn list_table(all: &[SessionRecord], dir: &Path, exists: bool) -> String {
    if all.is_empty() {
        return if exists {
            format!("No sessions in the store at {}.\n", dir.display())
        } else {
            format!("No sessions: there is no store at {} yet.\n", dir.display())
        };
    }
    let mut rows = vec![vec![
        "SESSION".to_owned(),
        "LAST USED (UTC)".to_owned(),
        "TURNS".to_owned(),
        "STATUS".to_owned(),
        "MODEL".to_owned(),
        "THREAD".to_owned(),
        "WORKING DIRECTORY".to_owned(),
    ]];
    for r in all {
        rows.push(vec![
            r.session_id.to_string(),
            utc(r.last_used_ms),
            r.turn_count.to_string(),
            status(r),
            r.model.clone().unwrap_or_else(|| "-".into()),
            r.thread_id.clone().unwrap_or_else(|| "-".into()),
            r.working_directory.display().to_string(),
        ]);
    }
    let mut text = table(&rows);
    text.push_str(&format!(
        "{} session(s) in the store at {}\n",
        all.len(),
        dir.display()
    ));
    redact(&text).into_owned()
}

fn status(r: &SessionRecord) -> String {
    r.last_status
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "-".into())
}

fn show_text(r: &SessionRecord) -> String {
    let usage = |u: &crate::codex::events::Usage| {
        format!(
            "input {} (cached {}, cache write {}), output {} (reasoning {})",
            u.input_tokens,
            u.cached_input_tokens,
            u.cache_write_input_tokens,
            u.output_tokens,
            u.reasoning_output_tokens
        )
    };
    let dash = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let rows = vec![
        vec!["session".into(), r.session_id.to_string()],
        vec!["thread".into(), dash(&r.thread_id)],
        vec![
            "working directory".into(),
            r.working_directory.display().to_string(),
        ],
        vec!["model".into(), dash(&r.model)],
        vec!["codex home".into(), dash(&r.codex_home)],
        vec!["created (UTC)".into(), utc(r.created_ms)],
        vec!["last used (UTC)".into(), utc(r.last_used_ms)],
        vec!["turns".into(), r.turn_count.to_string()],
        vec!["last status".into(), status(r)],
        vec!["last error".into(), dash(&r.last_error)],
        vec!["usage".into(), usage(&r.usage)],
        vec!["thread usage".into(), usage(&r.thread_usage)],
    ];
    redact(&table(&rows)).into_owned()
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` in UTC.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// ---------------------------------------------------------------------------------------------
// doctor

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

/// What a person who started the server at a terminal reads on stderr: the server speaks MCP on
/// stdin and stdout, so without a client it waits silently.
pub const TERMINAL_HINT: &str = "codex-mcp-bridge: this is an MCP server; it waits for an MCP \
client (Claude Code, Codex, VS Code, the MCP Inspector) to speak JSON-RPC on stdin. Check the \
setup with `codex-mcp-bridge doctor`; leave with Ctrl-D (or Ctrl-C).";

/// The hint to print when the server starts: only when stdin is a terminal (a host's pipe
/// gets nothing extra).
pub fn terminal_hint(stdin_is_terminal: bool) -> Option<&'static str> {
    stdin_is_terminal.then_some(TERMINAL_HINT)
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
        Err(e) => Check::fail(
            "settings",
            e.to_string(),
            "correct the setting named (flag, environment variable or config file)",
        ),
    });
    if let Ok(c) = config {
        checks.push(backend_check(c, vars).await);
    }
    checks.push(store_check(settings, vars));
    checks.push(nested_check(&home));
    checks
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
        Err(e @ StoreError::Refused { .. }) => Check::fail(
            "store",
            e.to_string(),
            "point CODEX_BRIDGE_STORE at a directory of your own with mode 700 (or, if this one \
             is yours, `chmod 700` it)",
        ),
        Err(e) => Check::fail(
            "store",
            e.to_string(),
            "point CODEX_BRIDGE_STORE at a writable directory (or move the broken store aside)",
        ),
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
            match crate::actors::warm::probe(&client.common).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_the_epoch_and_leap_days() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(&[
            vec!["A".into(), "BB".into(), "C".into()],
            vec!["aaa".into(), "b".into(), "c".into()],
        ]);
        assert_eq!(t, "A    BB  C\naaa  b   c\n");
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn settings_before_a_subcommand_are_refused_not_ignored() {
        let err = try_parse_from(["codex-mcp-bridge", "--store", "/x", "sessions", "list"])
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{err}");
        assert!(err.to_string().contains("`--store`"), "{err}");
        // global options go anywhere
        let cli = try_parse_from([
            "codex-mcp-bridge",
            "--log-format",
            "json",
            "--config",
            "/c.toml",
            "doctor",
        ])
        .unwrap();
        assert_eq!(cli.log_format, Some(LogFormat::Json));
        assert_eq!(cli.config, Some(PathBuf::from("/c.toml")));
        assert!(matches!(cli.command, Some(Command::Doctor(_))));
        // settings without a subcommand serve
        let cli = try_parse_from(["codex-mcp-bridge", "--max-concurrent", "2"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.settings.max_concurrent, Some(2));
    }

    #[test]
    fn the_file_fills_what_the_command_line_left_unset() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "max_concurrent = 3\nstore = \"/from/file\"\nlog_format = \"json\"\n",
        )
        .unwrap();
        let cli = try_parse_from([
            "codex-mcp-bridge",
            "--config",
            file.to_str().unwrap(),
            "serve",
            "--max-concurrent",
            "9",
        ])
        .unwrap();
        let p = prepare(cli, &[]).unwrap();
        let Run::Serve(s) = p.run else {
            panic!("serve")
        };
        assert_eq!(s.max_concurrent, Some(9));
        assert!(matches!(p.config_file, ConfigFile::Read(_)));
        // a value from the environment of this test process would be `Some` too; only assert
        // the store when nothing else set it
        if std::env::var_os("CODEX_BRIDGE_STORE").is_none() {
            assert_eq!(s.store, Some(PathBuf::from("/from/file")));
        }
        if std::env::var_os("CODEX_BRIDGE_LOG_FORMAT").is_none() {
            assert_eq!(p.log_format, LogFormat::Json);
        }
        let cli = try_parse_from([
            "codex-mcp-bridge",
            "sessions",
            "--config",
            file.to_str().unwrap(),
            "list",
            "--store",
            "/flag",
        ])
        .unwrap();
        let Run::Sessions(_, s) = prepare(cli, &[]).unwrap().run else {
            panic!("sessions")
        };
        assert_eq!(s.store, Some(PathBuf::from("/flag")));
    }
}
