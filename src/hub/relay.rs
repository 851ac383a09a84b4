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
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::hub::HubError;
use crate::hub::error::Result;
use crate::mcp::framing::{self, read_line_capped_at_eof};

/// A line read from one side: whole, or the head of one too long to pass on.
enum Line {
    Whole(Vec<u8>),
    TooLong(Vec<u8>),
}

/// Read `reader` line by line on a task of its own (so that no read is ever cut short by the
/// other side's traffic); the channel closes at its end. `partial`: whether a last line without
/// its newline is passed on (from the client, yes; from an owner that died mid-write, no).
fn spawn_lines<R: AsyncRead + Send + 'static>(reader: R, partial: bool) -> mpsc::Receiver<Line> {
    let (tx, rx) = mpsc::channel::<Line>(64);
    tokio::spawn(async move {
        let mut reader = Box::pin(BufReader::new(reader));
        loop {
            let mut buf = Vec::with_capacity(1024);
            let line = match read_line_capped_at_eof(&mut reader, &mut buf, partial).await {
                Ok(Some(true)) => Line::Whole(buf),
                Ok(Some(false)) => Line::TooLong(buf),
                Ok(None) | Err(_) => break,
            };
            if tx.send(line).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// One upstream: where client lines go, and where server lines come from.
pub struct Upstream {
    lines: mpsc::Receiver<Line>,
    writer: Pin<Box<dyn AsyncWrite + Send>>,
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
            lines: spawn_lines(reader, false),
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

/// The first upstream, still being found (the owner daemon starting, say).
pub type FirstUpstream = Pin<Box<dyn Future<Output = Result<Upstream>> + Send>>;

/// An upstream found already.
pub fn ready(up: Upstream) -> FirstUpstream {
    Box::pin(async move { Ok(up) })
}

/// Relay `input`/`output` (the process's stdin and stdout) to `first`, then to whatever
/// `reconnect` finds each time an upstream closes. While `first` is still being found, the
/// client's `initialize` is answered here ([`greeting`]) and its other lines wait; the owner
/// gets the handshake replayed. Returns when the client closed its input and every call it
/// sent was answered; fails when no upstream can be found.
pub async fn run<I, O>(
    input: I,
    output: O,
    first: FirstUpstream,
    mut reconnect: Reconnect,
) -> Result<()>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let from_client = spawn_lines(input, true);
    let mut output = output;
    let mut handshake: Vec<Vec<u8>> = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();
    let (first, waited) = until_first(first, from_client, &mut output, &mut handshake).await;
    let mut from_client = waited;
    let mut up = first?;
    if !handshake.is_empty() {
        // the client was greeted here: the owner gets its handshake, its answer swallowed
        let replayed =
            tokio::time::timeout(crate::hub::HELLO_TIMEOUT, replay(&mut up, &handshake)).await;
        if !matches!(replayed, Ok(Ok(()))) {
            tracing::warn!("the owner went away during the handshake");
            up = next_upstream(&mut reconnect, &handshake, &mut pending, &mut output).await?;
        }
    }
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
            drain(&mut output, &mut up, &mut pending).await;
            return Ok(());
        }
        tracing::warn!(
            owner = up.owner_pid,
            lost = pending.len(),
            "the owner of the store went away; finding the next one"
        );
        up = next_upstream(&mut reconnect, &handshake, &mut pending, &mut output).await?;
        tracing::info!(
            owner = up.owner_pid,
            "carried the client over to the new owner"
        );
    }
}

/// Until `first` is found: the client's first line, when it is `initialize`, is answered here
/// and kept as the handshake; every other line waits, in order (an over-long one is answered at
/// once, as [`pump`] answers it). Returns the upstream and the client's lines from the first
/// one that waited on.
async fn until_first<O: AsyncWrite + Unpin>(
    mut first: FirstUpstream,
    mut from_client: mpsc::Receiver<Line>,
    output: &mut O,
    handshake: &mut Vec<Vec<u8>>,
) -> (Result<Upstream>, mpsc::Receiver<Line>) {
    let mut waiting: Vec<Line> = Vec::new();
    let mut client_open = true;
    let up = loop {
        tokio::select! {
            biased;
            up = &mut first => break up,
            line = from_client.recv(), if client_open => match line {
                None => client_open = false,
                Some(Line::TooLong(head)) => {
                    if let Some(answer) = framing::answer_for_too_long_request(&head) {
                        write_line(output, answer.as_bytes()).await;
                    }
                }
                Some(Line::Whole(line)) => {
                    let is_init =
                        probe(&line).is_some_and(|p| p.method.as_deref() == Some("initialize"));
                    let greeted = if is_init && waiting.is_empty() && handshake.is_empty() {
                        crate::mcp::greeting::answer_initialize(&line).await
                    } else {
                        None
                    };
                    match greeted {
                        Some(answer) => {
                            tracing::debug!("answered the client's initialize while the owner starts");
                            write_line(output, &answer).await;
                            handshake.push(line);
                        }
                        None => waiting.push(Line::Whole(line)),
                    }
                }
            },
        }
    };
    if waiting.is_empty() && client_open {
        return (up, from_client);
    }
    // the lines that waited first, then the rest as they come
    let (tx, rx) = mpsc::channel::<Line>(64);
    tokio::spawn(async move {
        for line in waiting {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        while client_open && let Some(line) = from_client.recv().await {
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    (up, rx)
}

/// After an upstream closed: every call in flight through it is answered as lost (but an
/// `initialize` it had not answered, which ran nothing: that goes to the next owner as it is,
/// its answer reaching the client), and the next upstream is found and given the handshake.
async fn next_upstream<O: AsyncWrite + Unpin>(
    reconnect: &mut Reconnect,
    handshake: &[Vec<u8>],
    pending: &mut HashSet<String>,
    output: &mut O,
) -> Result<Upstream> {
    let unanswered = unanswered_initialize(handshake, pending);
    for id in pending.drain() {
        if unanswered.as_ref().is_some_and(|(i, _)| *i == id) {
            continue;
        }
        write_line(output, lost_call(&id).as_bytes()).await;
    }
    loop {
        let mut next = reconnect().await?;
        if let Some((id, line)) = &unanswered {
            if send_line(&mut next, line).await {
                pending.insert(id.clone());
                return Ok(next);
            }
            tracing::warn!("the next owner went away before the client's handshake reached it");
            continue;
        }
        let replayed =
            tokio::time::timeout(crate::hub::HELLO_TIMEOUT, replay(&mut next, handshake))
                .await
                .unwrap_or_else(|_| Err(HubError::HandoverFailed("did not answer in time")));
        match replayed {
            Ok(()) => return Ok(next),
            // that owner went too: elect again
            Err(e) => tracing::warn!(error = %e, "the next owner went away during the handshake"),
        }
    }
}

/// How long a relay whose client closed its input waits for the answers still owed (the owner
/// answers within its own drain of 5 s: quick calls with their results, turns cancelled).
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The JSON-RPC error for a call still unanswered when its client had closed its input and the
/// owner closed too (or did not answer within [`DRAIN_LIMIT`]).
fn unanswered_at_close(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"cancelled: the client closed its input (stdin) before this call was answered"}}}}"#
    )
}

