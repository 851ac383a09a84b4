//! `codex-mcp-bridge`: flags, environment and config file → Config, tracing on stderr, open the
//! store, start the actors, serve MCP on stdio, and shut down in order (every turn's processes
//! are killed). The `sessions` and `doctor` subcommands live in [`codex_mcp_bridge::cli`].

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use codex_mcp_bridge::actors::Bridge;
use codex_mcp_bridge::cli::{self, Run};
use codex_mcp_bridge::config::{Config, Settings};
use codex_mcp_bridge::hub::http::{self, HttpListener};
use codex_mcp_bridge::hub::owner::{self, Listener};
use codex_mcp_bridge::hub::relay::{self, Upstream};
use codex_mcp_bridge::hub::{
    self, ELECTION_TIMEOUT, HELLO_VERSION, Hello, Role, hello_secrets, hello_vars,
};
use codex_mcp_bridge::logging;
use codex_mcp_bridge::mcp::McpServer;
use codex_mcp_bridge::security::redact::{self, Redactor};
use codex_mcp_bridge::store::Store;
use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio::sync::Mutex;

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
    if let Some(hint) = cli::terminal_hint(std::io::stdin().is_terminal()) {
        eprintln!("{hint}");
    }
    if let Err(missing) = cli::locate_codex(&settings, &vars) {
        tracing::warn!(
            "{missing}. Every turn will fail until then; `codex-mcp-bridge doctor` checks the \
             whole setup"
        );
    }
    let store_dir = config.store_dir.clone();
    let hello = Hello {
        version: HELLO_VERSION,
        // the HTTP listener is the owner's alone
        settings: Settings {
            http_listen: None,
            ..settings.clone()
        },
        vars: hello_vars(&vars),
        secrets: hello_secrets(&vars),
        start_dir: start_dir.clone(),
        pid: std::process::id(),
    };
    // the store's owner, once this process is it (from the start, or by taking over)
    let owned: Arc<Mutex<Option<Owned>>> = Arc::new(Mutex::new(None));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    match hub::elect(&store_dir, &hello, ELECTION_TIMEOUT).await? {
        Role::Owner(store) => {
            let (bridge, tasks) = become_owner(&owned, config, &vars, store).await?;
            let serving = McpServer::new(bridge).with_tasks(tasks).serve(
                codex_mcp_bridge::mcp::framing::guard(tokio::io::stdin(), tokio::io::stdout()),
            );
            // waiting for `initialize`: a person at a terminal may press Ctrl-D or Ctrl-C
            let service = tokio::select! {
                s = serving => match s {
                    Ok(service) => Some(service),
                    Err(ServerInitializeError::ConnectionClosed(_)) => {
                        tracing::info!(
                            "stdin ended before an MCP client sent `initialize`: nothing to \
                             serve, exiting"
                        );
                        None
                    }
                    Err(e) => {
                        shutdown(&owned).await;
                        return Err(e.into());
                    }
                },
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); None }
                _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: shutting down"); None }
            };
            if let Some(service) = service {
                tokio::select! {
                    _ = service.waiting() => { tracing::info!("the MCP client disconnected"); }
                    _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); }
                    _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: shutting down"); }
                }
            }
        }
        Role::Client(conn) => {
            tracing::info!(
                store = %store_dir.display(),
                owner = conn.owner_pid,
                "another process owns the store: relaying this client to it"
            );
            let first = Upstream::new(conn.reader, conn.writer, conn.owner_pid);
            let reconnect = reconnector(owned.clone(), store_dir, hello, config, vars);
            let relay = relay::run(tokio::io::stdin(), tokio::io::stdout(), first, reconnect);
            tokio::select! {
                r = relay => {
                    if let Err(e) = r {
                        shutdown(&owned).await;
                        return Err(e.into());
                    }
                    tracing::info!("the MCP client disconnected");
                }
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); }
                _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: shutting down"); }
            }
        }
    }
    shutdown(&owned).await;
    Ok(())
}

/// What this process runs as the store's owner.
struct Owned {
    bridge: Bridge,
    _listener: Option<Listener>,
    _http: Option<HttpListener>,
}

/// One task store for every connection this process serves.
type Tasks = codex_mcp_bridge::mcp::Tasks;

/// Start the actors over the store and listen for other processes.
async fn become_owner(
    owned: &Arc<Mutex<Option<Owned>>>,
    config: Config,
    vars: &[(String, String)],
    store: Store,
) -> anyhow::Result<(Bridge, Tasks)> {
    tracing::info!(
        store = %config.store_dir.display(),
        roots = ?config.roots,
        codex = %config.codex_bin.display(),
        max_concurrent = config.max_concurrent,
        "codex-mcp-bridge starting as the owner of the store"
    );
    let store_dir = config.store_dir.clone();
    let http_config = config.http.clone();
    let bridge = owner::start_bridge(config, vars, store).await?;
    let tasks = Tasks::new();
    // without the socket this process still serves its own client; others cannot share
    let listener = match owner::listen(bridge.clone(), tasks.clone(), &store_dir) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::error!(error = %e, "cannot share the store with other processes");
            None
        }
    };
    let http = match &http_config {
        Some(h) => Some(http::serve(bridge.clone(), tasks.clone(), h).await?),
        None => None,
    };
    *owned.lock().await = Some(Owned {
        bridge: bridge.clone(),
        _listener: listener,
        _http: http,
    });
    Ok((bridge, tasks))
}

/// After the owner went away: connect to the next one, or take the store over and serve this
/// process's client from an in-process service.
fn reconnector(
    owned: Arc<Mutex<Option<Owned>>>,
    store_dir: std::path::PathBuf,
    hello: Hello,
    config: Config,
    vars: Vec<(String, String)>,
) -> relay::Reconnect {
    Box::new(move || {
        let (owned, store_dir, hello, config, vars) = (
            owned.clone(),
            store_dir.clone(),
            hello.clone(),
            config.clone(),
            vars.clone(),
        );
        Box::pin(async move {
            match hub::elect(&store_dir, &hello, ELECTION_TIMEOUT).await? {
                Role::Client(conn) => Ok(Upstream::new(conn.reader, conn.writer, conn.owner_pid)),
                Role::Owner(store) => {
                    tracing::warn!("the owner of the store went away: this process takes it over");
                    let (bridge, tasks) = become_owner(&owned, config, &vars, store)
                        .await
                        .map_err(|e| codex_mcp_bridge::Error::StoreOwner(e.to_string()))?;
                    let (ours, theirs) = tokio::io::duplex(1024 * 1024);
                    let (r, w) = tokio::io::split(theirs);
                    // serving waits for the replayed `initialize`, which comes through `ours`
                    tokio::spawn(async move {
                        match McpServer::new(bridge)
                            .with_tasks(tasks)
                            .serve(codex_mcp_bridge::mcp::framing::guard(r, w))
                            .await
                        {
                            Ok(service) => {
                                let _ = service.waiting().await;
                            }
                            Err(e) => tracing::warn!(error = %e, "the in-process service ended"),
                        }
                    });
                    let (r, w) = tokio::io::split(ours);
                    Ok(Upstream::new(r, w, std::process::id()))
                }
            }
        })
    })
}

/// Stop every session this process owns (each kills its processes) and stop listening.
async fn shutdown(owned: &Arc<Mutex<Option<Owned>>>) {
    if let Some(o) = owned.lock().await.take() {
        drop(o._listener);
        drop(o._http);
        o.bridge.shutdown().await;
    }
}
