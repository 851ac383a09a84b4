//! The MCP surface (rmcp over stdio): tool definitions with input and output schemas,
//! argument validation with field-named errors, structured results, progress notifications
//! derived from Codex's events (plus a heartbeat), and cancellation.
//!
//! Architecture invariant: this module knows nothing of processes or sled; it validates
//! arguments, resolves paths, and calls [`Bridge`].

pub mod elicit;
pub mod framing;
pub mod params;
pub mod results;
pub mod roots;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskManager};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use schemars::JsonSchema;
use tokio_util::sync::CancellationToken;

use crate::actors::{Bridge, ClientContext, Progress};
use crate::error::Error;
use crate::security::redact::redact;

/// What hosts read before using the tools.
pub const INSTRUCTIONS: &str = "\
codex-mcp-bridge runs the OpenAI Codex CLI for you.
- `codex`: give Codex a task in a working directory. Pass back the returned `sessionId` to \
continue the same conversation later, even after the server restarts. The sandbox is \
`read-only` unless you ask for `workspace-write` on that very call; it is never remembered.
- `query`: a quick question without files or a session. `search`: a web search summary.
- `structured`: an answer that validates against your JSON Schema (returned in `data`).
- `review`: Codex's review of a repository's uncommitted changes, a branch, or a commit.
- `listSessions`, `getSession`, `closeSession` manage sessions; `ping` reports health.
Long turns send progress notifications; cancelling a call stops Codex at once.";

/// The rmcp handler.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) bridge: Bridge,
    /// Calls running or finished as MCP tasks (one store per process, each task visible to the
    /// connection that started it only).
    pub(crate) tasks: Tasks,
    /// The connection's client context (settings, codex environment, CODEX_HOME).
    pub(crate) client: Arc<ClientContext>,
    /// The connection's client roots (the default working directory).
    pub(crate) client_roots: Arc<roots::ClientRoots>,
    /// Which connection this is, for the tasks it starts.
    scope: Scope,
}

/// Which client connection a server instance serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// One stdio or socket connection (a number unique in this process).
    Connection(u64),
    /// The HTTP listener: a connection is the request's `Mcp-Session-Id`.
    Http,
}

/// Whose a task is: the connection that started it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TaskOwner {
    Connection(u64),
    /// An HTTP session, or (`None`) the session-less HTTP requests of the 2026-07-28
    /// protocol, which have no connection to tell them apart: they all hold the operator's
    /// bearer token.
    Http(Option<String>),
}

