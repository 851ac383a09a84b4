//! The server as a library: elect the store's owner or relay to it, serve MCP on one stream
//! pair, take the store over when its owner goes, and shut down in order (every turn's
//! processes are killed, the socket file is removed). `main` only reads the flags, sets up
//! logging and the redactor, and wires stdin/stdout and the signals to [`run`].
//!
//! Nothing here is process-wide: two servers can run in one process (the in-process hub tests
//! do), each on its own stream pair and shutdown token. An owner that shuts down stops serving
//! its relays' connections and lets go of the store even while its process goes on, so a relay
//! in the same process can take the store over.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::actors::Bridge;
use crate::config::{Config, OwnerMode, Settings};
use crate::hub::error::Result;
use crate::hub::http::{self, HttpListener};
use crate::hub::owner::{self, Listener};
use crate::hub::relay::{self, Upstream};
use crate::hub::{
    self, Connection, ELECTION_TIMEOUT, HELLO_VERSION, Hello, HubError, Role, hello_secrets,
    hello_vars,
};
use crate::mcp::unstarted::Unstarted;
use crate::mcp::{McpServer, Tasks, framing};
use crate::store::Store;

/// Serve one MCP client on `io` (stdin and stdout in `main`) until it disconnects or
/// `shutdown` is cancelled: as the store's owner, or as a relay to the process that owns it
/// (taking the store over if that process goes). Then shut down in order.
pub async fn run<R, W>(
    settings: Settings,
    vars: Vec<(String, String)>,
    io: (R, W),
    shutdown: CancellationToken,
) -> Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let server = match prepare(settings, vars) {
        Ok(server) => server,
        Err(e) => return serve_unstarted(&e, io, &shutdown).await,
    };
    if server.daemon.is_some() {
        let served = server.serve_through_daemon(io, &shutdown).await;
        server.shutdown().await;
        return served;
    }
    let (server, owned) = match start(server, &shutdown).await {
        Ok(Some(started)) => started,
        Ok(None) => return Ok(()),
        Err(e) => return serve_unstarted(&e, io, &shutdown).await,
    };
    let served = match owned {
        Elected::Owner(bridge, tasks) => server.serve_owner(bridge, tasks, io, &shutdown).await,
        Elected::Relay(conn) => server.serve_relay(conn, io, &shutdown).await,
    };
    server.shutdown().await;
    served
}

/// What this process became at start.
enum Elected {
    /// The store's owner, its actors running.
    Owner(Bridge, Tasks),
    /// A relay to the process that owns the store.
    Relay(Connection),
}

/// Check the settings: the server they make, nothing started yet.
fn prepare(settings: Settings, vars: Vec<(String, String)>) -> Result<Server> {
    let start_dir = std::env::current_dir().map_err(HubError::StartDir)?;
    let config = Config::from_settings(&settings, &start_dir, &vars)?;
    if let Err(missing) = crate::cli::locate_codex(&settings, &vars) {
        tracing::warn!(
            "{missing}. Every turn will fail until then; `codex-mcp-bridge doctor` checks the \
             whole setup"
        );
    }
    // the HTTP listener is the first process's own: with it, that process owns the store
    let daemon = match settings.owner.unwrap_or_default() {
        OwnerMode::Process => None,
        OwnerMode::Daemon if settings.http_listen.is_some() => None,
        OwnerMode::Daemon => Some(std::env::current_exe().map_err(|e| HubError::DaemonStart {
            store: config.store_dir.clone(),
            why: format!("cannot tell this program's path: {e}"),
        })?),
    };
    let server = Server {
        owned: Arc::new(Mutex::new(None)),
        store_dir: config.store_dir.clone(),
        hello: Arc::new(hello(settings, &vars, start_dir)),
        config,
        vars: vars.into(),
        daemon: daemon.map(Arc::from),
    };
    Ok(server)
}