/// The client closed its input: the owner is told at once (the socket's write half closes, and
/// the connection's plain calls end with it), and every call the client had sent is answered
/// before the relay returns: by the owner (quick calls with their results, turns with their
/// cancellation), else here. Writing stops when the client's output is gone too.
async fn drain<O: AsyncWrite + Unpin>(
    output: &mut O,
    up: &mut Upstream,
    pending: &mut HashSet<String>,
) {
    let _ = up.writer.shutdown().await;
    let limit = tokio::time::sleep(DRAIN_LIMIT);
    tokio::pin!(limit);
    while !pending.is_empty() {
        let line = tokio::select! {
            l = up.lines.recv() => l,
            _ = &mut limit => break,
        };
        let line = match line {
            None => break,
            Some(Line::Whole(buf)) => {
                if let Some(Probe {
                    id: Some(id),
                    method: None,
                }) = probe(&buf)
                {
                    pending.remove(&id.to_string());
                }
                buf
            }
            Some(Line::TooLong(head)) => {
                let text = String::from_utf8_lossy(&head);
                match framing::top_level_id(&text).and_then(|raw| framing::normal_id(&raw)) {
                    Some(id) if pending.remove(&id) => framing::lost_answer(&id).into_bytes(),
                    _ => continue,
                }
            }
        };
        if !write_line(output, &line).await {
            return;
        }
    }
    let mut left: Vec<String> = pending.drain().collect();
    left.sort();
    for id in left {
        if !write_line(output, unanswered_at_close(&id).as_bytes()).await {
            return;
        }
    }
}

