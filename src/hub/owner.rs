//! The owner's side: start the bridge over the store, and serve every later process of the
//! same user on the store's socket, each connection with its own client context.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::actors::{Bridge, ClientContext, Shared};
use crate::config::Config;
use crate::error::Error;
use crate::hub::error::Result;
use crate::hub::{
    HELLO_TIMEOUT, HELLO_VERSION, Hello, HelloAnswer, HubError, MAX_HELLO_BYTES, StoreAnswer,
    StoreRequest, StoreRequestLine, addressable_name, euid,
};
use crate::mcp::framing::{self, Framed};
use crate::mcp::{McpServer, Tasks};
use crate::security::redact::{self, ClientSecrets};
use crate::store::Store;

/// Start the actors over an opened store, with this process's own client context.
pub async fn start_bridge(
    config: Config,
    vars: &[(String, String)],
    store: Store,
) -> Result<Bridge> {
    let own = ClientContext::new(config, vars);
    let fault_injection = std::env::var_os("CODEX_BRIDGE_TEST_FAULTS").is_some_and(|v| v == "1");
    let shared = Shared::new(own.config, own.common, own.codex_home, store)
        .with_fault_injection(fault_injection);
    Ok(Bridge::start(shared).await?)
}

/// The listening socket; removed when dropped, and every connection served through it is
/// closed (its service, and the bridge it holds, go with it: an owner that stops lets go of
/// the store even in a process that goes on).
pub struct Listener {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
    /// Connections being served now.
    open: Arc<std::sync::atomic::AtomicUsize>,
    /// Set: a connection is closed at once (the owner daemon is about to exit).
    closing: Arc<std::sync::atomic::AtomicBool>,
}