/// Elect the store's owner or join it (`--owner process`); as the owner, start the actors.
/// Nothing is started before the settings and the store directory pass; a failure after the
/// actors started shuts them down again, so that a process that did not start holds nothing
/// (neither the store nor its socket). `None`: `shutdown` came during the election.
async fn start(server: Server, shutdown: &CancellationToken) -> Result<Option<(Server, Elected)>> {
    let role = tokio::select! {
        role = server.elect() => role?,
        _ = shutdown.cancelled() => return Ok(None),
    };
    let started = match role {
        Role::Owner(store) => match server.become_owner(store).await {
            Ok((bridge, tasks)) => Elected::Owner(bridge, tasks),
            Err(e) => {
                server.shutdown().await;
                return Err(e);
            }
        },
        Role::Client(conn) => {
            if server.config.http.is_some() {
                tracing::warn!(
                    owner = conn.owner_pid,
                    "another process owns the store: this one relays to it, and its HTTP \
                     listener (--http-listen) does not start; the owner's settings decide"
                );
            }
            Elected::Relay(conn)
        }
    };
    Ok(Some((server, started)))
}

/// The owner daemon (`--owner daemon`, [`hub::daemon`]): own the store with the settings of
/// the process that started it (its `hello`), serve every process's connection on the socket,
/// and exit once no connection is open and no task runs for [`hub::daemon::LINGER`], or at
/// `shutdown`. A daemon that finds the store owned (another started first) exits at once:
/// its starter connects to that one.
pub async fn run_daemon(hello: Hello, shutdown: CancellationToken) -> Result<()> {
    let config = Config::from_settings(&hello.settings, &hello.start_dir, &hello.vars)?;
    let dir = config.store_dir.clone();
    let until = std::time::Instant::now() + hub::daemon::LOCK_WAIT;
    let store = loop {
        if let Some(store) = hub::try_open(&dir).await? {
            break store;
        }
        if std::time::Instant::now() >= until || shutdown.is_cancelled() {
            tracing::info!("another process owns the store: this daemon is not needed");
            return Ok(());
        }
        tokio::time::sleep(hub::RETRY).await;
    };
    let server = Server {
        owned: Arc::new(Mutex::new(None)),
        store_dir: dir,
        vars: hub::daemon::own_vars(&hello).into(),
        hello: Arc::new(hello),
        config,
        daemon: None,
    };
    let (_bridge, tasks) = match server.become_owner(store).await {
        Ok(started) => started,
        Err(e) => {
            server.shutdown().await;
            return Err(e);
        }
    };
    tracing::info!(
        pid = std::process::id(),
        "the owner daemon is serving the store"
    );
    let mut idle_since: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            _ = shutdown.cancelled() => break,
        }
        if server.busy(&tasks).await {
            idle_since = None;
            continue;
        }
        let since = *idle_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < hub::daemon::LINGER {
            continue;
        }
        // no new connection from here on; one accepted just before is seen now
        server.set_closing(true).await;
        if server.busy(&tasks).await {
            server.set_closing(false).await;
            idle_since = None;
            continue;
        }
        tracing::info!("no client is connected and no task runs: the owner daemon exits");
        break;
    }
    server.shutdown().await;
    Ok(())
}

/// A server that did not start (issue 38): the problem is logged at once, and the client on
/// `io` is served all the same (discover or initialize), the tool list and every tool call
/// answering the problem in the same words ([`Unstarted`]), until it leaves or
/// `shutdown`. It holds nothing (no store, no socket, no codex). Then the problem is this
/// server's error, for `main` to exit with.
pub async fn serve_unstarted<R, W>(
    e: &HubError,
    io: (R, W),
    shutdown: &CancellationToken,
) -> Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let problem = crate::cli::startup::startup_problem(e);
    let words = problem.words();
    tracing::error!(
        "{words} (answering the MCP client with this until it disconnects; `codex-mcp-bridge \
         doctor` checks the whole setup)"
    );
    let serving = Unstarted::new(words.as_str(), problem.kind).serve(framing::guard(io.0, io.1));
    let service = tokio::select! {
        s = serving => s.ok(),
        _ = shutdown.cancelled() => None,
    };
    if let Some(service) = service {
        tokio::select! {
            _ = service.waiting() => tracing::info!("the MCP client disconnected"),
            _ = shutdown.cancelled() => {}
        }
    }
    Err(HubError::NotStarted(words))
}