impl Scope {
    /// A new connection's scope.
    fn connection() -> Scope {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Scope::Connection(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// The owner of what a request of this connection starts or asks for.
    fn owner(self, ctx: &RequestContext<RoleServer>) -> TaskOwner {
        match self {
            Scope::Connection(n) => TaskOwner::Connection(n),
            Scope::Http => TaskOwner::Http(
                ctx.extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|p| p.headers.get("mcp-session-id"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            ),
        }
    }
}

/// One task store for every connection a process serves (rmcp's [`TaskManager`]), plus who
/// started each task: `tasks/get`, `tasks/update` and `tasks/cancel` from any other connection
/// get "unknown task", as for an id that never existed.
#[derive(Clone, Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Task id → its owner, and when the manager has surely forgotten the task.
    owners:
        Arc<std::sync::Mutex<std::collections::HashMap<String, (TaskOwner, std::time::Instant)>>>,
}

impl Tasks {
    /// An empty store.
    pub fn new() -> Tasks {
        Tasks::default()
    }

    fn owners(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (TaskOwner, std::time::Instant)>>
    {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record `owner` for a new task; forget owners of tasks the manager dropped. rmcp keeps a
    /// task for its TTL from creation plus one more TTL after it ended, which is at most two
    /// TTLs after creation since a task never outlives its TTL.
    fn record(&self, id: &str, owner: TaskOwner, ttl: Duration) {
        let now = std::time::Instant::now();
        let mut owners = self.owners();
        owners.retain(|_, (_, until)| *until > now);
        owners.insert(
            id.to_owned(),
            (owner, now + 2 * ttl + Duration::from_secs(60)),
        );
    }

    /// Whether `owner` started task `id`.
    fn owned_by(&self, id: &str, owner: &TaskOwner) -> bool {
        self.owners().get(id).is_some_and(|(o, _)| o == owner)
    }
}

impl McpServer {
    /// A server over a running bridge, for the owning process's own client.
    pub fn new(bridge: Bridge) -> Self {
        let client = bridge.own_context().clone();
        McpServer::for_client(bridge, client)
    }

    /// A server over a running bridge for one client connection with its own context.
    pub fn for_client(bridge: Bridge, client: Arc<ClientContext>) -> Self {
        McpServer {
            bridge,
            tasks: Tasks::new(),
            client,
            client_roots: Default::default(),
            scope: Scope::connection(),
        }
    }

    /// A server for requests of the HTTP listener (the owning process's own client context;
    /// an HTTP session is a connection).
    pub fn for_http(bridge: Bridge) -> Self {
        McpServer {
            scope: Scope::Http,
            ..McpServer::new(bridge)
        }
    }

    /// Share `tasks` (one task store per process, whatever the connection).
    pub fn with_tasks(mut self, tasks: Tasks) -> Self {
        self.tasks = tasks;
        self
    }
}

/// The formats JSON Schema 2020-12 defines (§7.3). Every other `format` is dropped from the
/// tools' schemas.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// schemars tags Rust numbers with formats of its own (`uint64`, `uint32`, `uint`, `int64`,
/// `double`, …) that are no JSON Schema format: Ajv, in the TypeScript SDK and most hosts,
/// warns `unknown format "uint64" ignored` for each. They are dropped; an unsigned integer
/// keeps its meaning as `minimum: 0`.
fn standard_formats_only(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let Some(format) = obj.get("format").and_then(|f| f.as_str()) else {
        return;
    };
    if STANDARD_FORMATS.contains(&format) {
        return;
    }
    let unsigned = format.starts_with("uint");
    obj.remove("format");
    if unsigned {
        obj.entry("minimum").or_insert(serde_json::json!(0));
    }
}

/// An optional argument with a fixed value set (`sandbox`, …) lists its string values only:
/// schemars adds `null` to the `enum` of an `Option`, which hosts show their models as a value
/// to pick; omitting the argument is the way to leave it unset.
fn string_values_only(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(values) = obj.get_mut("enum").and_then(|e| e.as_array_mut())
        && values.iter().any(|v| v.is_string())
    {
        values.retain(|v| !v.is_null());
    }
}

/// The JSON Schema (draft 2020-12) of `T`, with standard formats only.
fn schema<T: JsonSchema>() -> Arc<rmcp::model::JsonObject> {
    let settings = schemars::generate::SchemaSettings::draft2020_12()
        .with_transform(schemars::transform::RecursiveTransform(
            standard_formats_only,
        ))
        .with_transform(schemars::transform::RecursiveTransform(string_values_only));
    match serde_json::to_value(settings.into_generator().into_root_schema_for::<T>()) {
        Ok(serde_json::Value::Object(o)) => Arc::new(o),
        // a derived schema is always an object
        other => unreachable!("schemars produced a non-object schema: {other:?}"),
    }
}

fn annotations(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}

/// A tool's run: parsed arguments in, a tool result out (argument errors are `isError` results).
type Handler = for<'a> fn(
    &'a McpServer,
    rmcp::model::JsonObject,
    &'a CallCtx,
) -> futures::future::BoxFuture<'a, CallToolResult>;

/// One tool: its name, definition and handler.
struct ToolEntry {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// readOnly, destructive, idempotent, openWorld hints.
    hints: [bool; 4],
    input: fn() -> Arc<rmcp::model::JsonObject>,
    output: fn() -> Arc<rmcp::model::JsonObject>,
    /// Run as an MCP task for clients that declare the tasks extension (the long tools).
    task: bool,
    run: Handler,
}

/// Every tool, in the order `tools/list` shows them: the one place a tool name is written.
const TOOLS: &[ToolEntry] = {
    use params::*;
    use results::*;
    &[
        ToolEntry {
            name: "codex",
            title: "Codex",
            description: "Run a Codex turn in a persistent session: edit, explain or test code in \
                          a working directory. Returns the answer and the sessionId to continue \
                          with.",
            hints: [false, true, false, true],
            input: schema::<CodexParams>,
            output: schema::<TurnResult>,
            task: true,
            run: |s, args, ctx| Box::pin(s.codex(args, ctx)),
        },
        ToolEntry {
            name: "query",
            title: "Ask Codex",
            description: "Ask Codex a one-off question (no files, no session, read-only).",
            hints: [true, false, false, true],
            input: schema::<QueryParams>,
            output: schema::<TurnResult>,
            task: false,
            run: |s, args, ctx| Box::pin(s.query(args, ctx)),
        },
        ToolEntry {
            name: "search",
            title: "Web search",
            description: "Search the web with Codex and get a synthesised answer (read-only).",
            hints: [true, false, false, true],
            input: schema::<SearchParams>,
            output: schema::<TurnResult>,
            task: false,
            run: |s, args, ctx| Box::pin(s.search(args, ctx)),
        },
        ToolEntry {
            name: "structured",
            title: "Structured answer",
            description: "Ask Codex for JSON that validates against a JSON Schema; the validated \
                          JSON is returned in `data` (one re-ask on a validation failure).",
            hints: [true, false, false, true],
            input: schema::<StructuredParams>,
            output: schema::<TurnResult>,
            task: true,
            run: |s, args, ctx| Box::pin(s.structured(args, ctx)),
        },
        ToolEntry {
            name: "review",
            title: "Code review",
            description: "Codex's code review of a git repository: uncommitted changes, changes \
                          against a base branch, or a commit. Findings are returned with \
                          priorities and locations.",
            // codex runs the review under workspace-write (git may write its index), so not
            // read-only
            hints: [false, false, false, true],
            input: schema::<ReviewParams>,
            output: schema::<TurnResult>,
            task: true,
            run: |s, args, ctx| Box::pin(s.review(args, ctx)),
        },
        ToolEntry {
            name: "listSessions",
            title: "List sessions",
            description: "List stored sessions, newest first, a page at a time.",
            hints: [true, false, true, false],
            input: schema::<ListSessionsParams>,
            output: schema::<SessionList>,
            task: false,
            run: |s, args, _| Box::pin(std::future::ready(s.list_sessions(args))),
        },
        ToolEntry {
            name: "getSession",
            title: "Get session",
            description: "Show one stored session.",
            hints: [true, false, true, false],
            input: schema::<GetSessionParams>,
            output: schema::<SessionResult>,
            task: false,
            run: |s, args, _| Box::pin(s.get_session(args)),
        },
        ToolEntry {
            name: "closeSession",
            title: "Close session",
            description: "Forget a session (cancelling its running turn); optionally delete \
                          Codex's thread.",
            hints: [false, true, true, false],
            input: schema::<CloseSessionParams>,
            output: schema::<SessionResult>,
            task: false,
            run: |s, args, _| Box::pin(s.close_session(args)),
        },
        ToolEntry {
            name: "forkSession",
            title: "Fork session",
            description: "Fork a session between turns into a new session with a copy of its \
                          conversation (same working directory), to try another direction; \
                          both then go on separately.",
            hints: [false, false, false, false],
            input: schema::<ForkSessionParams>,
            output: schema::<ForkResult>,
            task: false,
            run: |s, args, _| Box::pin(s.fork_session(args)),
        },
        ToolEntry {
            name: "steer",
            title: "Steer a running turn",
            description: "Add a message (e.g. a correction) to a session's running Codex turn \
                          without cancelling it; returns once Codex took it. The turn's result \
                          lists it under `steered`.",
            hints: [false, false, false, false],
            input: schema::<SteerParams>,
            output: schema::<SteerResult>,
            task: false,
            run: |s, args, _| Box::pin(s.steer(args)),
        },
        ToolEntry {
            name: "ping",
            title: "Ping",
            description: "Health: codex version, store, sessions, running and queued turns, \
                          limits.",
            hints: [true, false, true, false],
            input: schema::<PingParams>,
            output: schema::<PingResult>,
            task: false,
            run: |s, args, _| Box::pin(s.ping(args)),
        },
    ]
};

/// The tool called `name`, if there is one.
fn tool_named(name: &str) -> Option<&'static ToolEntry> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Every tool, with its schemas and annotations. Without `allow_danger`, `danger-full-access`
/// is not offered as a sandbox.
pub fn tool_list(allow_danger: bool) -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|t| {
            let mut input = (*(t.input)()).clone();
            if !allow_danger
                && let Some(e) = input
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("sandbox"))
                    .and_then(|s| s.get_mut("enum"))
                    .and_then(|e| e.as_array_mut())
            {
                e.retain(|v| v != "danger-full-access");
            }
            let [read_only, destructive, idempotent, open_world] = t.hints;
            Tool::new(t.name, t.description, Arc::new(input))
                .with_title(t.title)
                .with_raw_output_schema((t.output)())
                .with_annotations(annotations(
                    t.title,
                    read_only,
                    destructive,
                    idempotent,
                    open_world,
                ))
        })
        .collect()
}

