//! A client of one `codex app-server` over its stdin/stdout, whatever spawned it: the process
//! layer hands over the child's pipes (any `AsyncRead` / `AsyncWrite`). Nothing here spawns.
//!
//! - One reader task reads every line of stdout (several messages often arrive in one read),
//!   framed by a `LinesCodec` with a maximum length: a longer line ends the client with
//!   [`ClientError::LineTooLong`] instead of growing a buffer without bound.
//! - Requests get ids 1, 2, …; each response goes to the caller that waits on its id.
//! - Every request from codex is answered by the reader task itself, at once, with the
//!   protocol's [`ServerRequest::decline`], before the event is passed on: an unanswered request
//!   blocks the turn forever, so no consumer can forget one.
//! - Opt-in ([`Client::with_answerer`]): a request a person may answer (see
//!   [`crate::approval::Question`]) is handed over as a [`CodexQuestion`] on a second stream instead; a task
//!   of its own writes the answer, or the decline when the deadline passes or its `Asked` is
//!   dropped, so it is still never left unanswered. Every other request is declined at once.
//! - Notifications (and a record of each declined request) go to one event stream, in order.
//! - [`Client::close`] closes stdin (EOF is the app-server's clean shutdown) and waits for
//!   stdout to end. Killing the process and its descendants is the process layer's job.
//!
//! Only the protocol's [`Request`]s (and its one notification) can be written, so only its
//! whitelist of methods, built from its fixed templates, ever reaches codex; each request's
//! result is read as its typed response.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::protocol::{
    self, Incoming, InitializeResponse, Message, Notification, ProtocolError, Request, RequestId,
    RpcError, ServerRequest, ThreadOpened, TurnParams, TurnRef,
};
use crate::approval::Question;
use crate::approval::from_codex::{self as approval, ChangeBook, CodexQuestion};

/// Default cap on one line from codex. A `thread/resume` result carries the thread's whole
/// history in one line, so this is generous; the exec path's cap is a separate setting.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// What can go wrong talking to an app-server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request was refused by codex.
    #[error("codex app-server refused `{method}` (code {}): {}", .error.code, .error.message)]
    Refused {
        method: &'static str,
        error: RpcError,
    },
    /// Codex sent a line longer than the cap.
    #[error("codex app-server sent a line longer than {limit} bytes; the connection was closed")]
    LineTooLong { limit: usize },
    /// Codex sent something that is not its protocol.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// stdout ended (the process exited or closed it) before the answer came.
    #[error("codex app-server closed its output")]
    Closed,
    /// Reading or writing the pipes failed.
    #[error("could not talk to codex app-server: {0}")]
    Io(#[from] std::io::Error),
}

/// What the event stream carries, in the order codex sent it.
#[derive(Debug)]
pub enum Event {
    Notification(Notification),
    /// Codex asked something; it has already been answered with its refusal.
    Declined(ServerRequest),
    /// The reader stopped: `None` at a clean end of stdout, else why. Always the last event.
    Closed(Option<ClientError>),
}

/// Where the reader hands the requests a person may answer, and how long they may take.
struct Answerer {
    asked: mpsc::UnboundedSender<CodexQuestion>,
    deadline: Duration,
    book: ChangeBook,
}

type Pending =
    Arc<std::sync::Mutex<Option<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>>>;

/// One app-server connection.
pub struct Client<W> {
    writer: Arc<Mutex<Option<W>>>,
    pending: Pending,
    next_id: AtomicI64,
    /// Bytes read from codex's stdout so far (every line, with its newline).
    read: Arc<std::sync::atomic::AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Client<W> {
    /// Wrap the pipes of a spawned `codex app-server`. Returns the client and its event stream
    /// (unbounded so that the reader never blocks on a slow consumer while a response waits
    /// behind it; the consumer is the session actor, which drains it during a turn).
    pub fn new<R>(
        stdout: R,
        stdin: W,
        max_line_bytes: usize,
    ) -> (Self, mpsc::UnboundedReceiver<Event>)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        Self::build(stdout, stdin, max_line_bytes, None)
    }

