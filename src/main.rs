//! `codex-mcp-bridge`: flags and environment → Config, tracing on stderr, open the store, start
//! the actors, serve MCP on stdio, and shut down in order (every turn's processes are killed).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use codex_mcp_bridge::actors::{Bridge, Limiter, Shared};
use codex_mcp_bridge::codex::argv::Common;
use codex_mcp_bridge::codex::home::codex_home;
use codex_mcp_bridge::config::{Config, Settings};
use codex_mcp_bridge::logging::{self, LogFormat};
use codex_mcp_bridge::mcp::McpServer;
use codex_mcp_bridge::security::env::filter_env;
use codex_mcp_bridge::security::redact::{self, Redactor};
use codex_mcp_bridge::store::Store;
use rmcp::ServiceExt;

/// A hardened MCP server for the OpenAI Codex CLI: persistent sessions, progress, cancellation.
#[derive(Parser)]
#[command(name = "codex-mcp-bridge", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Log line format on stderr.
    #[arg(
        long,
        env = "CODEX_BRIDGE_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    log_format: LogFormat,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP on stdio (what running without a subcommand does).
    Serve(Box<Settings>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    let settings = match cli.command {
        Some(Command::Serve(s)) => *s,
        None => cli.settings,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("codex-mcp-bridge: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match rt.block_on(serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("codex-mcp-bridge: {}", redact::redact(&e.to_string()));
            ExitCode::FAILURE
        }
    };
    // stdin may still be blocked in a read on the blocking pool: do not wait for it
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    redact::install(Redactor::from_vars(
        vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ));
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
        .serve(rmcp::transport::stdio())
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