/// Parse tool arguments, naming the field at fault.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    args: rmcp::model::JsonObject,
) -> Result<T, Error> {
    serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        // serde's message can quote the offending value; keep messages short
        let inner: String = inner.chars().take(300).collect();
        if path == "." {
            // a missing or unknown field: serde names it in the message
            let field = inner.split('`').nth(1).unwrap_or("arguments").to_owned();
            Error::invalid(field, inner)
        } else {
            Error::invalid(path, inner)
        }
    })
}

/// A turn tool's error (`codex`, `query`, `search`, `structured`, `review`) as an `isError`
/// tool result: a redacted message naming the field or cause, and a [`results::TurnResult`]
/// (the partial answer, `timedOut`, the error's kind) that matches the tool's `outputSchema`.
pub(crate) fn error_result(e: &Error, partial: Option<results::TurnResult>) -> CallToolResult {
    let message = redact(&e.to_string()).into_owned();
    let kind = error_kind(e);
    let mut value = partial.unwrap_or_default();
    value.timed_out = matches!(e, Error::TimedOut { .. });
    value.error = Some(results::ErrorReport {
        kind,
        message: message.clone(),
    });
    let mut text = message;
    if !value.response.is_empty() {
        text.push_str("\n\nPartial answer:\n");
        text.push_str(&value.response);
    }
    let mut structured = serde_json::to_value(&value).unwrap_or_default();
    let text = fit(text, &mut structured);
    let mut r = CallToolResult::structured_error(structured);
    r.content = vec![ContentBlock::text(text)];
    r
}