/// The client's `initialize` (its id and line) when the owner has not answered it yet.
fn unanswered_initialize(
    handshake: &[Vec<u8>],
    pending: &HashSet<String>,
) -> Option<(String, Vec<u8>)> {
    let line = handshake.first()?;
    let p = probe(line)?;
    let id = p.id.as_ref()?.to_string();
    (p.method.as_deref() == Some("initialize") && pending.contains(&id)).then(|| (id, line.clone()))
}

/// Send one line to `up`; whether it went.
async fn send_line(up: &mut Upstream, line: &[u8]) -> bool {
    up.writer.write_all(line).await.is_ok()
        && up.writer.write_all(b"\n").await.is_ok()
        && up.writer.flush().await.is_ok()
}

async fn write_line<O: AsyncWrite + Unpin>(output: &mut O, line: &[u8]) -> bool {
    output.write_all(line).await.is_ok()
        && output.write_all(b"\n").await.is_ok()
        && output.flush().await.is_ok()
}

/// Send the remembered handshake to a new upstream; its answer to `initialize` is swallowed
/// (anything else it sends before that, too: the client has not asked for it).
async fn replay(up: &mut Upstream, handshake: &[Vec<u8>]) -> Result<()> {
    let lost = || HubError::HandoverFailed("closed the connection");
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
                let buf = match up.lines.recv().await {
                    Some(Line::Whole(buf)) => buf,
                    Some(Line::TooLong(_)) => continue,
                    None => return Err(lost()),
                };
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
///
/// One piece (about 80 lines): the two arms of one `select!`, the client's lines and the
/// owner's, share the handshake and the pending ids; each arm is a flat sequence (answer an
/// over-long line, remember or forget an id, pass the line on).
async fn pump<O: AsyncWrite + Unpin>(
    from_client: &mut mpsc::Receiver<Line>,
    output: &mut O,
    up: &mut Upstream,
    handshake: &mut Vec<Vec<u8>>,
    pending: &mut HashSet<String>,
) -> Ended {
    loop {
        tokio::select! {
            line = from_client.recv() => {
                let line = match line {
                    None => return Ended::Client,
                    Some(Line::Whole(line)) => line,
                    Some(Line::TooLong(head)) => {
                        // never passed on (the owner would drop it), but answered
                        if let Some(answer) = framing::answer_for_too_long_request(&head)
                            && !write_line(output, answer.as_bytes()).await
                        {
                            return Ended::Client;
                        }
                        continue;
                    }
                };
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
            line = up.lines.recv() => {
                let buf = match line {
                    None => return Ended::Upstream,
                    Some(Line::Whole(buf)) => buf,
                    Some(Line::TooLong(head)) => {
                        // an answer too long to pass on: its call gets an error instead
                        let text = String::from_utf8_lossy(&head);
                        let is_answer = framing::top_level_member(&text, "method").is_none();
                        let id = framing::top_level_id(&text)
                            .and_then(|raw| framing::normal_id(&raw))
                            .filter(|_| is_answer);
                        match id {
                            Some(id) if pending.remove(&id) => {
                                if !write_line(output, framing::lost_answer(&id).as_bytes()).await {
                                    return Ended::Client;
                                }
                            }
                            _ => tracing::warn!("a message from the owner too long to pass on was dropped"),
                        }
                        continue;
                    }
                };
                if let Some(Probe { id: Some(id), method: None }) = probe(&buf) {
                    pending.remove(&id.to_string());
                }
                if !write_line(output, &buf).await {
                    // stdout is gone: the client is gone
                    return Ended::Client;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// Nothing is dropped silently: an answer too long to pass on becomes an error for its
    /// call, and a request too long to pass on is answered (and never forwarded).
    #[tokio::test]
    async fn lines_too_long_to_pass_on_are_answered_with_their_ids() {
        let (mut client, relay_in) = tokio::io::duplex(1 << 16);
        let (relay_out, client_out) = tokio::io::duplex(1 << 16);
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (r, w) = tokio::io::split(ours);
        let reconnect: Reconnect = Box::new(|| {
            Box::pin(async {
                Err(crate::hub::HubError::NoOwnerAnswers {
                    store: "/nowhere".into(),
                })
            })
        });
        tokio::spawn(run(
            relay_in,
            relay_out,
            ready(Upstream::new(r, w, 1)),
            reconnect,
        ));
        // the owner: answers call 7 with a line over the cap, call 8 normally
        let (owner_r, mut owner_w) = tokio::io::split(theirs);
        let owner = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(owner_r).lines();
            let mut seen = vec![];
            while let Ok(Some(l)) = lines.next_line().await {
                let v: serde_json::Value = serde_json::from_str(&l).unwrap();
                seen.push(v["id"].clone());
                let answer = if v["id"] == 7 {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":7,"result":{{"x":"{}"}}}}"#,
                        "a".repeat(framing::MAX_LINE_BYTES)
                    )
                } else {
                    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, v["id"])
                };
                owner_w.write_all(answer.as_bytes()).await.unwrap();
                owner_w.write_all(b"\n").await.unwrap();
            }
            seen
        });
        let big_request = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"x":"{}"}}}}"#,
            "b".repeat(framing::MAX_LINE_BYTES)
        );
        let writer = tokio::spawn(async move {
            for line in [
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#.to_owned(),
                big_request,
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#.to_owned(),
            ] {
                client.write_all(line.as_bytes()).await.unwrap();
                client.write_all(b"\n").await.unwrap();
            }
            client
        });
        let mut out = tokio::io::BufReader::new(client_out).lines();
        let mut answers = std::collections::HashMap::new();
        while answers.len() < 3 {
            let l = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
                .await
                .expect("every call is answered")
                .unwrap()
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            answers.insert(v["id"].to_string(), v);
        }
        assert!(
            answers["7"]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("longer than the 16 MiB"),
            "{}",
            answers["7"]
        );
        assert_eq!(answers["9"]["error"]["code"], -32600);
        assert!(answers["8"]["result"].is_object());
        drop(writer.await.unwrap());
        drop(out);
        let seen = owner.await.unwrap();
        assert_eq!(
            seen,
            vec![7, 8],
            "the over-long request never reached the owner"
        );
    }

    /// An owner that goes away before it answered the client's `initialize` (it was shutting
    /// down as the client came) loses nothing: the next owner gets the client's own
    /// `initialize`, and its answer reaches the client, never a "lost call" error.
    #[tokio::test]
    async fn an_initialize_the_owner_left_unanswered_goes_to_the_next_owner() {
        let (mut client, relay_in) = tokio::io::duplex(1 << 16);
        let (relay_out, client_out) = tokio::io::duplex(1 << 16);
        // the first owner reads the initialize and closes without a word
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (r, w) = tokio::io::split(ours);
        let first = tokio::spawn(async move {
            let (owner_r, owner_w) = tokio::io::split(theirs);
            let mut lines = tokio::io::BufReader::new(owner_r).lines();
            let got = lines.next_line().await.unwrap().unwrap();
            drop((lines, owner_w));
            got
        });
        // the next owner answers whatever it gets
        let (next_ours, next_theirs) = tokio::io::duplex(1 << 16);
        let mut next = Some(next_ours);
        let reconnect: Reconnect = Box::new(move || {
            let up = next.take();
            Box::pin(async move {
                let up = up.ok_or(crate::hub::HubError::NoOwnerAnswers {
                    store: "/nowhere".into(),
                })?;
                let (r, w) = tokio::io::split(up);
                Ok(Upstream::new(r, w, 2))
            })
        });
        let second = tokio::spawn(async move {
            let (owner_r, mut owner_w) = tokio::io::split(next_theirs);
            let mut lines = tokio::io::BufReader::new(owner_r).lines();
            let l = lines.next_line().await.unwrap().unwrap();
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            let answer = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"ok":2}}}}"#,
                v["id"]
            );
            owner_w.write_all(answer.as_bytes()).await.unwrap();
            owner_w.write_all(b"\n").await.unwrap();
            owner_w.flush().await.unwrap();
            (v, lines, owner_w)
        });
        tokio::spawn(run(
            relay_in,
            relay_out,
            ready(Upstream::new(r, w, 1)),
            reconnect,
        ));
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n")
            .await
            .unwrap();
        let mut out = tokio::io::BufReader::new(client_out).lines();
        let l = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
            .await
            .expect("the client's initialize is answered")
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["id"], 1, "{v}");
        assert_eq!(v["result"]["ok"], 2, "the next owner's answer: {v}");
        assert!(first.await.unwrap().contains("initialize"));
        let (got, _kept_open, _w) = second.await.unwrap();
        assert_eq!(
            (got["id"].clone(), got["method"].clone()),
            (serde_json::json!(1), serde_json::json!("initialize")),
            "the client's own initialize, its id kept: {got}"
        );
    }
}
