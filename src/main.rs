//! `codex-mcp-bridge`: flags, environment and config file → Config, tracing on stderr, open the
//! store, start the actors, serve MCP on stdio, and shut down in order (every turn's processes
//! are killed). The `sessions` and `doctor` subcommands live in [`codex_mcp_bridge::cli`].

use std::process::ExitCode;

use codex_mcp_bridge::actors::{Bridge, Limiter, Shared};
use codex_mcp_bridge::cli::{self, Run};
use codex_mcp_bridge::codex::argv::Common;
use codex_mcp_bridge::codex::home::codex_home;
use codex_mcp_bridge::config::{Config, Settings};
use codex_mcp_bridge::logging;
use codex_mcp_bridge::mcp::McpServer;
use codex_mcp_bridge::security::env::filter_env;
use codex_mcp_bridge::security::redact::{self, Redactor};
use codex_mcp_bridge::store::Store;
use rmcp::ServiceExt;

fn main() -> ExitCode {
    let cli = cli::parse();
    let vars = cli::env_vars();
    redact::install(Redactor::from_vars(
        vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ));
    let prepared = match cli::prepare(cli, &vars) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    logging::init(prepared.log_format);
    match prepared.run {
        Run::Serve(settings) => run_server(settings, vars),
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

/// An error on stderr, redacted; exit code 1.
fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("codex-mcp-bridge: {}", redact::redact(&e.to_string()));
    ExitCode::FAILURE
}

/// The server: nothing but MCP ever goes to stdout.
fn run_server(settings: Settings, vars: Vec<(String, String)>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    let code = match rt.block_on(serve(settings, vars)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    };
    // stdin may still be blocked in a read on the blocking pool: do not wait for it
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

async fn serve(settings: Settings, vars: Vec<(String, String)>) -> anyhow::Result<()> {
    let start_dir = std::env::current_dir()?;
    let config = Config::from_settings(&settings, &start_dir, &vars)?;
    let store = Store::open(&config.store_dir)?;
    tracing::info!(
        store = %config.store_dir.display(),
        roots = ?config.roots,
        codex = %config.codex_bin.display(),
        max_concurrent = config.max_concurrent,
        "codex-mcp-bridge starting"
    );
    let env = filter_env(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let shared = Shared {
        limiter: Limiter::new(config.max_concurrent),
        common: Common {
            program: config.codex_bin.clone(),
            env,
            overrides: config.codex_overrides.clone(),
            allow_danger: config.allow_danger,
            disable_mcp_servers: vec![],
        },
        codex_home: codex_home(&vars),
        idle_timeout: config.idle_timeout,
        queue_timeout: config.queue_timeout,
        fault_injection: std::env::var_os("CODEX_BRIDGE_TEST_FAULTS").is_some_and(|v| v == "1"),
        live: Default::default(),
        store,
        config: std::sync::Arc::new(config),
    };
    let bridge = Bridge::start(shared).await?;
    let service = McpServer::new(bridge.clone())
        .serve(codex_mcp_bridge::mcp::framing::guard(
            tokio::io::stdin(),
            tokio::io::stdout(),
        ))
        .await?;

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = service.waiting() => { tracing::info!(reason = ?r.ok(), "client disconnected"); }
        _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); }
        _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: shutting down"); }
    }
    bridge.shutdown().await;
    Ok(())
}