/// The most a tool result may take in one message: what a relay passes on
/// ([`framing::MAX_LINE_BYTES`]), less room for the JSON-RPC envelope, the id and a task's
/// wrapping.
pub(crate) const MAX_RESULT_BYTES: usize = framing::MAX_LINE_BYTES - 1024 * 1024;

fn json_len(v: &(impl serde::Serialize + ?Sized)) -> usize {
    serde_json::to_vec(v).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// `text` cut (at a character boundary) so that it and `marker` take at most `max` bytes as a
/// JSON string.
fn cut(text: &str, max: usize, marker: &str) -> String {
    let room = max.saturating_sub(json_len(marker));
    let mut keep = text.len();
    loop {
        let len = json_len(&text[..keep]);
        if len <= room || keep == 0 {
            break;
        }
        // escapes make the JSON longer than the text: shrink in proportion, then some
        let mut next = ((keep as u128 * room as u128) / len as u128) as usize;
        next = next.min(keep - 1).saturating_sub(next / 64);
        while !text.is_char_boundary(next) {
            next -= 1;
        }
        keep = next;
    }
    format!("{}{marker}", &text[..keep])
}

/// Keep a result within [`MAX_RESULT_BYTES`], so that a relay can always pass it on. A long
/// answer is carried once in full, in `structuredContent.response`; the text block (which
/// repeats it for clients that ignore structured content) is then cut, with a marker saying
/// where the whole answer is. Only when the structured content alone is too long (an operator
/// who raised the line cap) is `response` cut too, with a marker and `truncated: true`.
fn fit(text: String, structured: &mut serde_json::Value) -> String {
    let mut s_len = json_len(structured);
    if s_len > MAX_RESULT_BYTES / 4 * 3
        && let Some(response) = structured.get("response").and_then(|r| r.as_str())
    {
        let over = s_len - MAX_RESULT_BYTES / 4 * 3;
        let marker =
            "\n\n[codex-mcp-bridge: the answer was cut here: it is too long for one message]";
        let cut_response = cut(response, json_len(response).saturating_sub(over), marker);
        structured["response"] = cut_response.into();
        structured["truncated"] = true.into();
        s_len = json_len(structured);
    }
    let t_len = json_len(&text);
    if s_len.saturating_add(t_len) <= MAX_RESULT_BYTES {
        return text;
    }
    let marker = format!(
        "\n\n[codex-mcp-bridge: this text was cut here: the answer is {} bytes, too long to \
         send twice in one message; the whole answer is in structuredContent.response]",
        structured
            .get("response")
            .and_then(|r| r.as_str())
            .map_or(0, str::len)
    );
    cut(&text, MAX_RESULT_BYTES.saturating_sub(s_len), &marker)
}

/// The error of a tool whose result is not a turn (`listSessions`, `getSession`,
/// `closeSession`, `ping`) as an `isError` tool result: the redacted message only, no
/// `structuredContent`. Those tools' output schemas describe their success, and hosts on the
/// TypeScript SDK validate `structuredContent` even on an error: a copy that broke the schema
/// hid the bridge's sentence behind `Structured content does not match the tool's output
/// schema`.
pub(crate) fn plain_error(e: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        redact(&e.to_string()).into_owned(),
    )])
}

fn error_kind(e: &Error) -> results::ErrorKind {
    use crate::codex::events::FailureKind;
    use results::ErrorKind as K;
    match e {
        Error::InvalidArgument { .. } => K::InvalidArgument,
        Error::Config(_) => K::InvalidSetting,
        Error::Process(p) if p.is_not_found() => K::CodexNotFound,
        Error::Process(_) => K::Io,
        Error::TimedOut { .. } => K::TimedOut,
        Error::Cancelled { .. } => K::Cancelled,
        Error::Codex { kind, .. } => match kind {
            FailureKind::Auth => K::Auth,
            FailureKind::RateLimit => K::RateLimit,
            FailureKind::ContextLength => K::ContextLength,
            FailureKind::TurnFailed => K::TurnFailed,
            FailureKind::Crashed => K::Crashed,
            FailureKind::PolicyMismatch => K::PolicyMismatch,
        },
        Error::OutputCap { .. } => K::OutputCap,
        Error::Busy(_) => K::Busy,
        Error::SessionFailed(_) => K::SessionFailed,
        Error::Store(_) => K::Store,
        Error::Hub(_) => K::Hub,
        Error::Io { .. } => K::Io,
    }
}

/// A success result: structured content plus a text block.
pub(crate) fn ok_result(text: String, value: impl serde::Serialize) -> CallToolResult {
    let mut structured = serde_json::to_value(value).unwrap_or_default();
    let text = fit(text, &mut structured);
    let mut r = CallToolResult::structured(structured);
    r.content = vec![ContentBlock::text(text)];
    r
}

/// Where one call's progress goes.
#[derive(Clone)]
pub(crate) enum ProgressTarget {
    /// `notifications/progress` for the request's progress token.
    Notify {
        peer: rmcp::Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
    },
    /// The status message of the call's task (read by `tasks/get`).
    Task(TaskContext),
}