/// A server that did not start, served in this process for a relay whose client was greeted
/// already: the upstream, and the problem's words (logged here once).
fn unstarted_upstream(e: &HubError) -> (Upstream, String) {
    let problem = crate::cli::startup::startup_problem(e);
    let words = problem.words();
    tracing::error!(
        "{words} (answering the MCP client with this until it disconnects; `codex-mcp-bridge \
         doctor` checks the whole setup)"
    );
    let (ours, theirs) = tokio::io::duplex(1024 * 1024);
    let (r, w) = tokio::io::split(theirs);
    let unstarted = Unstarted::new(words.as_str(), problem.kind);
    tokio::spawn(async move {
        if let Ok(service) = unstarted.serve(framing::guard(r, w)).await {
            let _ = service.waiting().await;
        }
    });
    let (r, w) = tokio::io::split(ours);
    (Upstream::new(r, w, std::process::id()), words)
}

/// The hello this process sends an owner: its settings, allowlisted environment and secrets.
fn hello(settings: Settings, vars: &[(String, String)], start_dir: PathBuf) -> Hello {
    Hello {
        version: HELLO_VERSION,
        // the HTTP listener is the owner's alone
        settings: Settings {
            http_listen: None,
            ..settings
        },
        vars: hello_vars(vars),
        secrets: hello_secrets(vars),
        start_dir,
        pid: std::process::id(),
    }
}

/// What this process runs as the store's owner.
struct Owned {
    bridge: Bridge,
    tasks: Tasks,
    listener: Option<Listener>,
    http: Option<HttpListener>,
    /// After a takeover: stops the service that serves the relay's client in this process.
    in_process: Option<DropGuard>,
}

/// One server's state; cloned into the relay's reconnector.
#[derive(Clone)]
struct Server {
    /// The store's owner, once this server is it (from the start, or by taking over).
    owned: Arc<Mutex<Option<Owned>>>,
    store_dir: PathBuf,
    hello: Arc<Hello>,
    config: Config,
    vars: Arc<[(String, String)]>,
    /// `--owner daemon`: the program started as the store's owner; this process only relays.
    daemon: Option<Arc<std::path::Path>>,
}

impl Server {
    /// Whether a client is connected (from outside this process's own tree) or a task runs.
    async fn busy(&self, tasks: &Tasks) -> bool {
        let connections = match self.owned.lock().await.as_ref() {
            Some(Owned {
                listener: Some(l), ..
            }) => l.connections(),
            _ => 0,
        };
        connections > 0 || tasks.running() > 0
    }

    /// Close new connections at once, or serve them again (the daemon's last look).
    async fn set_closing(&self, closing: bool) {
        if let Some(Owned {
            listener: Some(l), ..
        }) = self.owned.lock().await.as_ref()
        {
            l.set_closing(closing);
        }
    }

    /// Become the owner or a relay to it (`--owner process`); only a relay, to the daemon it
    /// starts when none answers (`--owner daemon`).
    async fn elect(&self) -> Result<Role> {
        match &self.daemon {
            None => hub::elect(&self.store_dir, &self.hello, ELECTION_TIMEOUT).await,
            Some(program) => {
                let d = hub::daemon::elect(&self.store_dir, &self.hello, program, ELECTION_TIMEOUT);
                match d.await {
                    // no daemon (its program replaced on disk, say): this process owns the
                    // store, as with `--owner process`
                    Err(HubError::DaemonStart { why, .. }) => {
                        tracing::warn!(
                            %why,
                            "the store's owner daemon cannot start: this process owns the store \
                             itself, and its turns (tasks too) end with it"
                        );
                        hub::elect(&self.store_dir, &self.hello, ELECTION_TIMEOUT).await
                    }
                    other => other,
                }
            }
        }
    }