    /// [`Client::new`], and each request a person may answer (an approval, a question, a nested
    /// server's elicitation: whatever [`approval::parse`] reads) comes on the second stream as
    /// an [`CodexQuestion`] instead of being declined at once. Codex gets the decline if no answer came
    /// within `deadline`, if its `Asked` (or the stream) is dropped, or if the request is not
    /// a question. The consumer answers only a question of the turn it runs, from the client
    /// connection that started that turn.
    pub fn with_answerer<R>(
        stdout: R,
        stdin: W,
        max_line_bytes: usize,
        deadline: Duration,
    ) -> (
        Self,
        mpsc::UnboundedReceiver<Event>,
        mpsc::UnboundedReceiver<CodexQuestion>,
    )
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (asked, asked_rx) = mpsc::unbounded_channel();
        let answerer = Answerer {
            asked,
            deadline,
            book: ChangeBook::default(),
        };
        let (client, events) = Self::build(stdout, stdin, max_line_bytes, Some(answerer));
        (client, events, asked_rx)
    }

    fn build<R>(
        stdout: R,
        stdin: W,
        max_line_bytes: usize,
        answerer: Option<Answerer>,
    ) -> (Self, mpsc::UnboundedReceiver<Event>)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let writer = Arc::new(Mutex::new(Some(stdin)));
        let pending: Pending = Arc::new(std::sync::Mutex::new(Some(HashMap::new())));
        let (events, rx) = mpsc::unbounded_channel();
        let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let reader = tokio::spawn(read_loop(
            FramedRead::new(stdout, LinesCodec::new_with_max_length(max_line_bytes)),
            (max_line_bytes, read.clone()),
            writer.clone(),
            pending.clone(),
            events,
            answerer,
        ));
        let client = Client {
            writer,
            pending,
            next_id: AtomicI64::new(1),
            read,
            reader,
        };
        (client, rx)
    }

    async fn write_line(&self, line: String) -> Result<(), ClientError> {
        write_to(&self.writer, line).await
    }

    /// Send a request and wait for its result, read as the request's response type (no
    /// timeout here: the caller owns the deadline). Only the protocol's templates are requests,
    /// so only its whitelisted methods can be sent.
    pub async fn request<R: Request>(&self, msg: &R) -> Result<R::Response, ClientError> {
        let method = R::METHOD.as_str();
        if R::METHOD.is_notification() {
            return Err(ProtocolError::Invalid {
                field: "method",
                reason: format!("`{method}` is a notification, not a request"),
            }
            .into());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = msg.to_line(id)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            match pending.as_mut() {
                Some(map) => map.insert(id, tx),
                None => return Err(ClientError::Closed),
            };
        }
        if let Err(e) = self.write_line(line).await {
            if let Some(map) = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                map.remove(&id);
            }
            return Err(e);
        }
        match rx.await {
            Ok(Ok(v)) => serde_json::from_value(v)
                .map_err(|e| ProtocolError::Malformed(format!("`{method}` result: {e}")).into()),
            Ok(Err(error)) => Err(ClientError::Refused { method, error }),
            Err(_) => Err(ClientError::Closed),
        }
    }

    /// Send a notification (`initialized`).
    async fn notify<N: Message>(&self, msg: &N) -> Result<(), ClientError> {
        self.write_line(msg.to_line(0)?).await
    }

    /// `initialize` then `initialized`.
    pub async fn handshake(&self, version: &str) -> Result<InitializeResponse, ClientError> {
        let result = self.request(&protocol::initialize(version)).await?;
        self.notify(&protocol::initialized()).await?;
        Ok(result)
    }

    /// `thread/start`, `thread/resume` or `thread/fork` (as built by the protocol), parsed.
    pub async fn open_thread<R>(&self, msg: &R) -> Result<ThreadOpened, ClientError>
    where
        R: Request<Response = ThreadOpened>,
    {
        self.request(msg).await
    }

    /// `turn/start`; returns the turn's id. The turn's progress comes on the event stream.
    pub async fn start_turn(&self, turn: &TurnParams<'_>) -> Result<TurnRef, ClientError> {
        let started = self.request(&protocol::turn_start(turn)?).await?;
        Ok(started.id)
    }

    /// `turn/start` with the approval policy `approvals` (see [`protocol::turn_start_with`]).
    pub async fn start_turn_with(
        &self,
        turn: &TurnParams<'_>,
        approvals: protocol::Approvals,
    ) -> Result<TurnRef, ClientError> {
        let msg = protocol::turn_start_with(turn, approvals)?;
        Ok(self.request(&msg).await?.id)
    }

    /// `turn/start` with the approval policy `approvals` and, for `structured`, an
    /// `outputSchema` (see [`protocol::turn_start_with_schema`]).
    pub async fn start_turn_with_schema(
        &self,
        turn: &TurnParams<'_>,
        approvals: protocol::Approvals,
        schema: Option<&Value>,
    ) -> Result<TurnRef, ClientError> {
        let msg = protocol::turn_start_with_schema(turn, approvals, schema)?;
        Ok(self.request(&msg).await?.id)
    }

    /// Bytes read from codex's stdout so far.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Close stdin (the app-server's clean shutdown) and wait until its stdout ends. Wrap this
    /// in a timeout, then kill: a stuck process keeps stdout open.
    pub async fn close(self) {
        if let Some(mut w) = self.writer.lock().await.take() {
            let _ = w.shutdown().await;
        }
        let _ = self.reader.await;
    }
}

