//! A client process's side: relay its stdio client to the owner, line by line, and carry the
//! client over to a new owner when the old one goes.
//!
//! The relay remembers the client's `initialize` request and `notifications/initialized`, and
//! the ids of requests still unanswered. When the upstream closes, each unanswered request gets
//! a JSON-RPC error saying the call was lost; the next upstream (another process's socket, or
//! this process after it took the store over) is then initialized with the remembered
//! handshake, whose answer is swallowed, so the client carries on without noticing more than
//! the failed calls.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::error::Result;
use crate::mcp::framing::read_line_capped;

/// One upstream: where client lines go, and where server lines come from.
pub struct Upstream {
    pub reader: Pin<Box<dyn AsyncBufRead + Send>>,
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    /// For the logs: who serves this upstream.
    pub owner_pid: u32,
}

impl Upstream {
    pub fn new<R, W>(reader: R, writer: W, owner_pid: u32) -> Self
    where
        R: AsyncRead + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        Upstream {
            reader: Box::pin(BufReader::new(reader)),
            writer: Box::pin(writer),
            owner_pid,
        }
    }
}

/// Finds the next upstream after the current one closed.
pub type Reconnect =
    Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Result<Upstream>> + Send>> + Send>;

/// The id the relay gives its replayed `initialize`.
const REPLAY_ID: &str = "codex-mcp-bridge-relay-initialize";

/// The members of a JSON-RPC line the relay looks at.
#[derive(Deserialize)]
struct Probe {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
}

fn probe(line: &[u8]) -> Option<Probe> {
    serde_json::from_slice::<Probe>(line).ok()
}

/// The JSON-RPC error for a call whose owner went away.
fn lost_call(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"the codex-mcp-bridge process that owned the session store exited during this call, and the call was lost (its codex process was stopped). Sessions are intact: retry the call."}}}}"#
    )
}

enum Ended {
    /// The client closed its input.
    Client,
    /// The upstream closed or failed.
    Upstream,
}

/// Relay `input`/`output` (the process's stdin and stdout) to `first`, then to whatever
/// `reconnect` finds each time an upstream closes. Returns when the client closes its input;
/// fails when no upstream can be found.
pub async fn run<I, O>(input: I, output: O, first: Upstream, mut reconnect: Reconnect) -> Result<()>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut from_client) = mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        loop {
            let mut buf = Vec::with_capacity(1024);
            match read_line_capped(&mut input, &mut buf).await {
                Ok(Some(true)) => {
                    if tx.send(buf).await.is_err() {
                        break;
                    }
                }
                Ok(Some(false)) => continue, // over-long: dropped, as the server would
                Ok(None) | Err(_) => break,
            }
        }
    });
    let mut output = output;
    let mut handshake: Vec<Vec<u8>> = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();
    let mut up = first;
    loop {
        tracing::debug!(owner = up.owner_pid, "relaying to the owner");
        let ended = pump(
            &mut from_client,
            &mut output,
            &mut up,
            &mut handshake,
            &mut pending,
        )
        .await;
        if let Ended::Client = ended {
            let _ = up.writer.shutdown().await;
            return Ok(());
        }
        tracing::warn!(
            owner = up.owner_pid,
            lost = pending.len(),
            "the owner of the store went away; finding the next one"
        );
        for id in pending.drain() {
            write_line(&mut output, lost_call(&id).as_bytes()).await;
        }
        up = loop {
            let mut next = reconnect().await?;
            match replay(&mut next, &handshake).await {
                Ok(()) => break next,
                // that owner went too: elect again
                Err(e) => {
                    tracing::warn!(error = %e, "the next owner went away during the handshake")
                }
            }
        };
        tracing::info!(
            owner = up.owner_pid,
            "carried the client over to the new owner"
        );
    }
}

async fn write_line<O: AsyncWrite + Unpin>(output: &mut O, line: &[u8]) -> bool {
    output.write_all(line).await.is_ok()
        && output.write_all(b"\n").await.is_ok()
        && output.flush().await.is_ok()
}

/// Send the remembered handshake to a new upstream; its answer to `initialize` is swallowed
/// (anything else it sends before that, too: the client has not asked for it).
async fn replay(up: &mut Upstream, handshake: &[Vec<u8>]) -> Result<()> {
    let lost = || {
        crate::error::Error::SessionFailed(
            "the new owner of the store closed the connection during the handshake".into(),
        )
    };
    for line in handshake {
        let mut line = line.clone();
        let is_init = probe(&line).is_some_and(|p| p.method.as_deref() == Some("initialize"));
        if is_init {
            let mut v: serde_json::Value = serde_json::from_slice(&line).map_err(|_| lost())?;
            v["id"] = serde_json::Value::String(REPLAY_ID.into());
            line = serde_json::to_vec(&v).map_err(|_| lost())?;
        }
        up.writer.write_all(&line).await.map_err(|_| lost())?;
        up.writer.write_all(b"\n").await.map_err(|_| lost())?;
        up.writer.flush().await.map_err(|_| lost())?;
        if is_init {
            loop {
                let mut buf = Vec::new();
                match read_line_capped(&mut up.reader, &mut buf).await {
                    Ok(Some(_)) => {}
                    _ => return Err(lost()),
                }
                let answered = probe(&buf).is_some_and(|p| {
                    p.method.is_none() && p.id.as_ref().and_then(|i| i.as_str()) == Some(REPLAY_ID)
                });
                if answered {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Relay until one side ends.
async fn pump<O: AsyncWrite + Unpin>(
    from_client: &mut mpsc::Receiver<Vec<u8>>,
    output: &mut O,
    up: &mut Upstream,
    handshake: &mut Vec<Vec<u8>>,
    pending: &mut HashSet<String>,
) -> Ended {
    let mut buf = Vec::with_capacity(4096);
    loop {
        tokio::select! {
            line = from_client.recv() => {
                let Some(line) = line else { return Ended::Client };
                if let Some(p) = probe(&line) {
                    match (&p.method, &p.id) {
                        (Some(m), Some(id)) => {
                            if m == "initialize" {
                                handshake.clear();
                                handshake.push(line.clone());
                            }
                            pending.insert(id.to_string());
                        }
                        (Some(m), None) if m == "notifications/initialized" => {
                            handshake.retain(|l| {
                                probe(l).is_some_and(|p| p.method.as_deref() == Some("initialize"))
                            });
                            handshake.push(line.clone());
                        }
                        _ => {}
                    }
                }
                let sent = up.writer.write_all(&line).await.is_ok()
                    && up.writer.write_all(b"\n").await.is_ok()
                    && up.writer.flush().await.is_ok();
                if !sent {
                    return Ended::Upstream;
                }
            }
            read = read_line_capped(&mut up.reader, &mut buf) => {
                match read {
                    Ok(Some(true)) => {}
                    Ok(Some(false)) => { buf.clear(); continue; }
                    Ok(None) | Err(_) => return Ended::Upstream,
                }
                if let Some(Probe { id: Some(id), method: None }) = probe(&buf) {
                    pending.remove(&id.to_string());
                }
                if !write_line(output, &buf).await {
                    // stdout is gone: the client is gone
                    return Ended::Client;
                }
                buf.clear();
            }
        }
    }
}