/// One tool call's cancellation and progress target: a request's, or a task's.
pub(crate) struct CallCtx {
    pub ct: CancellationToken,
    pub progress: Option<ProgressTarget>,
    /// The client to ask for its roots, when it declares the roots capability.
    pub roots: Option<rmcp::Peer<RoleServer>>,
    /// Where the person behind the call can be asked (`approvals = ask`), when they can.
    pub ask: Option<elicit::Channel>,
}

/// The peer of a request whose client declares the roots capability.
fn roots_peer(ctx: &RequestContext<RoleServer>) -> Option<rmcp::Peer<RoleServer>> {
    ctx.client_capabilities()
        .is_some_and(|c| c.roots.is_some())
        .then(|| ctx.peer.clone())
}

impl CallCtx {
    /// The context of a plain (not task) request.
    pub(crate) fn of_request(ctx: &RequestContext<RoleServer>) -> Self {
        CallCtx {
            ct: ctx.ct.clone(),
            progress: ctx
                .meta
                .get_progress_token()
                .map(|token| ProgressTarget::Notify {
                    peer: ctx.peer.clone(),
                    token,
                }),
            roots: roots_peer(ctx),
            ask: elicit::Channel::of_request(ctx),
        }
    }
}

/// Forwards progress lines to the client, as `notifications/progress` with strictly increasing
/// progress or as the task's status message, plus a heartbeat every `heartbeat` while nothing
/// else happens (host timeouts reset on progress; the default 10 s keeps even a 30 s host
/// timeout alive). Stops when the returned guard is dropped.
pub(crate) fn progress_for(
    ctx: &CallCtx,
    heartbeat: Duration,
) -> (Option<Progress>, Option<ProgressGuard>) {
    let Some(target) = ctx.progress.clone() else {
        return (None, None);
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let task = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut n: u64 = 0;
        let mut last = String::from("starting");
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m { Some(m) => { last = m.clone(); m } None => break },
                _ = tokio::time::sleep(heartbeat) => format!("{last} ({}s elapsed)", started.elapsed().as_secs()),
            };
            n += 1;
            match &target {
                ProgressTarget::Notify { peer, token } => {
                    let p =
                        ProgressNotificationParam::new(token.clone(), n as f64).with_message(msg);
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
                ProgressTarget::Task(t) => t.set_status_message(msg),
            }
        }
    });
    let sink: Progress = Arc::new(move |m: String| {
        let _ = tx.send(m);
    });
    (Some(sink), Some(ProgressGuard(task)))
}

/// Ends the progress task.
pub(crate) struct ProgressGuard(tokio::task::JoinHandle<()>);

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Suggested interval between `tasks/get` polls.
pub const TASK_POLL_MS: u64 = 1_000;
/// How long a task's result stays available after the longest possible call ended.
pub const TASK_RESULT_GRACE: Duration = Duration::from_secs(300);

impl McpServer {
    /// A task's time-to-live. rmcp counts it from creation and aborts a task still running when
    /// it expires, so it exceeds the longest call (queue wait plus the largest timeout) by
    /// [`TASK_RESULT_GRACE`]; a finished task's result is kept for one more TTL.
    pub fn task_ttl(&self) -> Duration {
        self.client.config.max_timeout + self.bridge.shared().queue_timeout + TASK_RESULT_GRACE
    }