async fn write_to<W: AsyncWrite + Unpin>(
    writer: &Mutex<Option<W>>,
    mut line: String,
) -> Result<(), ClientError> {
    line.push('\n');
    let mut guard = writer.lock().await;
    let w = guard.as_mut().ok_or(ClientError::Closed)?;
    w.write_all(line.as_bytes()).await?;
    w.flush().await?;
    Ok(())
}

async fn read_loop<R, W>(
    mut lines: FramedRead<R, LinesCodec>,
    (max_line_bytes, read): (usize, Arc<std::sync::atomic::AtomicU64>),
    writer: Arc<Mutex<Option<W>>>,
    pending: Pending,
    events: mpsc::UnboundedSender<Event>,
    mut answerer: Option<Answerer>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let end = loop {
        let line = match lines.next().await {
            None => break None,
            Some(Ok(line)) => {
                read.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
                line
            }
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                break Some(ClientError::LineTooLong {
                    limit: max_line_bytes,
                });
            }
            Some(Err(LinesCodecError::Io(e))) => break Some(ClientError::Io(e)),
        };
        if line.trim().is_empty() {
            continue;
        }
        // each line is parsed once, here: the change book reads the same typed notification
        // the event stream carries
        match protocol::parse_line(&line) {
            Ok(Incoming::Response { id, result }) => {
                let waiter = match id {
                    RequestId::Int(n) => pending
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .as_mut()
                        .and_then(|m| m.remove(&n)),
                    RequestId::Str(_) => None,
                };
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(result);
                    }
                    None => tracing::warn!(?id, "codex app-server answered a request never sent"),
                }
            }
            Ok(Incoming::Request(req)) if answerer.is_some() => {
                let a = answerer.as_ref().expect("checked");
                match approval::parse(&req, &a.book) {
                    Ok(question) => hand_over(a, &writer, req, question),
                    Err(why) => {
                        tracing::info!(method = %req.method, %why, "codex app-server request declined");
                        if let Err(e) = write_to(&writer, req.decline()).await {
                            tracing::warn!(method = %req.method, error = %e, "could not answer codex app-server");
                        }
                        let _ = events.send(Event::Declined(req));
                    }
                }
            }
            Ok(Incoming::Request(req)) => {
                // answered here, before anything else is read: never left pending
                if let Err(e) = write_to(&writer, req.decline()).await {
                    tracing::warn!(method = %req.method, error = %e, "could not answer codex app-server");
                }
                let _ = events.send(Event::Declined(req));
            }
            Ok(Incoming::Notification(n)) => {
                if let Some(a) = answerer.as_mut() {
                    a.book.observe(&n);
                }
                let _ = events.send(Event::Notification(n));
            }
            Err(e) => break Some(ClientError::Protocol(e)),
        }
    };
    // every waiter learns that no answer will come; later requests fail at once
    pending.lock().unwrap_or_else(|p| p.into_inner()).take();
    let _ = events.send(Event::Closed(end));
}

