//! A scripted mock of the OpenAI Responses API that the real codex binary can talk to.
//!
//! ```ignore
//! let mock = MockApi::start().await;
//! mock.push(Reply::exec_command("echo hi"));
//! mock.push(Reply::message("done").with_delay(Duration::from_millis(300)));
//! // run codex with `-c` + each of mock.provider_overrides() ...
//! let reqs = mock.responses_requests();
//! assert!(reqs[1].function_call_outputs()[0].1.contains("hi"));
//! ```
//!
//! Every request (any method/path) is recorded. `POST /v1/responses` is answered with the next
//! scripted [`Reply`] (first a matching routed reply, see [`MockApi::push_matching`], else the
//! FIFO queue, else the default reply: a plain message `ok`). Any other route gets a JSON 404.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::watch;

/// Path of the Responses endpoint under the mock's root (the provider's `base_url` ends in `/v1`).
pub const RESPONSES_PATH: &str = "/v1/responses";

/// How long `wait_for_*` helpers wait by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

fn next_id(prefix: &str) -> String {
    format!("{prefix}_{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------------
// Output items

/// An assistant `message` output item with one `output_text` part.
pub fn message_item(text: &str) -> Value {
    json!({
        "type": "message",
        "role": "assistant",
        "id": next_id("msg"),
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// A `function_call` output item (classic request shape, e.g. `-m gpt-5.5`). `arguments` is
/// serialized to the JSON string the API sends.
pub fn function_call_item(call_id: &str, name: &str, arguments: &Value) -> Value {
    json!({
        "type": "function_call",
        "id": next_id("fc"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments.to_string(),
    })
}

/// A `function_call` output item for a tool inside a `namespace` tool: how codex offers the
/// tools of an MCP server (`mcp__<server>` with the server's tools inside, for models without
/// tool search, e.g. `-m mock-model`). `arguments` is serialized as for [`function_call_item`].
pub fn namespaced_call_item(
    call_id: &str,
    namespace: &str,
    name: &str,
    arguments: &Value,
) -> Value {
    let mut item = function_call_item(call_id, name, arguments);
    item["namespace"] = Value::String(namespace.to_owned());
    item
}

// ---------------------------------------------------------------------------------------------
// Replies

/// What the stream does after the output items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// `response.completed` with usage, then a clean end of stream.
    Completed,
    /// Abort the connection (the HTTP/1 chunked body is never terminated).
    Drop,
    /// End the stream cleanly without `response.completed`.
    Eof,
    /// Keep the stream open, sending nothing more, until the client goes away.
    Hang,
}

#[derive(Clone, Debug)]
enum Kind {
    /// `response.created`, one `response.output_item.done` per item, then the ending.
    Stream { items: Vec<Value>, ending: Ending },
    /// Exactly these SSE events (each event's `type` names it), then end of stream.
    Events(Vec<Value>),
    /// A non-SSE HTTP answer.
    HttpError { status: u16, body: String },
}

/// One scripted answer to a `POST /v1/responses`. Build with the constructors, refine with the
/// `with_*` / `then_*` modifiers.
#[derive(Clone, Debug)]
pub struct Reply {
    kind: Kind,
    delay: Duration,
    event_delay: Duration,
    usage: (u64, u64),
}

impl Reply {
    fn stream(items: Vec<Value>, ending: Ending) -> Self {
        Reply {
            kind: Kind::Stream { items, ending },
            delay: Duration::ZERO,
            event_delay: Duration::ZERO,
            usage: (10, 5),
        }
    }

    /// A final assistant message with `text` (codex shows it as an `agent_message`).
    pub fn message(text: impl AsRef<str>) -> Self {
        Self::stream(vec![message_item(text.as_ref())], Ending::Completed)
    }

    /// A call of the tool `name` with JSON `arguments`, with a fresh `call_id` (`call_<n>`).
    pub fn function_call(name: &str, arguments: Value) -> Self {
        Self::function_call_with_id(&next_id("call"), name, arguments)
    }

    /// A call of the tool `name` with JSON `arguments` and the given `call_id`.
    pub fn function_call_with_id(call_id: &str, name: &str, arguments: Value) -> Self {
        Self::stream(
            vec![function_call_item(call_id, name, &arguments)],
            Ending::Completed,
        )
    }

    /// A call of the tool `name` of the namespace tool `namespace` (an MCP server's tools, see
    /// [`namespaced_call_item`]) with JSON `arguments` and the given `call_id`.
    pub fn namespaced_call(call_id: &str, namespace: &str, name: &str, arguments: Value) -> Self {
        Self::stream(
            vec![namespaced_call_item(call_id, namespace, name, &arguments)],
            Ending::Completed,
        )
    }

    /// Asks codex to run a shell command: `exec_command` with `{"cmd": cmd}` (needs the classic
    /// request shape, i.e. pin `-m gpt-5.5`).
    pub fn exec_command(cmd: &str) -> Self {
        Self::function_call("exec_command", json!({ "cmd": cmd }))
    }

    /// A completed response with these raw output items.
    pub fn items(items: Vec<Value>) -> Self {
        Self::stream(items, Ending::Completed)
    }

    /// Exactly these SSE events, in order (each `{"type": ..., ...}`), then a clean end of stream.
    /// Nothing is added: include `response.created` / `response.completed` yourself.
    pub fn events(events: Vec<Value>) -> Self {
        Reply {
            kind: Kind::Events(events),
            ..Self::stream(Vec::new(), Ending::Eof)
        }
    }

    /// An HTTP error with `status` and `body` (served as JSON if it parses as JSON, else text).
    /// Note: 400 bodies reach the user verbatim; 5xx become a generic message in codex.
    pub fn http_error(status: u16, body: impl Into<String>) -> Self {
        Reply {
            kind: Kind::HttpError {
                status,
                body: body.into(),
            },
            ..Self::stream(Vec::new(), Ending::Eof)
        }
    }

    /// An HTTP error with an OpenAI-style JSON body `{"error":{"message":..,"type":..}}`.
    pub fn api_error(status: u16, message: &str) -> Self {
        Self::http_error(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
                .to_string(),
        )
    }

    /// Sends the SSE headers and `response.created`, then aborts the connection.
    pub fn drop_connection() -> Self {
        Self::stream(Vec::new(), Ending::Drop)
    }

    /// Sends the SSE headers and `response.created`, then keeps the stream open forever (until
    /// codex disconnects). For cancellation tests.
    pub fn hang() -> Self {
        Self::stream(Vec::new(), Ending::Hang)
    }

    /// Waits `delay` before sending anything (the request counts as in flight meanwhile).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits `delay` between consecutive SSE events.
    pub fn with_event_delay(mut self, delay: Duration) -> Self {
        self.event_delay = delay;
        self
    }

    /// Reports this usage in `response.completed` (default 10 input / 5 output tokens).
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = (input_tokens, output_tokens);
        self
    }

    /// Appends a raw output item (after the existing ones). Ignored for `events`/`http_error`.
    pub fn with_item(mut self, item: Value) -> Self {
        if let Kind::Stream { items, .. } = &mut self.kind {
            items.push(item);
        }
        self
    }

    /// Appends an assistant message item.
    pub fn then_message(self, text: &str) -> Self {
        self.with_item(message_item(text))
    }

    /// After the items, aborts the connection instead of sending `response.completed`.
    pub fn then_drop_connection(self) -> Self {
        self.with_ending(Ending::Drop)
    }

    /// After the items, ends the stream cleanly but without `response.completed`.
    pub fn then_end_without_completion(self) -> Self {
        self.with_ending(Ending::Eof)
    }

    /// After the items, keeps the stream open forever instead of completing.
    pub fn then_hang(self) -> Self {
        self.with_ending(Ending::Hang)
    }

    fn with_ending(mut self, new: Ending) -> Self {
        if let Kind::Stream { ending, .. } = &mut self.kind {
            *ending = new;
        }
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded requests

/// One request the mock received (any route).
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Arrival index among all requests to this mock, from 0.
    pub seq: usize,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Path, e.g. `/v1/responses`.
    pub path: String,
    /// Raw query string, if any.
    pub query: Option<String>,
    /// Headers, names lowercase, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy UTF-8).
    pub raw_body: String,
    /// The body parsed as JSON (`Value::Null` if empty or not JSON).
    pub body: Value,
    /// When it arrived.
    pub received_at: Instant,
}

/// Text of a message `content` (a string or an array of parts with `text`).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Text of a tool output payload (a string, an array of content parts, or `{content: ..}`).
fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(_) => content_text(output),
        Value::Object(o) => o
            .get("content")
            .map(content_text)
            .unwrap_or_else(|| output.to_string()),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl RecordedRequest {
    /// Whether this is a `POST /v1/responses`.
    pub fn is_responses(&self) -> bool {
        self.method == "POST" && self.path == RESPONSES_PATH
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the raw body contains `needle`.
    pub fn body_contains(&self, needle: &str) -> bool {
        self.raw_body.contains(needle)
    }

    /// The requested `model`.
    pub fn model(&self) -> Option<&str> {
        self.body["model"].as_str()
    }

    /// The top-level `instructions` (classic shape only).
    pub fn instructions(&self) -> Option<&str> {
        self.body["instructions"].as_str()
    }

    /// The top-level `tools` array (empty if absent).
    pub fn tools(&self) -> Vec<Value> {
        self.body["tools"].as_array().cloned().unwrap_or_default()
    }

    /// Names of the offered tools (`name`, or `type` for built-ins such as `web_search`).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .filter_map(|t| t["name"].as_str().or_else(|| t["type"].as_str()))
            .map(str::to_owned)
            .collect()
    }

    /// The `input` items (empty if absent).
    pub fn input(&self) -> Vec<Value> {
        self.body["input"].as_array().cloned().unwrap_or_default()
    }

    /// Texts of the messages with `role` (e.g. `"user"`, `"developer"`, `"assistant"`) in
    /// `input`, one string per message, in order.
    pub fn message_texts(&self, role: &str) -> Vec<String> {
        self.input()
            .iter()
            .filter(|i| i["role"] == role && i["type"].as_str().is_none_or(|t| t == "message"))
            .map(|i| content_text(&i["content"]))
            .collect()
    }

    /// Texts of all user messages in `input` (codex also sends its environment context and
    /// AGENTS.md as user messages, so look for your prompt with `contains`).
    pub fn user_texts(&self) -> Vec<String> {
        self.message_texts("user")
    }

    /// Whether any user message in `input` contains `needle`.
    pub fn user_text_contains(&self, needle: &str) -> bool {
        self.user_texts().iter().any(|t| t.contains(needle))
    }

    /// The text of the last user message in `input`.
    pub fn last_user_text(&self) -> Option<String> {
        self.user_texts().pop()
    }

    /// `(call_id, output text)` of every `function_call_output` item in `input`.
    pub fn function_call_outputs(&self) -> Vec<(String, String)> {
        self.outputs_of_type(&["function_call_output"])
    }

    /// `(call_id, output text)` of every `function_call_output` and `custom_tool_call_output`.
    pub fn tool_outputs(&self) -> Vec<(String, String)> {
        self.outputs_of_type(&["function_call_output", "custom_tool_call_output"])
    }

    /// The output text sent back for `call_id`, if any.
    pub fn tool_output(&self, call_id: &str) -> Option<String> {
        self.tool_outputs()
            .into_iter()
            .find(|(id, _)| id == call_id)
            .map(|(_, o)| o)
    }

    fn outputs_of_type(&self, types: &[&str]) -> Vec<(String, String)> {
        self.input()
            .iter()
            .filter(|i| i["type"].as_str().is_some_and(|t| types.contains(&t)))
            .map(|i| {
                (
                    i["call_id"].as_str().unwrap_or_default().to_owned(),
                    output_text(&i["output"]),
                )
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The server

type Predicate = Box<dyn Fn(&RecordedRequest) -> bool + Send + Sync>;
type Builder = Box<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

struct Inner {
    queue: VecDeque<Reply>,
    routed: Vec<(Predicate, Reply)>,
    /// Replies made from the request they answer (tried before `routed`).
    built: Vec<(Predicate, Builder)>,
    default: Reply,
    requests: Vec<RecordedRequest>,
}

struct Shared {
    inner: Mutex<Inner>,
    in_flight: watch::Sender<usize>,
    peak: AtomicUsize,
    responses_seen: watch::Sender<usize>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not hide the recordings from the others.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counts a `/v1/responses` request as in flight until dropped (with the response body).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: Arc<Shared>) -> Self {
        shared.in_flight.send_modify(|n| {
            *n += 1;
            shared.peak.fetch_max(*n, Ordering::SeqCst);
        });
        InFlight(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n -= 1);
    }
}

/// A running mock Responses API on `127.0.0.1:<random port>`, stopped when dropped.
pub struct MockApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for MockApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockApi").field("addr", &self.addr).finish()
    }
}

impl MockApi {
    /// Binds `127.0.0.1:0` and starts serving on the current tokio runtime.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                routed: Vec::new(),
                built: Vec::new(),
                default: Reply::message("ok"),
                requests: Vec::new(),
            }),
            in_flight: watch::Sender::new(0),
            peak: AtomicUsize::new(0),
            responses_seen: watch::Sender::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind mock API on 127.0.0.1:0");
        let addr = listener.local_addr().expect("mock API local addr");
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("mock_api: server error: {e}");
            }
        });
        MockApi {
            addr,
            shared,
            server,
        }
    }

    /// The bound address (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The provider base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues `reply` for the next unrouted `/v1/responses` request (FIFO by arrival).
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Queues several replies, in order.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().queue.extend(replies);
    }

    /// Registers a one-shot reply for the first future request matching `pred`. Routed replies
    /// are tried before the queue, oldest registration first.
    pub fn push_matching(
        &self,
        pred: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static,
        reply: Reply,
    ) {
        self.shared.lock().routed.push((Box::new(pred), reply));
    }

    /// Registers a one-shot reply, made by `build` from the request it answers, for the first
    /// future request matching `pred` (tried before every other reply): for a call that needs
    /// what codex just reported, such as the session id of a running terminal.
    pub fn push_built(
        &self,
        pred: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static,
        build: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) {
        self.shared
            .lock()
            .built
            .push((Box::new(pred), Box::new(build)));
    }

    /// Registers a one-shot reply for the first future request whose user messages contain
    /// `marker`. A thread's history keeps its prompt, so several replies pushed for the same
    /// marker script that thread's successive requests in order.
    pub fn push_for_user_text(&self, marker: &str, reply: Reply) {
        let marker = marker.to_owned();
        self.push_matching(move |r| r.user_text_contains(&marker), reply);
    }

    /// Replaces the reply used when nothing is queued or routed (initially `Reply::message("ok")`).
    pub fn set_default(&self, reply: Reply) {
        self.shared.lock().default = reply;
    }

    /// Number of queued plus routed replies not consumed yet.
    pub fn pending_replies(&self) -> usize {
        let inner = self.shared.lock();
        inner.queue.len() + inner.routed.len() + inner.built.len()
    }

    /// Every request received so far (all routes), in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The `POST /v1/responses` requests received so far, in arrival order.
    pub fn responses_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.is_responses())
            .cloned()
            .collect()
    }

    /// The requests to any other route (answered 404), in arrival order.
    pub fn other_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| !r.is_responses())
            .cloned()
            .collect()
    }

    /// Number of `/v1/responses` requests received so far.
    pub fn responses_count(&self) -> usize {
        *self.shared.responses_seen.borrow()
    }

    /// `/v1/responses` requests currently being answered (delayed, streaming or hanging).
    pub fn in_flight(&self) -> usize {
        *self.shared.in_flight.borrow()
    }

    /// The highest number of simultaneously in-flight `/v1/responses` requests seen.
    pub fn peak_concurrency(&self) -> usize {
        self.shared.peak.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` `/v1/responses` requests have arrived; returns them all.
    /// Panics after `limit`.
    pub async fn wait_for_responses(&self, n: usize, limit: Duration) -> Vec<RecordedRequest> {
        let mut rx = self.shared.responses_seen.subscribe();
        let ok = tokio::time::timeout(limit, async { rx.wait_for(|c| *c >= n).await.is_ok() })
            .await
            .unwrap_or(false);
        assert!(
            ok,
            "mock API: waited {limit:?} for {n} /v1/responses requests, got {}",
            self.responses_count()
        );
        self.responses_requests()
    }

    /// Waits until the number of in-flight `/v1/responses` requests satisfies `cond`.
    /// Panics after `limit`.
    pub async fn wait_for_in_flight(&self, cond: impl Fn(usize) -> bool, limit: Duration) {
        let mut rx = self.shared.in_flight.subscribe();
        let ok = tokio::time::timeout(limit, async { rx.wait_for(|n| cond(*n)).await.is_ok() })
            .await
            .unwrap_or(false);
        assert!(
            ok,
            "mock API: in-flight condition not met within {limit:?} (in flight: {})",
            self.in_flight()
        );
    }

    /// The `key=value` overrides (pass each after a `-c`) that point codex at this mock:
    /// `model_provider="mock"` and the `model_providers.mock` table (responses wire API,
    /// `env_key="OPENAI_API_KEY"`, no retries).
    pub fn provider_overrides(&self) -> Vec<String> {
        vec![
            r#"model_provider="mock""#.to_owned(),
            format!(
                r#"model_providers.mock={{name="mock",base_url="{}",wire_api="responses",env_key="OPENAI_API_KEY",request_max_retries=0,stream_max_retries=0}}"#,
                self.base_url()
            ),
        ]
    }

    /// [`MockApi::provider_overrides`] with a `-c` before each, ready to splice into argv.
    pub fn provider_args(&self) -> Vec<String> {
        self.provider_overrides()
            .into_iter()
            .flat_map(|o| ["-c".to_owned(), o])
            .collect()
    }

    /// The same settings as [`MockApi::provider_overrides`], as `config.toml` text.
    pub fn config_toml(&self) -> String {
        format!(
            "model_provider = \"mock\"\n\n{}",
            self.provider_table_toml()
        )
    }

    fn provider_table_toml(&self) -> String {
        format!(
            "[model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n\
             env_key = \"OPENAI_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            self.base_url()
        )
    }

    /// Writes the provider settings into `<codex_home>/config.toml`: the top-level
    /// `model_provider` key is put first and the `[model_providers.mock]` table last, around any
    /// existing content (which must not set those keys itself). Panics on I/O errors.
    pub fn write_config_toml(&self, codex_home: &Path) {
        let path = codex_home.join("config.toml");
        let existing = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("read {}: {e}", path.display()),
        };
        let text = if existing.trim().is_empty() {
            self.config_toml()
        } else {
            format!(
                "model_provider = \"mock\"\n\n{}\n\n{}",
                existing.trim_end(),
                self.provider_table_toml()
            )
        };
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match record_and_pick(&shared, &method, &uri, &headers, &body) {
        Ok((reply, guard)) => serve_reply(reply, guard).await,
        Err(what) => {
            eprintln!("mock_api: unscripted route {what} -> 404");
            json_response(
                StatusCode::NOT_FOUND,
                json!({"error": {"message": format!("mock: no route for {what}"), "type": "not_found"}})
                    .to_string(),
            )
        }
    }
}

/// Records the request; for `/v1/responses` picks its reply and marks it in flight, for any
/// other route returns `Err("METHOD /path")`.
fn record_and_pick(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Reply, InFlight), String> {
    let mut inner = shared.lock();
    let request = RecordedRequest {
        seq: inner.requests.len(),
        method: method.as_str().to_owned(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        raw_body: String::from_utf8_lossy(body).into_owned(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        received_at: Instant::now(),
    };

    if !request.is_responses() {
        let what = format!("{} {}", request.method, request.path);
        inner.requests.push(request);
        return Err(what);
    }

    let built = inner
        .built
        .iter()
        .position(|(pred, _)| pred(&request))
        .map(|i| inner.built.remove(i).1(&request));
    let reply = match built {
        Some(r) => r,
        None => match inner.routed.iter().position(|(pred, _)| pred(&request)) {
            Some(i) => inner.routed.remove(i).1,
            None => match inner.queue.pop_front() {
                Some(r) => r,
                None => inner.default.clone(),
            },
        },
    };
    let guard = InFlight::enter(shared.clone());
    inner.requests.push(request);
    drop(inner);
    shared.responses_seen.send_modify(|c| *c += 1);
    Ok((reply, guard))
}

fn json_response(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("build response")
}

fn sse_event(event: &Value) -> Bytes {
    let ty = event["type"].as_str().unwrap_or("message");
    Bytes::from(format!("event: {ty}\ndata: {event}\n\n"))
}

async fn serve_reply(reply: Reply, guard: InFlight) -> Response {
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let (events, ending) = match reply.kind {
        Kind::HttpError { status, body } => {
            let status = StatusCode::from_u16(status).expect("valid HTTP status");
            let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
                "application/json"
            } else {
                "text/plain"
            };
            return Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, content_type)
                .body(Body::from(body))
                .expect("build response");
        }
        Kind::Events(events) => (events, Ending::Eof),
        Kind::Stream { items, ending } => {
            let id = next_id("resp");
            let mut events = vec![json!({"type": "response.created", "response": {"id": id}})];
            events.extend(
                items
                    .into_iter()
                    .map(|item| json!({"type": "response.output_item.done", "item": item})),
            );
            if ending == Ending::Completed {
                let (input, output) = reply.usage;
                events.push(json!({
                    "type": "response.completed",
                    "response": {"id": id, "usage": {
                        "input_tokens": input,
                        "input_tokens_details": null,
                        "output_tokens": output,
                        "output_tokens_details": null,
                        "total_tokens": input + output,
                    }},
                }));
            }
            (events, ending)
        }
    };

    struct St {
        events: VecDeque<Value>,
        ending: Ending,
        event_delay: Duration,
        sent: usize,
        done: bool,
        _guard: InFlight,
    }
    let state = St {
        events: events.into(),
        ending,
        event_delay: reply.event_delay,
        sent: 0,
        done: false,
        _guard: guard,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(event) = st.events.pop_front() {
            if st.sent > 0 && !st.event_delay.is_zero() {
                tokio::time::sleep(st.event_delay).await;
            }
            st.sent += 1;
            return Some((Ok::<Bytes, std::io::Error>(sse_event(&event)), st));
        }
        match st.ending {
            Ending::Completed | Ending::Eof => None,
            Ending::Drop => {
                st.done = true;
                if st.sent > 0 {
                    // Let the events already written reach the client before the abort
                    // (hyper does not flush buffered chunks when the body errors).
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "mock: scripted connection drop",
                    )),
                    st,
                ))
            }
            Ending::Hang => {
                std::future::pending::<()>().await;
                None
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("build response")
}