    /// Run one tool call to its result.
    async fn dispatch(
        &self,
        name: &str,
        args: rmcp::model::JsonObject,
        ctx: &CallCtx,
    ) -> Result<CallToolResult, McpError> {
        match tool_named(name) {
            Some(tool) => Ok((tool.run)(self, args, ctx).await),
            None => Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`",
                    name.chars().take(64).collect::<String>()
                ),
                None,
            )),
        }
    }

    /// Start a call as a task; its result is fetched with `tasks/get`.
    fn spawn_task(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        span: tracing::Span,
        roots: Option<rmcp::Peer<RoleServer>>,
        elicits: bool,
        owner: TaskOwner,
    ) -> rmcp::model::Task {
        use rmcp::task_manager::{TaskExit, TaskOptions};
        let this = self.clone();
        let options = TaskOptions::new()
            .with_ttl_ms(self.task_ttl().as_millis() as u64)
            .with_poll_interval_ms(TASK_POLL_MS)
            .with_status_message("starting");
        let task = self.tasks.manager.spawn(options, move |task| {
            Box::pin(tracing::Instrument::instrument(
                async move {
                    let cancel = CancellationToken::new();
                    // rmcp aborts a task past its TTL: dropping this cancels the turn, which
                    // kills its processes
                    let _kill_on_drop = cancel.clone().drop_guard();
                    let watcher = {
                        let (task, cancel) = (task.clone(), cancel.clone());
                        tokio::spawn(async move {
                            task.cancelled().await;
                            cancel.cancel();
                        })
                    };
                    let ctx = CallCtx {
                        ct: cancel.clone(),
                        progress: Some(ProgressTarget::Task(task.clone())),
                        roots,
                        ask: elicits.then(|| {
                            elicit::Channel::of_task(task.clone(), this.tasks.manager.clone())
                        }),
                    };
                    let result = this.dispatch(&name, args, &ctx).await;
                    watcher.abort();
                    match result {
                        _ if task.is_cancel_requested() => Err(TaskExit::Cancelled),
                        Ok(r) => Ok(this.scrub(r)),
                        Err(e) => Err(TaskExit::Error(e)),
                    }
                },
                span,
            ))
        });
        self.tasks.record(&task.task_id, owner, self.task_ttl());
        task
    }

    /// Task `id` if this request's connection started it; "unknown task" otherwise.
    fn own_task(&self, id: &str, ctx: &RequestContext<RoleServer>) -> Result<(), McpError> {
        if self.tasks.owned_by(id, &self.scope.owner(ctx)) {
            Ok(())
        } else {
            tracing::debug!(task = %id, "a request for a task of another connection or none");
            Err(self.unknown_task(id))
        }
    }

    /// The last pass over a result for this connection: its host's literal secrets (nothing
    /// to do for the owning process's own client, whose secrets the process-wide redactor has).
    fn scrub(&self, mut r: CallToolResult) -> CallToolResult {
        let secrets = &self.client.secrets;
        if secrets.is_empty() {
            return r;
        }
        for block in &mut r.content {
            if let ContentBlock::Text(t) = block
                && let std::borrow::Cow::Owned(clean) = secrets.redact_literals(&t.text)
            {
                t.text = clean;
            }
        }
        if let Some(v) = &mut r.structured_content {
            secrets.redact_literals_json(v);
        }
        r
    }

    /// The error for a task id this process does not know.
    fn unknown_task(&self, id: &str) -> McpError {
        McpError::invalid_params(
            format!(
                "unknown task `{}`: a task lives in the memory of the codex-mcp-bridge process \
                 that owns the session store, and its result is kept for {} min after the call \
                 could last at most; it expired, or the owner stopped since (a call running then \
                 was lost; sessions are intact). Call the tool again.",
                id.chars().take(64).collect::<String>(),
                self.task_ttl().as_secs() / 60
            ),
            None,
        )
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("codex-mcp-bridge", env!("CARGO_PKG_VERSION"))
                .with_title("Codex MCP bridge"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        log_client(&context.peer);
        let declares_roots = context
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.roots.is_some());
        if declares_roots {
            let (roots, peer) = (self.client_roots.clone(), context.peer.clone());
            tokio::spawn(async move { roots.refresh(&peer).await });
        }
    }

    async fn on_roots_list_changed(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.client_roots.forget().await;
        let (roots, peer) = (self.client_roots.clone(), context.peer.clone());
        tokio::spawn(async move { roots.refresh(&peer).await });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tool_list(
            self.client.config.allow_danger,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        use tracing::Instrument;
        let args = request.arguments.unwrap_or_default();
        let name = request.name.to_string();
        let span = tracing::info_span!("tool_call", tool = %name, request = %context.id);
        let as_task = tool_named(&name).is_some_and(|t| t.task)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if as_task {
            let owner = self.scope.owner(&context);
            // a session-less HTTP task's `tasks/update` could come from any token holder: its
            // questions are asked of nobody
            let elicits =
                elicit::declares_form(&context) && !matches!(owner, TaskOwner::Http(None));
            let task = self.spawn_task(name, args, span, roots_peer(&context), elicits, owner);
            tracing::debug!(task = %task.task_id, "tool call started as a task");
            return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                task,
            )));
        }
        let result = self
            .dispatch(&name, args, &CallCtx::of_request(&context))
            .instrument(span)
            .await
            .map(|r| self.scrub(r))?;
        if result.is_error == Some(true) {
            tracing::info!(tool = %name, "tool call failed");
        }
        Ok(CallToolResponse::Complete(result))
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.own_task(&request.task_id, &context)?;
        self.tasks
            .manager
            .get_task(&request.task_id)
            .map(rmcp::model::GetTaskResult::new)
            .map_err(|_| self.unknown_task(&request.task_id))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.own_task(&request.task_id, &context)?;
        // a `codex` task asks codex's questions here (`approvals = ask`); the manager answers
        // for unknown ids and keys
        self.tasks
            .manager
            .update_task(&request.task_id, request.input_responses)
            .map_err(|e| {
                if self.tasks.manager.get_task(&request.task_id).is_err() {
                    self.unknown_task(&request.task_id)
                } else {
                    e
                }
            })
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.own_task(&request.task_id, &context)?;
        self.tasks
            .manager
            .cancel_task(&request.task_id)
            .map_err(|_| self.unknown_task(&request.task_id))
    }
}

/// One readable line for a client that finished `initialize`: its name, version and protocol
/// (rmcp's own line is a debug dump of the whole request; it is filtered out by default).
pub(crate) fn log_client(peer: &rmcp::Peer<RoleServer>) {
    match peer.peer_info() {
        Some(info) => tracing::info!(
            client = %info.client_info.name,
            client_version = %info.client_info.version,
            protocol = %info.protocol_version,
            // whether `approvals = ask` can reach a person through it
            elicitation = info.capabilities.elicitation.is_some(),
            "MCP client connected"
        ),
        None => tracing::info!("MCP client connected"),
    }
}

/// The README's tool table, generated from the real schemas (a test keeps README.md in sync).
pub fn tool_table(allow_danger: bool) -> String {
    let mut out = String::from("| tool | arguments (`*` required) | read-only |\n|---|---|---|\n");
    for t in tool_list(allow_danger) {
        let required: Vec<&str> = t
            .input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let args: Vec<String> = t
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| {
                p.keys()
                    .map(|k| {
                        if required.contains(&k.as_str()) {
                            format!("`{k}`*")
                        } else {
                            format!("`{k}`")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ro = t
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            t.name,
            if args.is_empty() {
                "—".to_owned()
            } else {
                args.join(", ")
            },
            if ro { "yes" } else { "no" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_readme_tool_table_matches_the_real_schemas() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("<!-- tools:start -->\n")
            .expect("README has the tools table markers")
            + 21;
        let end = readme.find("<!-- tools:end -->").expect("end marker");
        assert_eq!(
            &readme[start..end],
            tool_table(false),
            "README.md's tool table is out of date; paste the output of mcp::tool_table(false)"
        );
    }

    /// The committed `tools/list` answer: every tool's name, title, description, input and
    /// output schemas and annotations, so that any change to them is a visible diff in review.
    const TOOLS_LIST_SNAPSHOT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/tools_list.json"
    );

    /// `tools/list` as a host receives it (the default settings), pretty-printed.
    fn tools_list_answer() -> String {
        let answer = ListToolsResult::with_all_items(tool_list(false));
        let mut text = serde_json::to_string_pretty(&answer).expect("tools/list serializes");
        text.push('\n');
        text
    }

    #[test]
    fn the_tools_list_answer_matches_the_committed_snapshot() {
        let now = tools_list_answer();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(TOOLS_LIST_SNAPSHOT, &now).expect("write the snapshot");
            return;
        }
        let committed = std::fs::read_to_string(TOOLS_LIST_SNAPSHOT).unwrap_or_default();
        if committed != now {
            let first = committed
                .lines()
                .zip(now.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(now.lines().count()));
            let line = |t: &str| t.lines().nth(first).unwrap_or("(end of file)").to_owned();
            panic!(
                "the tools/list answer differs from tests/snapshots/tools_list.json from line {}:\n\
                 committed: {}\n\
                 now:       {}\n\
                 If the change is meant, rerun with UPDATE_SNAPSHOTS=1 and commit the file.",
                first + 1,
                line(&committed),
                line(&now)
            );
        }
    }

    /// Every `format` string anywhere in `v`, with its JSON path.
    fn formats(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    if k == "format"
                        && let Some(f) = x.as_str()
                    {
                        out.push((path.clone(), f.to_owned()));
                    }
                    formats(x, format!("{path}/{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    formats(x, format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_schema_uses_standard_json_schema_formats_only() {
        let mut seen = 0;
        for danger in [false, true] {
            for t in tool_list(danger) {
                let mut schemas = vec![("inputSchema", t.input_schema.clone())];
                schemas.extend(t.output_schema.clone().map(|o| ("outputSchema", o)));
                for (which, s) in schemas {
                    seen += 1;
                    let mut found = vec![];
                    formats(
                        &serde_json::Value::Object((*s).clone()),
                        String::new(),
                        &mut found,
                    );
                    for (path, f) in found {
                        assert!(
                            STANDARD_FORMATS.contains(&f.as_str()),
                            "{} {which} at {path}: format `{f}` is not a JSON Schema format",
                            t.name
                        );
                    }
                }
            }
        }
        assert_eq!(
            seen, 44,
            "11 tools, an input and an output schema each, both settings"
        );
    }

    #[test]
    fn unsigned_integers_are_bounded_by_minimum_zero() {
        let tools = tool_list(false);
        let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap().clone();
        let limit = &by_name("listSessions").input_schema["properties"]["limit"];
        assert_eq!(limit["minimum"], 0, "{limit}");
        assert!(limit.get("format").is_none(), "{limit}");
        let ping = by_name("ping").output_schema.unwrap();
        let v = &ping["properties"]["schemaVersion"];
        assert_eq!((&v["type"], &v["minimum"]), (&json!("integer"), &json!(0)));
        let turn = by_name("codex").output_schema.unwrap();
        let d = &turn["properties"]["durationMs"];
        assert_eq!((&d["type"], &d["minimum"]), (&json!("integer"), &json!(0)));
        // a signed integer has no lower bound
        let exit = serde_json::to_string(&turn["$defs"]["CommandReport"]).unwrap();
        assert!(!exit.contains("minimum"), "{exit}");
    }

    /// `v` against the tool's `outputSchema`, as a host's validator checks it.
    fn check_output(tool: &Tool, v: &serde_json::Value) -> Result<(), String> {
        let schema = serde_json::Value::Object((*tool.output_schema.clone().unwrap()).clone());
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    #[test]
    fn turn_tool_errors_match_the_turn_output_schema_and_others_carry_none() {
        let invalid = Error::invalid("limit", "invalid type: string \"2\", expected u32");
        let timed_out = Error::TimedOut {
            after: Duration::from_secs(3),
            partial: None,
        };
        let partial = results::TurnResult {
            response: "half an answer".into(),
            session_id: Some("s".into()),
            ..Default::default()
        };
        let tools = tool_list(false);
        for t in &tools {
            if ["codex", "query", "search", "structured", "review"].contains(&t.name.as_ref()) {
                for (e, r) in [
                    (&invalid, error_result(&invalid, None)),
                    (&timed_out, error_result(&timed_out, Some(partial.clone()))),
                ] {
                    let v = r
                        .structured_content
                        .clone()
                        .expect("a turn error is structured");
                    check_output(t, &v).unwrap_or_else(|e| panic!("{}: {e}: {v}", t.name));
                    assert_eq!(v["error"]["message"], e.to_string());
                }
            } else {
                // a turn result does not fit: these tools' errors carry no structured copy
                let as_turn = error_result(&invalid, None).structured_content.unwrap();
                assert!(check_output(t, &as_turn).is_err(), "{}", t.name);
                let r = plain_error(&invalid);
                assert!(r.structured_content.is_none());
                assert_eq!(r.is_error, Some(true));
            }
        }
        let r = plain_error(&invalid);
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            "invalid argument `limit`: invalid type: string \"2\", expected u32"
        );
    }

    #[test]
    fn argument_errors_name_the_field() {
        let args = serde_json::json!({"prompt": "x", "timeout": "soon"});
        let err = parse_args::<params::CodexParams>(args.as_object().unwrap().clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`timeout`"), "{err}");
        let args = serde_json::json!({"prompt": "x", "nope": 1});
        let err = parse_args::<params::CodexParams>(args.as_object().unwrap().clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope`"), "{err}");
    }

    #[test]
    fn fixed_values_parse_with_the_reference_spellings_and_a_wrong_one_names_its_field() {
        let parse = |args: serde_json::Value| {
            parse_args::<params::CodexParams>(args.as_object().unwrap().clone())
        };
        let p = parse(json!({"prompt": "x", "sandbox": "full-auto", "reasoningEffort": "xhigh"}))
            .unwrap();
        assert_eq!(p.sandbox, Some(params::SandboxLevel::WorkspaceWrite));
        assert_eq!(p.reasoning_effort, Some(params::ReasoningEffort::Xhigh));
        for (field, bad) in [("sandbox", "Read-Only"), ("reasoningEffort", "max")] {
            let err = parse(json!({"prompt": "x", field: bad}))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("invalid argument `{field}`: unknown variant")),
                "{err}"
            );
        }
        let err = parse_args::<params::ReviewParams>(
            json!({"workingDirectory": "/w", "mode": "all"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("invalid argument `mode`: "), "{err}");
        assert!(err.contains("`uncommitted`, `base`, `commit`"), "{err}");
    }

    #[test]
    fn a_long_answer_is_sent_once_in_full_and_the_result_fits_a_relayed_line() {
        // an answer at the codex line cap, with characters JSON escapes
        let answer = "é\"x\n".repeat(8 * 1024 * 1024 / 5);
        let value = results::TurnResult {
            response: answer.clone(),
            ..Default::default()
        };
        let r = ok_result(answer.clone(), &value);
        let line = serde_json::to_vec(&r).unwrap().len();
        assert!(line <= MAX_RESULT_BYTES, "{line} bytes");
        let s = r.structured_content.as_ref().unwrap();
        assert_eq!(s["response"], answer.as_str(), "the whole answer, once");
        assert_eq!(s["truncated"], false);
        let text = &r.content[0].as_text().unwrap().text;
        assert!(
            text.len() < answer.len()
                && answer.starts_with(text.split("\n\n[codex-mcp-bridge").next().unwrap())
        );
        assert!(
            text.ends_with("the whole answer is in structuredContent.response]"),
            "{}",
            &text[text.len() - 200..]
        );

        // a short one is left alone
        let short = results::TurnResult {
            response: "hi".into(),
            ..Default::default()
        };
        let r = ok_result("hi".into(), &short);
        assert_eq!(r.content[0].as_text().unwrap().text, "hi");

        // structured content alone too long (a raised line cap): the response is cut, marked
        let huge = "y".repeat(MAX_RESULT_BYTES);
        let value = results::TurnResult {
            response: huge.clone(),
            ..Default::default()
        };
        let r = ok_result(huge, &value);
        assert!(serde_json::to_vec(&r).unwrap().len() <= MAX_RESULT_BYTES);
        let s = r.structured_content.as_ref().unwrap();
        assert_eq!(s["truncated"], true);
        assert!(
            s["response"]
                .as_str()
                .unwrap()
                .ends_with("too long for one message]")
        );
    }
}