/// Hand `question` to the answerer; a task of its own writes the answer, or the decline at the
/// deadline or when its `Asked` is dropped (the reader goes on reading meanwhile).
fn hand_over<W>(
    a: &Answerer,
    writer: &Arc<Mutex<Option<W>>>,
    req: ServerRequest,
    question: Question,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let deadline = Instant::now() + a.deadline;
    let decline = approval::AnswerLine::decline(&req);
    let method = req.method.clone();
    let (asking, rx) = approval::ask(req, question, deadline);
    // a closed stream drops the Asked at once: the task below sends the decline
    let _ = a.asked.send(asking);
    let writer = writer.clone();
    tokio::spawn(async move {
        let answer = match tokio::time::timeout_at(deadline.into(), rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => decline,
            Err(_) => {
                tracing::info!(%method, "no answer in time: codex app-server request declined");
                decline
            }
        };
        if let Err(e) = write_to(&writer, answer.line().to_owned()).await {
            tracing::warn!(%method, error = %e, "could not answer codex app-server");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;
    use tokio::io::{AsyncBufReadExt, BufReader, duplex};

    /// A scripted app-server on the other end of two in-memory pipes.
    fn pair() -> (
        Client<tokio::io::DuplexStream>,
        mpsc::UnboundedReceiver<Event>,
        tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
        tokio::io::DuplexStream,
    ) {
        let (client_out, server_in) = duplex(1 << 16);
        let (server_out, client_in) = duplex(1 << 16);
        let (client, events) = Client::new(client_in, client_out, 4096);
        (
            client,
            events,
            BufReader::new(server_in).lines(),
            server_out,
        )
    }

    async fn send(w: &mut tokio::io::DuplexStream, v: &str) {
        w.write_all(v.as_bytes()).await.unwrap();
        w.write_all(b"\n").await.unwrap();
    }

    /// The client's end of [`answering_pair`], and the scripted server's.
    type AnsweringPair = (
        Client<tokio::io::DuplexStream>,
        mpsc::UnboundedReceiver<Event>,
        mpsc::UnboundedReceiver<CodexQuestion>,
        tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
        tokio::io::DuplexStream,
    );

    /// A scripted app-server like [`pair`], with the answerer on.
    fn answering_pair(deadline: Duration) -> AnsweringPair {
        let (client_out, server_in) = duplex(1 << 16);
        let (server_out, client_in) = duplex(1 << 16);
        let (client, events, asked) = Client::with_answerer(client_in, client_out, 4096, deadline);
        (
            client,
            events,
            asked,
            BufReader::new(server_in).lines(),
            server_out,
        )
    }

    fn approval(id: i64) -> String {
        json!({"method": "item/commandExecution/requestApproval", "id": id,
            "params": {"threadId": "01a22759-e393-7f71-bea4-35a12106bc11", "turnId": "01a22753-3cfc-7740-b25a-145bedef01df", "itemId": "c", "command": "touch /x", "cwd": "/w"}})
        .to_string()
    }

    #[tokio::test]
    async fn a_handed_request_gets_the_answer_given_and_others_are_declined_at_once() {
        let (_client, mut events, mut asked, mut from_client, mut to_client) =
            answering_pair(Duration::from_secs(60));
        send(&mut to_client, &approval(0)).await;
        // a kind no person answers is still declined at once, while the first one waits
        send(
            &mut to_client,
            r#"{"method":"item/tool/call","id":1,"params":{"threadId":"T"}}"#,
        )
        .await;
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":1,"result":{"contentItems":[],"success":false}}"#
        );
        assert!(
            matches!(events.recv().await, Some(Event::Declined(r)) if r.id == RequestId::Int(1))
        );
        let a = asked.recv().await.unwrap().asked;
        assert!(matches!(&a.question, Question::Command { command, .. } if command == "touch /x"));
        assert_eq!(
            a.answer(crate::approval::Decision::AcceptOnce, None),
            crate::approval::Decision::AcceptOnce
        );
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":0,"result":{"decision":"accept"}}"#
        );
    }

    /// A `fileChange` item of `method` with `changes` (`None`: without its list of changes).
    fn file_change(method: &str, changes: Option<Value>) -> String {
        let mut item = json!({"type": "fileChange", "id": "p1", "status": "inProgress"});
        if let Some(c) = changes {
            item["changes"] = c;
        }
        json!({"method": method, "params": {"threadId": "01a22759-e393-7f71-bea4-35a12106bc11",
            "turnId": "01a22753-3cfc-7740-b25a-145bedef01df", "item": item}})
        .to_string()
    }

    fn change_approval(id: i64) -> String {
        json!({"method": "item/fileChange/requestApproval", "id": id,
            "params": {"threadId": "01a22759-e393-7f71-bea4-35a12106bc11", "turnId": "01a22753-3cfc-7740-b25a-145bedef01df", "itemId": "p1"}})
        .to_string()
    }

    #[tokio::test]
    async fn a_file_change_is_asked_from_the_one_reading_of_its_line() {
        let (_client, mut events, mut asked, mut from_client, mut to_client) =
            answering_pair(Duration::from_secs(60));
        let changes = json!([{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hi\n"}]);
        send(&mut to_client, &file_change("item/started", Some(changes))).await;
        send(&mut to_client, &change_approval(0)).await;
        // the turn's consumer gets the very item the book took in
        let Some(Event::Notification(Notification::ItemStarted { item, .. })) = events.recv().await
        else {
            panic!("the item is passed on")
        };
        assert_eq!(item.paths().collect::<Vec<_>>(), ["/w/a.txt"]);
        let a = asked.recv().await.unwrap().asked;
        let Question::FileChange {
            files: Some(files), ..
        } = &a.question
        else {
            panic!("{:?}", a.question)
        };
        assert_eq!(
            files
                .iter()
                .map(|f| (f.path.as_str(), f.diff.as_str()))
                .collect::<Vec<_>>(),
            [("/w/a.txt", "hi\n")]
        );
        a.answer(crate::approval::Decision::Decline, None);
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":0,"result":{"decision":"decline"}}"#
        );
        // once codex completed it, an approval naming it is declined at once
        send(
            &mut to_client,
            &file_change("item/completed", Some(json!([]))),
        )
        .await;
        send(&mut to_client, &change_approval(1)).await;
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":1,"result":{"decision":"decline"}}"#
        );
    }

    #[tokio::test]
    async fn a_file_change_without_its_list_of_changes_closes_the_client_and_nothing_is_asked() {
        let (_client, mut events, mut asked, _from_client, mut to_client) =
            answering_pair(Duration::from_secs(60));
        send(&mut to_client, &file_change("item/started", None)).await;
        send(&mut to_client, &change_approval(0)).await;
        assert!(matches!(
            events.recv().await,
            Some(Event::Closed(Some(ClientError::Protocol(_))))
        ));
        assert!(asked.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_dropped_or_late_answerer_declines() {
        let (_client, _events, mut asked, mut from_client, mut to_client) =
            answering_pair(Duration::from_millis(300));
        send(&mut to_client, &approval(0)).await;
        drop(asked.recv().await.unwrap());
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":0,"result":{"decision":"decline"}}"#
        );
        send(&mut to_client, &approval(1)).await;
        let kept = asked.recv().await.unwrap().asked;
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":1,"result":{"decision":"decline"}}"#
        );
        // too late: the decline already went
        assert_eq!(
            kept.answer(crate::approval::Decision::AcceptOnce, None),
            crate::approval::Decision::Decline
        );
        // nobody reads the handed stream any more: declined all the same
        drop(asked);
        send(&mut to_client, &approval(2)).await;
        assert_eq!(
            from_client.next_line().await.unwrap().unwrap(),
            r#"{"id":2,"result":{"decision":"decline"}}"#
        );
    }

    #[tokio::test]
    async fn responses_find_their_request_and_requests_are_declined_at_once() {
        let (client, mut events, mut from_client, mut to_client) = pair();
        let server = tokio::spawn(async move {
            let init: Value =
                serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(init["method"], "initialize");
            // a server request (id 0) and a notification arrive before the response, in one write
            to_client
                .write_all(
                    concat!(
                        r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T","command":"rm -rf /"}}"#,
                        "\n",
                        r#"{"method":"configWarning","params":{"summary":"bubblewrap"}}"#,
                        "\n",
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let answer = from_client.next_line().await.unwrap().unwrap();
            assert_eq!(answer, r#"{"id":0,"result":{"decision":"decline"}}"#);
            send(
                &mut to_client,
                &json!({"id": init["id"], "result": {"userAgent": "x"}}).to_string(),
            )
            .await;
            let initialized = from_client.next_line().await.unwrap().unwrap();
            assert_eq!(initialized, r#"{"method":"initialized"}"#);
            (from_client, to_client)
        });
        let result = client.handshake("0").await.unwrap();
        assert_eq!(result.user_agent, "x");
        let (_from_client, to_client) = server.await.unwrap();
        assert!(
            matches!(events.recv().await, Some(Event::Declined(r)) if r.id == RequestId::Int(0))
        );
        assert!(matches!(
            events.recv().await,
            Some(Event::Notification(Notification::Other { method })) if method == "configWarning"
        ));
        drop(to_client);
        assert!(matches!(events.recv().await, Some(Event::Closed(None))));
        // after stdout ended nothing waits forever
        let t = protocol::ThreadId::parse("01a22759-e393-7f71-bea4-35a12106bc11").unwrap();
        let err = client
            .start_turn(&TurnParams {
                thread: &t,
                prompt: &crate::security::prompt::Prompt::parse("prompt", "x".into()).unwrap(),
                sandbox: None,
                cwd: Path::new("/w"),
                model: None,
                effort: None,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Closed), "{err}");
    }

    #[tokio::test]
    async fn an_error_response_names_the_method_and_a_pending_request_fails_on_eof() {
        let (client, _events, mut from_client, mut to_client) = pair();
        let client = Arc::new(client);
        let c = client.clone();
        let first = tokio::spawn(async move {
            c.request(&protocol::thread_start(Path::new("/w"), None, false).unwrap())
                .await
        });
        let l: Value =
            serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap();
        send(
            &mut to_client,
            &json!({"id": l["id"], "error": {"code": -32600, "message": "no"}}).to_string(),
        )
        .await;
        let err = first.await.unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "codex app-server refused `thread/start` (code -32600): no"
        );
        let c = client.clone();
        let second = tokio::spawn(async move {
            let t = protocol::ThreadId::parse("01a22759-e393-7f71-bea4-35a12106bc11").unwrap();
            c.request(&protocol::clean_background_terminals(&t)).await
        });
        from_client.next_line().await.unwrap().unwrap();
        drop(to_client);
        assert!(matches!(second.await.unwrap(), Err(ClientError::Closed)));
    }

    #[tokio::test]
    async fn a_line_over_the_cap_closes_the_client() {
        let (_client, mut events, _from_client, mut to_client) = pair();
        send(
            &mut to_client,
            &format!(r#"{{"method":"x","params":"{}"}}"#, "a".repeat(5000)),
        )
        .await;
        match events.recv().await {
            Some(Event::Closed(Some(ClientError::LineTooLong { limit: 4096 }))) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn close_sends_eof_and_waits_for_the_end_of_output() {
        let (client, mut events, mut from_client, to_client) = pair();
        let server = tokio::spawn(async move {
            // the app-server exits on stdin EOF
            assert!(from_client.next_line().await.unwrap().is_none());
            drop(to_client);
        });
        client.close().await;
        server.await.unwrap();
        assert!(matches!(events.recv().await, Some(Event::Closed(None))));
    }

    #[tokio::test]
    async fn a_line_that_is_not_the_protocol_closes_the_client() {
        let (_client, mut events, _from_client, mut to_client) = pair();
        send(&mut to_client, "not json").await;
        assert!(matches!(
            events.recv().await,
            Some(Event::Closed(Some(ClientError::Protocol(_))))
        ));
    }
}