impl Listener {
    /// How many connections from outside this process's own tree are being served now (relays,
    /// `sessions` requests).
    pub fn connections(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Close every new connection at once (`true`), or serve them again; an owner that exits
    /// once idle sets it, then looks once more, so that no connection it accepted is cut.
    pub fn set_closing(&self, closing: bool) {
        self.closing
            .store(closing, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Counts a connection while it is served (one from outside this process's own tree).
struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Open {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Open {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Open(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listen on the store's socket and serve each connection over `bridge`. Any socket file left
/// there is stale: this process holds the store's lock.
pub fn listen(bridge: Bridge, tasks: Tasks, store_dir: &Path) -> Result<Listener> {
    let path = crate::hub::socket_path(store_dir);
    // bound under a name of this process's own, made private, then renamed over whatever is
    // at the socket's name: the socket never appears with a wider mode, and no file planted
    // there (a symlink, say) is ever followed
    static BOUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nth = BOUND.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp_name = format!(".{}.{}.{nth}", crate::hub::SOCKET_NAME, std::process::id());
    let tmp = store_dir.join(&tmp_name);
    let cannot = |source: std::io::Error| {
        let _ = std::fs::remove_file(&tmp);
        HubError::Listen {
            path: path.clone(),
            source,
        }
    };
    let (addr, _dir) = addressable_name(store_dir, &tmp_name).map_err(cannot)?;
    let _ = std::fs::remove_file(&tmp);
    let std_listener = std::os::unix::net::UnixListener::bind(&addr).map_err(cannot)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(cannot)?;
    }
    std::fs::rename(&tmp, &path).map_err(cannot)?;
    std_listener.set_nonblocking(true).map_err(cannot)?;
    let listener = UnixListener::from_std(std_listener).map_err(cannot)?;
    tracing::info!(socket = %path.display(), "owner of the store: listening for other processes");
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = tokio::spawn(accept_loop(
        listener,
        (bridge, tasks),
        open.clone(),
        closing.clone(),
    ));
    Ok(Listener {
        path,
        task,
        open,
        closing,
    })
}

/// Serve each connection on a task of the loop's own set: aborting the loop aborts them all.
async fn accept_loop(
    listener: UnixListener,
    (bridge, tasks): (Bridge, Tasks),
    open: Arc<std::sync::atomic::AtomicUsize>,
    closing: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        // finished connections are reaped as others arrive
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        if closing.load(std::sync::atomic::Ordering::SeqCst) {
            // its client finds no owner and starts the next one
            drop(stream);
            continue;
        }
        let (bridge, tasks) = (bridge.clone(), tasks.clone());
        // a connection from this process's own descendants (a bridge that codex runs as a
        // nested MCP server) does not keep the owner daemon alive: it lives only as long as
        // the owner's own codex does
        let counted = (!from_descendant(&stream)).then(|| Open::new(&open));
        connections.spawn(async move {
            let _counted = counted;
            if let Err(e) = serve_connection(stream, bridge, tasks).await {
                tracing::warn!(error = %redact::redact(&e.to_string()), "a client connection failed");
            }
        });
    }
}

/// Whether the peer of `stream` is a descendant of this process.
fn from_descendant(stream: &UnixStream) -> bool {
    let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid()) else {
        return false;
    };
    crate::codex::process::descendants(std::process::id() as i32).contains(&pid)
}

/// Only the user who owns the store may connect (the socket's mode says so too).
fn same_user(stream: &UnixStream) -> bool {
    stream
        .peer_cred()
        .map(|c| c.uid() == euid())
        .unwrap_or(false)
}

async fn serve_connection(stream: UnixStream, bridge: Bridge, tasks: Tasks) -> Result<()> {
    if !same_user(&stream) {
        tracing::warn!("refused a connection from another user");
        return Ok(());
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let read = tokio::time::timeout(HELLO_TIMEOUT, async {
        let mut limited = (&mut reader).take(MAX_HELLO_BYTES as u64);
        limited.read_until(b'\n', &mut line).await
    })
    .await;
    if !matches!(read, Ok(Ok(n)) if n > 0) {
        return Ok(()); // gone, silent or too long: nothing to answer
    }
    if let Ok(request) = serde_json::from_slice::<StoreRequestLine>(&line) {
        return serve_store_request(request, &bridge, write).await;
    }
    let client = match context_from_hello(&line) {
        Ok((client, pid)) => {
            tracing::info!(client_pid = pid, "a client process connected");
            client
        }
        Err(reason) => {
            let answer = serde_json::to_string(&HelloAnswer::Refused {
                reason: redact::redact(&reason).into_owned(),
            })
            .unwrap_or_default();
            let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
            return Ok(());
        }
    };
    let welcome = serde_json::to_string(&HelloAnswer::Welcome {
        owner_pid: std::process::id(),
    })
    .unwrap_or_default();
    write
        .write_all(format!("{welcome}\n").as_bytes())
        .await
        .map_err(HubError::ClientGone)?;
    // the host's literal secrets stay out of this process's log while it is connected
    let _held = crate::logging::hold_secrets(&client.secrets);
    // what is started with this host's credentials ends with its last connection
    let _credentials = bridge.hold_credentials(&client);
    let server = McpServer::for_client(bridge, Arc::new(client)).with_tasks(tasks);
    let Framed { io, written } = framing::guard_until(reader, write, server.input_ended());
    let served = server.clone().serve(io).await;
    match served {
        Ok(service) => {
            let _ = service.waiting().await;
            tracing::info!("a client process disconnected");
        }
        Err(e) => tracing::info!(error = %e, "a client process left before its MCP handshake"),
    }
    // the answers rmcp gave last reach the relay before the connection goes
    framing::flushed(written, framing::FLUSH_LIMIT).await;
    // its plain calls were cancelled with it; its tasks and background calls go on
    server.connection_closed();
    Ok(())
}

/// HelloAnswer the command line's `sessions` request: a welcome at once, then one answer line.
async fn serve_store_request(
    request: StoreRequestLine,
    bridge: &Bridge,
    mut write: tokio::net::unix::OwnedWriteHalf,
) -> Result<()> {
    let first = if request.version == HELLO_VERSION {
        HelloAnswer::Welcome {
            owner_pid: std::process::id(),
        }
    } else {
        HelloAnswer::Refused {
            reason: format!(
                "request version {} is not {HELLO_VERSION} (a different codex-mcp-bridge version)",
                request.version
            ),
        }
    };
    let refused = matches!(first, HelloAnswer::Refused { .. });
    let line = serde_json::to_string(&first).unwrap_or_default();
    write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .map_err(HubError::ClientGone)?;
    if refused {
        return Ok(());
    }
    tracing::info!(request = ?request.store_request, "a `sessions` command asked");
    let failed = |e: Error| StoreAnswer::Failed {
        message: redact::redact(&e.to_string()).into_owned(),
    };
    let answer = match request.store_request {
        StoreRequest::List => {
            let mut all = vec![];
            let mut cursor: Option<String> = None;
            loop {
                match bridge.list(cursor.as_deref(), 500) {
                    Ok(page) => {
                        all.extend(page.sessions);
                        match page.next {
                            Some(c) => cursor = Some(c),
                            None => break StoreAnswer::Sessions { sessions: all },
                        }
                    }
                    Err(e) => break failed(e),
                }
            }
        }
        StoreRequest::Get { session_id } => match bridge.get(&session_id) {
            Ok(session) => StoreAnswer::Session {
                session: session.map(Box::new),
            },
            Err(e) => failed(e),
        },
        StoreRequest::Close {
            session_id,
            drop_changes,
        } => match bridge.close_dropping(&session_id, drop_changes).await {
            Ok(session) => StoreAnswer::Session {
                session: session.map(Box::new),
            },
            Err(e) => failed(e),
        },
    };
    let line = serde_json::to_string(&answer).unwrap_or_default();
    write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .map_err(HubError::ClientGone)?;
    let _ = write.shutdown().await;
    Ok(())
}

/// Build a connection's context from its hello; `Err`: why it is refused.
fn context_from_hello(line: &[u8]) -> std::result::Result<(ClientContext, u32), String> {
    let hello: Hello =
        serde_json::from_slice(line).map_err(|e| format!("unreadable hello: {e}"))?;
    if hello.version != HELLO_VERSION {
        return Err(format!(
            "hello version {} is not {HELLO_VERSION} (a different codex-mcp-bridge version)",
            hello.version
        ));
    }
    let vars = crate::hub::hello_vars(&hello.vars);
    let config = Config::from_settings(&hello.settings, &hello.start_dir, &vars)
        .map_err(|e| e.to_string())?;
    // this connection's secrets are redacted from its own turns and answers, within bounds;
    // they never join the process-wide redactor (other clients' output, this process's logs)
    let values = hello
        .secrets
        .iter()
        .cloned()
        .chain(redact::secret_values(vars.iter().map(|(k, v)| (k, v))));
    let (secrets, ignored) = ClientSecrets::bounded(values);
    if ignored.any() {
        tracing::warn!(
            client_pid = hello.pid,
            too_long = ignored.too_long,
            over_limit = ignored.over_limit,
            max_bytes = redact::MAX_CLIENT_SECRET_BYTES,
            max_count = redact::MAX_CLIENT_SECRETS,
            max_total_bytes = redact::MAX_CLIENT_SECRETS_TOTAL,
            "a client process sent literal secrets past the limits; those are not redacted as \
             literals from its answers (patterns still apply)"
        );
    }
    let client = ClientContext::new(config, &vars).with_secrets(secrets);
    Ok((client, hello.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(dir: &Path, key: &str, secrets: Vec<String>) -> Vec<u8> {
        let hello = Hello {
            version: HELLO_VERSION,
            settings: crate::config::Settings {
                roots: Some(dir.display().to_string()),
                store: Some(dir.join("store")),
                ..Default::default()
            },
            vars: vec![
                ("HOME".into(), dir.display().to_string()),
                ("OPENAI_API_KEY".into(), key.into()),
            ],
            secrets,
            start_dir: dir.to_path_buf(),
            pid: 1,
        };
        serde_json::to_vec(&hello).unwrap()
    }

    #[test]
    fn connections_with_large_keys_leave_the_process_wide_redactor_alone() {
        let dir = tempfile::tempdir().unwrap();
        let before = format!("{:?}", redact::global());
        let start = std::time::Instant::now();
        let mut contexts = vec![];
        for i in 0..30 {
            // a 1 MiB key (ignored: past the per-value limit) and many values near it
            let key = format!("{i:02}{}", "k".repeat((1 << 20) - 2));
            let values = (0..100)
                .map(|j| format!("{i:02}-{j:03}-{}", "v".repeat(4000)))
                .collect();
            let (client, _) = context_from_hello(&hello(dir.path(), &key, values)).unwrap();
            assert!(client.secrets.len() <= 2 * redact::MAX_CLIENT_SECRETS);
            contexts.push(client);
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(
            format!("{:?}", redact::global()),
            before,
            "connections grew the process-wide redactor"
        );
        // each connection redacts its own values, and only it
        let (a, _) = context_from_hello(&hello(
            dir.path(),
            "conn-a-key-0123",
            vec!["landscape".into()],
        ))
        .unwrap();
        let (b, _) = context_from_hello(&hello(dir.path(), "conn-b-key-4567", vec![])).unwrap();
        let text = "landscape conn-a-key-0123 conn-b-key-4567";
        assert_eq!(
            a.secrets.redact(text),
            "[REDACTED] [REDACTED] conn-b-key-4567"
        );
        assert_eq!(
            b.secrets.redact(text),
            "landscape conn-a-key-0123 [REDACTED]"
        );
        assert_eq!(redact::redact(text), text);
    }

    #[test]
    fn an_old_hello_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let mut v: serde_json::Value =
            serde_json::from_slice(&hello(dir.path(), "k", vec![])).unwrap();
        v["version"] = 1.into();
        let err = context_from_hello(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(err.contains("hello version 1 is not 2"), "{err}");
    }
}