    /// `--owner daemon`: relay the client on `io` to the owner daemon (started when none
    /// answers) from the first moment: its `initialize` is answered at once while the daemon
    /// comes up ([`relay::run`]). The daemon that cannot start leaves this process the owner (an
    /// in-process service the relay speaks to), and a store that cannot be joined a server that
    /// did not start ([`Unstarted`], its problem this function's error), each given the
    /// handshake as any next owner is.
    async fn serve_through_daemon<R, W>(
        &self,
        io: (R, W),
        shutdown: &CancellationToken,
    ) -> Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let problem: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let first: relay::FirstUpstream = {
            let (server, problem) = (self.clone(), problem.clone());
            Box::pin(async move {
                let started = match server.elect().await {
                    Ok(Role::Client(conn)) => {
                        tracing::info!(
                            store = %server.store_dir.display(),
                            owner = conn.owner_pid,
                            "relaying this client to the store's owner"
                        );
                        return Ok(Upstream::new(conn.reader, conn.writer, conn.owner_pid));
                    }
                    Ok(Role::Owner(store)) => server.take_over(store).await,
                    Err(e) => Err(e),
                };
                started.or_else(|e| {
                    let (up, words) = unstarted_upstream(&e);
                    *problem.lock().unwrap_or_else(|p| p.into_inner()) = Some(words);
                    Ok(up)
                })
            })
        };
        tokio::select! {
            r = relay::run(io.0, io.1, first, self.reconnector()) => {
                r?;
                self.client_left().await;
            }
            _ = shutdown.cancelled() => {}
        }
        let problem = problem.lock().unwrap_or_else(|p| p.into_inner()).take();
        match problem {
            Some(words) => Err(HubError::NotStarted(words)),
            None => Ok(()),
        }
    }

    /// Own the store (its actors started) and serve the client on `io` until it leaves or
    /// `shutdown`.
    async fn serve_owner<R, W>(
        &self,
        bridge: Bridge,
        tasks: Tasks,
        io: (R, W),
        shutdown: &CancellationToken,
    ) -> Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mcp = McpServer::new(bridge).with_tasks(tasks);
        let framing::Framed { io, written } = framing::guard_until(io.0, io.1, mcp.input_ended());
        let serving = mcp.clone().serve(io);
        // waiting for `initialize`: a person at a terminal may press Ctrl-D or Ctrl-C
        let service = tokio::select! {
            s = serving => match s {
                Ok(service) => service,
                Err(ServerInitializeError::ConnectionClosed(_)) => {
                    tracing::info!(
                        "stdin ended before an MCP client sent `initialize`: nothing to serve, \
                         exiting"
                    );
                    return Ok(());
                }
                Err(e) => return Err(HubError::Handshake(e.to_string())),
            },
            _ = shutdown.cancelled() => return Ok(()),
        };
        tokio::select! {
            _ = service.waiting() => {
                // the last answers reach stdout before the process exits
                framing::flushed(written, framing::FLUSH_LIMIT).await;
                self.client_left().await;
            }
            _ = shutdown.cancelled() => {}
        }
        mcp.connection_closed();
        Ok(())
    }

    /// Relay the client on `io` to the owner, and to each next one, until it leaves or
    /// `shutdown`.
    async fn serve_relay<R, W>(
        &self,
        conn: Connection,
        io: (R, W),
        shutdown: &CancellationToken,
    ) -> Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        tracing::info!(
            store = %self.store_dir.display(),
            owner = conn.owner_pid,
            "another process owns the store: relaying this client to it"
        );
        let first = Upstream::new(conn.reader, conn.writer, conn.owner_pid);
        let relay = relay::run(io.0, io.1, relay::ready(first), self.reconnector());
        tokio::select! {
            r = relay => {
                r?;
                self.client_left().await;
            }
            _ = shutdown.cancelled() => {}
        }
        Ok(())
    }

    /// Start the actors over the store and listen for other processes.
    async fn become_owner(&self, store: Store) -> Result<(Bridge, Tasks)> {
        let config = &self.config;
        tracing::info!(
            store = %config.store_dir.display(),
            roots = ?config.roots,
            codex = %config.codex_bin.display(),
            max_concurrent = config.max_concurrent,
            "codex-mcp-bridge starting as the owner of the store"
        );
        // the HTTP address first: refused, it stops the start before anything runs
        let http_listener = match &config.http {
            Some(h) => Some(http::bind(h).await?),
            None => None,
        };
        let bridge = owner::start_bridge(config.clone(), &self.vars, store).await?;
        let tasks = Tasks::kept(bridge.clone()).await;
        // without the socket this server still serves its own client; others cannot share
        let listener = match owner::listen(bridge.clone(), tasks.clone(), &self.store_dir) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::error!(error = %e, "cannot share the store with other processes");
                None
            }
        };
        let owned = Owned {
            bridge: bridge.clone(),
            tasks: tasks.clone(),
            listener,
            http: None,
            in_process: None,
        };
        // kept before the HTTP listener starts: a failure there still shuts the bridge down
        *self.owned.lock().await = Some(owned);
        if let (Some(h), Some(l)) = (&config.http, http_listener) {
            let listening = http::serve(l, bridge.clone(), tasks.clone(), h).await?;
            if let Some(o) = self.owned.lock().await.as_mut() {
                o.http = Some(listening);
            }
        }
        Ok((bridge, tasks))
    }

    /// After the owner went away: connect to the next one, or take the store over and serve
    /// this server's client from an in-process service.
    fn reconnector(&self) -> relay::Reconnect {
        let server = self.clone();
        Box::new(move || {
            let server = server.clone();
            Box::pin(async move {
                match server.elect().await? {
                    Role::Client(conn) => {
                        Ok(Upstream::new(conn.reader, conn.writer, conn.owner_pid))
                    }
                    Role::Owner(store) => server.take_over(store).await,
                }
            })
        })
    }

    /// Become the owner after the old one went: the relay's next upstream is a service of
    /// this process's own, which waits for the relay's replayed `initialize`.
    async fn take_over(&self, store: Store) -> Result<Upstream> {
        tracing::warn!("no other process owns the store: this process takes it over");
        let (bridge, tasks) = self.become_owner(store).await?;
        let (ours, theirs) = tokio::io::duplex(1024 * 1024);
        let (r, w) = tokio::io::split(theirs);
        let stop = CancellationToken::new();
        if let Some(o) = self.owned.lock().await.as_mut() {
            o.in_process = Some(stop.clone().drop_guard());
        }
        tokio::spawn(async move {
            let mcp = McpServer::new(bridge).with_tasks(tasks);
            let framed = framing::guard_until(r, w, mcp.input_ended());
            let serving = mcp.serve(framed.io);
            let service = tokio::select! {
                s = serving => s,
                _ = stop.cancelled() => return,
            };
            match service {
                Ok(service) => tokio::select! {
                    _ = service.waiting() => {}
                    _ = stop.cancelled() => {}
                },
                Err(e) => tracing::warn!(error = %e, "the in-process service ended"),
            }
        });
        let (r, w) = tokio::io::split(ours);
        Ok(Upstream::new(r, w, std::process::id()))
    }

    /// This server's own client closed its connection; the shutdown comes next. When this
    /// process owns the store (from the start, or after a takeover), what it has in flight is
    /// marked as cut off by the client ([`Bridge::client_closed`]), so the next start does not
    /// call it a crash.
    async fn client_left(&self) {
        tracing::info!("the MCP client disconnected");
        if let Some(o) = self.owned.lock().await.as_ref() {
            o.bridge.client_closed().await;
        }
    }

    /// Stop listening (the socket file goes, and every relayed connection with it), then stop
    /// every session this server owns (each kills its processes) and flush the store.
    async fn shutdown(&self) {
        if let Some(o) = self.owned.lock().await.take() {
            drop(o.listener);
            drop(o.http);
            drop(o.in_process);
            o.tasks.interrupt_running().await;
            o.bridge.shutdown().await;
        }
    }
}
