//! The process's start-up (`codex-mcp-bridge` and its subcommands): flags, environment and
//! config file → settings, the process-wide redactor and tracing on stderr, then
//! [`crate::server::run`] on stdin and stdout, shut down by SIGTERM or SIGINT; or the owner
//! daemon ([`crate::hub::daemon`]), or the `sessions` and `doctor` subcommands, whose stdout is
//! their own output. `src/main.rs` only sets the allocator and calls [`main`].

use std::io::IsTerminal;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::cli::{self, Prepared, Run};
use crate::config::Settings;
use crate::hub::HubError;
use crate::logging::{self, LogFormat};
use crate::security::redact::{self, Redactor};
use crate::server;

/// The process: what `main` runs.
///
/// One piece (about 80 lines): the order of start-up is the point (memory private first, the
/// allocator before any thread, the redactor before any log line), and each subcommand's arm
/// is a few lines.
pub fn main() -> ExitCode {
    // first of all: what codex runs outside its sandbox must not read this process's
    // environment (the secrets the allowlist keeps from codex) or memory (SECURITY.md)
    if let Err(e) = crate::codex::process::keep_memory_private() {
        return fail(&format!(
            "cannot make the process's memory private (PR_SET_DUMPABLE): {e}"
        ));
    }
    // glibc's malloc (what libc allocates for itself, and the whole heap where jemalloc is not
    // the allocator): before any thread exists, so that every thread shares the one arena
    crate::store::tune_allocator();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::hub::daemon::DAEMON_ARG)
    {
        return run_daemon();
    }
    let vars = cli::env_vars();
    redact::install(Redactor::from_vars(
        vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ));
    let prepared = match prepare(&args, &vars) {
        Ok(p) => p,
        Err(Stop::Exit(code)) => return code,
        Err(Stop::Unstarted(refused, format)) => {
            logging::init(format);
            return run_server(Start::Unstarted(refused), vars);
        }
    };
    logging::init(prepared.log_format);
    match prepared.run {
        Run::Serve(settings) => run_server(Start::Settings(Box::new(settings)), vars),
        Run::Sessions(args, settings) => {
            // not the server: stdout is this subcommand's output
            let mut out = std::io::stdout().lock();
            match cli::sessions(&args, &settings, &vars, &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e),
            }
        }
        Run::Doctor(settings) => {
            let start_dir = match std::env::current_dir() {
                Ok(d) => d,
                Err(e) => return fail(&format!("cannot read the current directory: {e}")),
            };
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return fail(&format!("cannot start the runtime: {e}")),
            };
            // not the server: stdout is this subcommand's output
            let mut out = std::io::stdout().lock();
            let ok = rt.block_on(cli::doctor(
                &settings,
                &prepared.config_file,
                &vars,
                &start_dir,
                &mut out,
            ));
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Why the command line or the config file stopped the process before it ran.
enum Stop {
    /// With this code (clap's message, or the error, was printed).
    Exit(ExitCode),
    /// The server's settings were refused: it answers its host with that (issue 38), and the
    /// log format.
    Unstarted(HubError, LogFormat),
}

/// The command line `args` merged with the config file. A setting refused where the server
/// starts is answered to its host ([`Stop::Unstarted`]); a person at a terminal gets clap's
/// message and code at once.
fn prepare(args: &[std::ffi::OsString], vars: &[(String, String)]) -> Result<Prepared, Stop> {
    let cli = match cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => match cli::unstartable(&e, args) {
            Some(refused) if !std::io::stdin().is_terminal() => {
                return Err(Stop::Unstarted(refused.into(), LogFormat::default()));
            }
            _ => e.exit(),
        },
    };
    let serves = matches!(&cli.command, None | Some(cli::Command::Serve(_)));
    let log_format = cli.log_format.unwrap_or_default();
    match (cli::prepare(cli, vars), serves) {
        (Ok(p), _) => Ok(p),
        (Err(e), true) => Err(Stop::Unstarted(e.into(), log_format)),
        (Err(e), false) => Err(Stop::Exit(fail(&e))),
    }
}

/// An error on stderr, redacted; exit code 1.
fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("codex-mcp-bridge: {}", redact::redact(&e.to_string()));
    ExitCode::FAILURE
}

/// The store's owner daemon (`--owner daemon`): started by a server process with its hello on
/// stdin; no MCP client of its own (stdout is null). SIGTERM shuts it down; SIGINT and SIGHUP
/// are a host's or a terminal's, meant for the server that started it: ignored.
fn run_daemon() -> ExitCode {
    logging::init(LogFormat::default());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    let served = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let hello = crate::hub::daemon::read_hello(tokio::io::stdin()).await?;
        // the patterns only: each connection's literal secrets come with its hello, for its
        // turns, and go with it
        let own = crate::hub::daemon::own_vars(&hello);
        redact::install(Redactor::from_vars(
            own.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ));
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = term.recv() => break,
                    _ = int.recv() => tracing::debug!("SIGINT ignored by the owner daemon"),
                    _ = hup.recv() => tracing::debug!("SIGHUP ignored by the owner daemon"),
                }
            }
            tracing::info!("SIGTERM: the owner daemon shuts down");
            on_signal.cancel();
        });
        server::run_daemon(hello, shutdown).await?;
        anyhow::Ok(())
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// What the server starts from.
enum Start {
    /// Its settings, complete.
    Settings(Box<Settings>),
    /// The command line or the config file was refused: the server only answers its client
    /// with that.
    Unstarted(HubError),
}

/// The server: nothing but MCP ever goes to stdout.
fn run_server(start: Start, vars: Vec<(String, String)>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    if let Some(hint) = cli::terminal_hint(std::io::stdin().is_terminal()) {
        eprintln!("{hint}");
    }
    let code = match rt.block_on(serve(start, vars)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    };
    // stdin may still be blocked in a read on the blocking pool: do not wait for it
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

/// [`server::run`] on stdin and stdout (or [`server::serve_unstarted`]); SIGTERM and SIGINT
/// shut it down (the end of stdin does too: the client disconnected).
async fn serve(start: Start, vars: Vec<(String, String)>) -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        }
        on_signal.cancel();
    });
    let io = (tokio::io::stdin(), tokio::io::stdout());
    match start {
        Start::Settings(settings) => server::run(*settings, vars, io, shutdown).await?,
        Start::Unstarted(e) => server::serve_unstarted(&e, io, &shutdown).await?,
    }
    Ok(())
}
