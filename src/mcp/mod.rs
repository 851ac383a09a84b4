//! The MCP surface (rmcp over stdio): tool definitions with input and output schemas,
//! argument validation with field-named errors, structured results, progress notifications
//! derived from Codex's events (plus a heartbeat), and cancellation.
//!
//! Architecture invariant: this module knows nothing of processes or sled; it validates
//! arguments, resolves paths, and calls [`Bridge`].

pub(crate) mod answer;
pub mod budget;
mod checks;
pub mod elicit;
pub mod form;
pub mod framing;
pub mod mrtr;
mod owner;
pub mod params;
pub(crate) mod progress;
pub mod results;
pub mod roots;
mod schemas;
mod tasks;
pub mod tools;
pub mod unstarted;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::actors::{Bridge, ClientContext};
use crate::error::Error;
use answer::{error_result, plain_error};
use owner::{Scope, TaskOwner};
use progress::ProgressTarget;
pub use schemas::STANDARD_FORMATS;
use schemas::{annotations, schema};
pub use tasks::Tasks;

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

impl McpServer {
    /// A server over a running bridge, for one connection of the owning process's own client:
    /// its settings, with an identity of its own (each stdio connection, HTTP session and
    /// session-less HTTP request is a client of its own for steer).
    pub fn new(bridge: Bridge) -> Self {
        let client = Arc::new(bridge.own_context().for_connection());
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

    /// A server for requests of the HTTP listener (the owning process's own settings). rmcp
    /// makes one per HTTP session and one per session-less request, so each is a client of its
    /// own.
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

/// A 2026-07-28 call's arguments checked as its tool checks them, before any state of it is
/// kept ([`mrtr::Rounds`]): the tool's refusal naming the field, or `None` when they pass.
fn checked_first(name: &str, args: &rmcp::model::JsonObject) -> Option<CallToolResponse> {
    let e = checks::check_call(name, args).err()?;
    let reason = crate::security::redact::redact(&e.to_string()).into_owned();
    tracing::info!(tool = %name, %reason, "a call's arguments were refused before it asked");
    Some(CallToolResponse::Complete(error_result(&e, None)))
}

/// The tool called `name`, if there is one.
fn tool_named(name: &str) -> Option<&'static ToolEntry> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tools whose result is a turn's ([`results::TurnResult`], errors included); the others'
/// errors carry no structured content ([`answer::plain_error`]).
const TURN_TOOLS: [&str; 5] = ["codex", "query", "search", "structured", "review"];

/// Whether `name` is a turn tool ([`TURN_TOOLS`]).
fn is_turn_tool(name: &str) -> bool {
    TURN_TOOLS.contains(&name)
}

/// What the server says of itself at `initialize` and `server/discover`, started or not
/// ([`unstarted::Unstarted`]).
fn server_config() -> ServerConfig {
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

/// Suggested interval between `tasks/get` polls.
pub const TASK_POLL_MS: u64 = 1_000;
/// How long a task's result stays available after the longest possible call ended.
pub const TASK_RESULT_GRACE: Duration = Duration::from_secs(300);

impl McpServer {
    /// A task's time-to-live. rmcp counts it from creation and aborts a task still running when
    /// it expires, so it exceeds the longest call (queue wait plus the largest timeout) by
    /// [`TASK_RESULT_GRACE`]; a finished task's result is kept for one more TTL.
    pub fn task_ttl(&self) -> Duration {
        self.client.config.max_timeout + self.bridge.shared().queue_timeout() + TASK_RESULT_GRACE
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
            None => Err(answer::unknown_tool(name)),
        }
    }

    /// Start a call as a task; its result is fetched with `tasks/get`.
    fn spawn_task(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        span: tracing::Span,
        roots: Option<rmcp::Peer<RoleServer>>,
        elicits: Option<elicit::Host>,
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
                        ask: elicits.map(|host| {
                            elicit::Channel::of_task(task.clone(), this.tasks.manager.clone(), host)
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

    /// Run a call: as a task for a client that declares tasks; on a task of its own whose
    /// questions are its answer (MRTR); or to its result.
    async fn run_call(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        owner: TaskOwner,
        context: &RequestContext<RoleServer>,
        span: tracing::Span,
    ) -> Result<CallToolResponse, McpError> {
        use tracing::Instrument;
        let as_task = tool_named(&name).is_some_and(|t| t.task)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if as_task {
            // a session-less HTTP task's `tasks/update` could come from any token holder: its
            // questions are asked of nobody
            let elicits =
                elicit::host_of(context).filter(|_| !matches!(owner, TaskOwner::Http(None)));
            let task = self.spawn_task(name, args, span, roots_peer(context), elicits, owner);
            tracing::debug!(task = %task.task_id, "tool call started as a task");
            return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                task,
            )));
        }
        if self.asks_through_rounds(&name, context, &owner) {
            return self.start_rounds(name, args, owner, context, span).await;
        }
        let result = self
            .dispatch(&name, args, &CallCtx::of_request(context))
            .instrument(span)
            .await
            .map(|r| self.scrub(r))?;
        if result.is_error == Some(true) {
            tracing::info!(tool = %name, "tool call failed");
        }
        Ok(CallToolResponse::Complete(result))
    }

    /// Whether a call asks the client's roots before it starts (MRTR): a 2026-07-28 client
    /// that declares roots, calling a tool that picks a working directory by them without
    /// naming one, whose roots are not known yet; not a session-less HTTP request.
    fn asks_roots_first(
        &self,
        name: &str,
        args: &rmcp::model::JsonObject,
        ctx: &RequestContext<RoleServer>,
        owner: &TaskOwner,
    ) -> bool {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        modern
            && ctx.client_capabilities().is_some_and(|c| c.roots.is_some())
            && ["codex", "structured"].contains(&name)
            && !args.contains_key("workingDirectory")
            && !matches!(owner, TaskOwner::Http(None))
            && self.client_roots.offered().is_none()
    }

    /// Whether a plain call asks its questions through MRTR: a 2026-07-28 client that declares
    /// form elicitation, under `approvals = ask`, calling a turn tool; not a session-less HTTP
    /// request (any holder of the token could retry it).
    fn asks_through_rounds(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
        owner: &TaskOwner,
    ) -> bool {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        modern
            && elicit::host_of(ctx).is_some()
            && self.client.config.approvals == crate::config::ApprovalMode::Ask
            && tool_named(name).is_some_and(|t| t.task)
            && !matches!(owner, TaskOwner::Http(None))
    }

    /// Run a plain call on a task of its own whose questions are this request's answer (an
    /// `InputRequiredResult`); a retry of the call answers them ([`Self::retry`]).
    async fn start_rounds(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        owner: TaskOwner,
        context: &RequestContext<RoleServer>,
        span: tracing::Span,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(refused) = checked_first(&name, &args) {
            return Ok(refused);
        }
        let mut ctx = CallCtx::of_request(context);
        let host = elicit::host_of(context).unwrap_or_default();
        let call = mrtr::Call {
            client: owner,
            what: mrtr::CallDigest::of(&name, &args),
            progress: ctx.progress.take(),
        };
        let this = self.clone();
        self.tasks
            .rounds
            .start(call, context.ct.clone(), move |asking, cancel, follow| {
                ctx.ct = cancel;
                ctx.ask = Some(elicit::Channel::of_rounds(asking, host));
                ctx.progress = Some(ProgressTarget::Follow(follow));
                tracing::Instrument::instrument(
                    async move {
                        let r = this.dispatch(&name, args, &ctx).await?;
                        if r.is_error == Some(true) {
                            tracing::info!(tool = %name, "tool call failed");
                        }
                        Ok(this.scrub(r))
                    },
                    span,
                )
            })
            .await
    }

    /// A call's retry with `inputResponses` and `requestState` (MRTR): the turn's result or
    /// its next question; a refusal (an `isError` result naming the field) when the state or
    /// the call does not match.
    #[allow(clippy::too_many_arguments)]
    async fn retry(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        owner: TaskOwner,
        state: Option<String>,
        responses: Option<rmcp::model::InputResponses>,
        context: RequestContext<RoleServer>,
        span: tracing::Span,
    ) -> Result<CallToolResponse, McpError> {
        use tracing::Instrument;
        let call = mrtr::Call {
            client: owner.clone(),
            what: mrtr::CallDigest::of(&name, &args),
            progress: CallCtx::of_request(&context).progress,
        };
        let retried = self
            .tasks
            .rounds
            .retry(call, state.as_deref(), responses, context.ct.clone())
            .instrument(span.clone())
            .await;
        match retried {
            Ok(mrtr::Retried::Answer(answer)) => answer,
            Ok(mrtr::Retried::Roots(listed)) => {
                // an answer that is no roots list leaves none: today's default
                let roots = listed.as_ref().map(roots::paths_of).unwrap_or_default();
                self.client_roots.offer(roots);
                self.run_call(name, args, owner, &context, span).await
            }
            Err(refused) => {
                tracing::info!(reason = %refused, "a retry of a call was refused");
                let e = Error::invalid(refused.field(), refused.to_string());
                Ok(CallToolResponse::Complete(if is_turn_tool(&name) {
                    error_result(&e, None)
                } else {
                    plain_error(&e)
                }))
            }
        }
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
        server_config()
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
        let args = request.arguments.unwrap_or_default();
        let name = request.name.to_string();
        let span = tracing::info_span!("tool_call", tool = %name, request = %context.id);
        let owner = self.scope.owner(&context);
        if request.request_state.is_some() || request.input_responses.is_some() {
            return self
                .retry(
                    name,
                    args,
                    owner,
                    request.request_state,
                    request.input_responses,
                    context,
                    span,
                )
                .await;
        }
        if self.asks_roots_first(&name, &args, &context, &owner) {
            if let Some(refused) = checked_first(&name, &args) {
                return Ok(refused);
            }
            let call = mrtr::Call {
                client: owner.clone(),
                what: mrtr::CallDigest::of(&name, &args),
                progress: None,
            };
            if let Some(ask) = self.tasks.rounds.ask_roots(call) {
                return Ok(ask);
            }
        }
        self.run_call(name, args, owner, &context, span).await
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
    use super::answer::{MAX_RESULT_BYTES, ok_result, parse_args};
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
            if is_turn_tool(&t.name) {
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
