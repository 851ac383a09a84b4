//! The command line: `serve` (the default), `sessions` (the store, directly), `doctor`
//! (what would stop the server from working here), and the config file that fills the settings
//! no flag or environment variable gave. This file holds the clap definitions and the
//! dispatch; `sessions.rs` and `doctor.rs` the two subcommands.
//!
//! Only the subcommands that are not the server write to stdout, and only through the writer
//! they are given; the server's stdout is the MCP channel and nothing here touches it.

pub mod doctor;
pub mod entry;
pub mod sessions;
pub mod startup;

use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::error::ConfigError;
use crate::config::{self, ConfigLocation, Settings};
use crate::logging::LogFormat;

pub use doctor::{Check, CodexMissing, ConfigFile, Verdict, doctor, doctor_checks, locate_codex};
pub use sessions::{Failed, SessionsArgs, SessionsCommand, sessions};

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

/// The setting a usage error of the server's command line is about, as a refused setting
/// (issue 38): a host starts the server with its flags and environment, and a value clap
/// refused (`CODEX_BRIDGE_APPROVALS=always`) must reach the host as the server's answer, not
/// as a closed connection. `None` for `--help` and `--version`, and for a command line that
/// names another subcommand (`sessions`, `doctor`: a person at a terminal runs those).
pub fn unstartable(e: &clap::Error, args: &[std::ffi::OsString]) -> Option<ConfigError> {
    use clap::error::{ContextKind, ContextValue};
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return None;
    }
    let other = ["sessions", "doctor", "help"];
    if args.iter().skip(1).any(|a| other.iter().any(|o| a == o)) {
        return None;
    }
    // clap's message, on one line, without its `error: ` and its hint to `--help`
    let rendered = e.render().to_string();
    let reason = rendered
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:")
        })
        .collect::<Vec<_>>()
        .join(" ");
    let reason = reason.strip_prefix("error: ").unwrap_or(&reason).to_owned();
    // `--approvals <POLICY>`: the setting's variable and flag, as every other refusal names it
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.split_whitespace().next().map(str::to_owned),
        _ => None,
    };
    let named = flag
        .as_deref()
        .and_then(|f| f.strip_prefix("--"))
        .and_then(|long| {
            command()
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .map(|a| match a.get_env() {
                    Some(env) => format!("{} (--{long})", env.to_string_lossy()),
                    None => format!("--{long}"),
                })
        });
    Some(ConfigError::setting(
        named.unwrap_or_else(|| "on the command line".into()),
        reason,
    ))
}

/// The process environment as UTF-8 pairs (others are skipped).
pub fn env_vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
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
    let named = cli.config.clone().filter(|p| !p.as_os_str().is_empty());
    let fill = |mut s: Settings| {
        if let Some(f) = &file {
            s.fill_from(&f.settings);
        }
        s.config_file.clone_from(&named);
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

#[cfg(test)]
mod tests {
    use super::*;

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
