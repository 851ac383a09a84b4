//! The MCP surface (rmcp over stdio): tool definitions with input and output schemas,
//! argument validation with field-named errors, structured results, progress notifications
//! derived from Codex's events (plus a heartbeat), and cancellation.
//!
//! Architecture invariant: this module knows nothing of processes or sled; it validates
//! arguments, resolves paths, and calls [`Bridge`](crate::actors::Bridge).
//!
//! # Layout
//! - this file: the protocol's side of a connection, the `ServerHandler`: `initialize`, the
//!   tool list, a call run to its result, as an MCP task or over MRTR rounds, and the tasks'
//!   requests.
//! - `tools/`: one file per tool (as mini-redis keeps a command per file), each with its
//!   arguments, its handler, its result when no other tool returns it, and its table entry;
//!   `tools/mod.rs` lists them (`TOOLS`, in `tools/list`'s order) and `tools/common.rs` holds
//!   what the handlers share.
//! - `connection.rs`, below the tools: [`McpServer`] and how it is made, a call's context and
//!   the shape of a tool's table entry, which this file and every tool name.
//! - `results.rs` (the results several tools return: a turn's, a session's; the fixed values
//!   several tools' arguments share are `crate::plan`'s); `answer.rs` (arguments in, results
//!   out) and `schemas.rs`; `checks.rs` (a call's arguments checked before MRTR keeps it).
//! - `prompts.rs` (the slash commands a person runs: each tells the model which tool to call)
//!   and `resources.rs` (each session of the caller's `CODEX_HOME` as a resource, and its
//!   subscriptions; `subscriptions.rs` holds a connection's set of them).
//! - the rest: tasks and MRTR (`tasks.rs`, `mrtr.rs`, `owner.rs`), asking a person
//!   (`elicit.rs`, `form.rs`, `budget.rs`), progress, client roots, the framing of lines, and
//!   the surface of a server that could not start (`unstarted.rs`).

pub(crate) mod answer;
mod background;
mod checks;
mod connection;
pub mod framing;
pub mod greeting;
pub mod mrtr;
pub(crate) mod progress;
pub mod prompts;
pub mod resources;
pub mod results;
pub mod roots;
mod schemas;
mod subscriptions;
mod task_owner;
mod tasks;
pub mod tools;
pub mod unstarted;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::approval::ask;
use crate::error::Error;
use answer::error_result;
use checks::checked_first;
use connection::{CallCtx, TaskStart, client_name, roots_peer};
pub use connection::{McpServer, TASK_POLL_MS, TASK_RESULT_GRACE};
use progress::ProgressTarget;
pub use schemas::STANDARD_FORMATS;
use task_owner::TaskOwner;
pub use tasks::Tasks;
use tasks::{HostKey, Seen};
use tools::tool_named;
pub use tools::{tool_list, tool_table};

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
- Several sessions on one repository: start each with `worktree: true` (a new session only) \
and it works in a git worktree of its own, so none overwrites another's files. \
`diffSession` shows what it changed, with a `digest`; `applySession` with that `digest` lands \
exactly that on the checkout, all or nothing; `closeSession` removes the worktree \
(`dropChanges: true` to drop changes not applied, or those of a turn still running).
- A long `codex` or `review` turn: pass `background: true`, then call `wait` with the \
returned `sessionId` (or `reviewId`) until its status is no longer `running`. It keeps running \
if your call is cut off or your client restarts; `stop` stops it.
Long turns send progress notifications; cancelling a call stops Codex at once.";

/// What a task's end is, as the store keeps it.
fn payload_of(
    exit: &Result<CallToolResult, rmcp::task_manager::TaskExit>,
) -> rmcp::model::TaskPayload {
    use rmcp::model::TaskPayload;
    use rmcp::task_manager::TaskExit;
    let object = |v: Result<serde_json::Value, serde_json::Error>| match v {
        Ok(serde_json::Value::Object(o)) => o,
        _ => Default::default(),
    };
    match exit {
        Ok(r) => TaskPayload::Completed {
            result: object(serde_json::to_value(r)),
        },
        Err(TaskExit::Cancelled) => TaskPayload::Cancelled,
        Err(TaskExit::Error(e)) => TaskPayload::Failed {
            error: object(serde_json::to_value(e)),
        },
    }
}

/// What the server says of itself at `initialize` and `server/discover`, started or not
/// ([`unstarted::Unstarted`]).
fn server_config() -> ServerConfig {
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .build(),
    )
    .with_server_info(
        Implementation::new("codex-mcp-bridge", env!("CARGO_PKG_VERSION"))
            .with_title("Codex MCP bridge"),
    )
    .with_instructions(INSTRUCTIONS)
}

impl McpServer {
    /// Run one tool call to its result.
    async fn dispatch(
        &self,
        name: &str,
        args: rmcp::model::JsonObject,
        ctx: &CallCtx,
    ) -> Result<CallToolResult, McpError> {
        match tool_named(name) {
            Some(tool) => Ok((tool.run)(self, args, ctx)
                .await
                .unwrap_or_else(|e| tools::error_of(name, &e))),
            None => Err(answer::unknown_tool(name)),
        }
    }

    /// Start a call as a task; its result is fetched with `tasks/get` (or, for a background
    /// call, `wait`). Its end is kept in the store before the manager reports it.
    fn spawn_task(
        &self,
        name: String,
        args: rmcp::model::JsonObject,
        span: tracing::Span,
        start: TaskStart,
    ) -> rmcp::model::Task {
        use rmcp::task_manager::{TaskExit, TaskOptions};
        let this = self.clone();
        let options = TaskOptions::new()
            .with_ttl_ms(self.task_ttl().as_millis() as u64)
            .with_poll_interval_ms(TASK_POLL_MS)
            .with_status_message("starting");
        // the task runs once it is recorded: its end is then always written over its start
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let TaskStart {
            owner,
            host,
            handle,
            roots,
            elicits,
            waiters,
            client_name,
        } = start;
        let http_session = owner.http_session().map(str::to_owned);
        let task = self.tasks.manager.spawn(options, move |task| {
            Box::pin(tracing::Instrument::instrument(
                async move {
                    let _ = ready.await;
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
                        ask: match waiters {
                            Some(w) => Some(ask::Channel::of_waiters(w)),
                            None => elicits.map(|host| {
                                ask::Channel::of_task(
                                    task.clone(),
                                    this.tasks.manager.clone(),
                                    host,
                                )
                            }),
                        },
                        client_name,
                        http_session,
                    };
                    let result = this.dispatch(&name, args, &ctx).await;
                    watcher.abort();
                    let exit = match result {
                        _ if task.is_cancel_requested() => Err(TaskExit::Cancelled),
                        Ok(r) => Ok(this.scrub(r)),
                        Err(e) => Err(TaskExit::Error(e)),
                    };
                    let payload = payload_of(&exit);
                    this.tasks.finish(task.task_id(), payload).await;
                    exit
                },
                span,
            ))
        });
        self.tasks
            .record(&task, owner, host, handle, self.task_ttl());
        let _ = go.send(());
        task
    }

    /// Run a call: as a task for a client that declares tasks; on a task of its own whose
    /// questions are its answer (MRTR); or to its result.
    async fn run_call(
        &self,
        name: String,
        mut args: rmcp::model::JsonObject,
        owner: TaskOwner,
        context: &RequestContext<RoleServer>,
        span: tracing::Span,
    ) -> Result<CallToolResponse, McpError> {
        use tracing::Instrument;
        match background::take(&name, &mut args) {
            Ok(true) => return Ok(self.start_background(name, args, owner, context, span)),
            Ok(false) => {}
            Err(e) => return Ok(CallToolResponse::Complete(error_result(&e, None))),
        }
        let as_task = tool_named(&name).is_some_and(|t| t.is.task)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if as_task {
            // a session-less HTTP task's `tasks/update` could come from any token holder: its
            // questions are asked of nobody
            let elicits = ask::host_of(context).filter(|_| !matches!(owner, TaskOwner::Http(None)));
            let start = TaskStart {
                owner,
                host: self.host_key(context),
                handle: None,
                roots: roots_peer(context),
                elicits,
                waiters: None,
                client_name: client_name(context),
            };
            let task = self.spawn_task(name, args, span, start);
            tracing::debug!(task = %task.task_id, "tool call started as a task");
            return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                task,
            )));
        }
        if self.asks_through_rounds(&name, context, &owner) {
            return self.start_rounds(name, args, owner, context, span).await;
        }
        // a plain call ends with its connection: at once when its input ends
        let mut ctx = CallCtx::of_request(context);
        ctx.ct = self.until_input_ends(&ctx.ct);
        let _ended = ctx.ct.clone().drop_guard();
        let result = self
            .dispatch(&name, args, &ctx)
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
            && tool_named(name).is_some_and(|t| t.is.roots_first)
            && !args.contains_key("workingDirectory")
            && !matches!(owner, TaskOwner::Http(None))
            && self.client_roots.offered().is_none()
    }

    /// Whether a plain call asks its questions through MRTR: a 2026-07-28 client that declares
    /// form elicitation, under `approvals = ask`, calling a turn tool or `wait` (a background
    /// turn's questions); not a session-less HTTP
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
            && ask::host_of(ctx).is_some()
            && self.client.config.approvals == crate::config::ApprovalMode::Ask
            && tools::asks_in_its_answer(name)
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
        let host = ask::host_of(context).unwrap_or_default();
        let call = mrtr::Call {
            client: owner,
            what: mrtr::CallDigest::of(&name, &args),
            progress: ctx.progress.take(),
        };
        let this = self.clone();
        self.tasks
            .rounds
            .start(call, context.ct.clone(), move |asking, cancel, follow| {
                // a plain call: it ends with its connection's input, between rounds too
                ctx.ct = this.until_input_ends(&cancel);
                ctx.ask = Some(ask::Channel::of_rounds(asking, host));
                ctx.progress = Some(ProgressTarget::Follow(follow));
                tracing::Instrument::instrument(
                    async move {
                        let _ended = ctx.ct.clone().drop_guard();
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
                Ok(CallToolResponse::Complete(tools::error_of(&name, &e)))
            }
        }
    }

    /// Task `id` as this request's connection may see it ([`Tasks`]); "unknown task"
    /// otherwise.
    fn seen_task(&self, id: &str, ctx: &RequestContext<RoleServer>) -> Result<Seen, McpError> {
        match self
            .tasks
            .get(id, &self.scope.owner(ctx), &self.host_key(ctx))
        {
            Some(seen) => Ok(seen),
            None => {
                tracing::debug!(task = %id, "a request for a task of another client or none");
                Err(self.unknown_task(id))
            }
        }
    }

    /// How this connection's host is recognised across its restarts ([`McpServer::host_named`]).
    pub(crate) fn host_key(&self, ctx: &RequestContext<RoleServer>) -> HostKey {
        self.host_named(&client_name(ctx))
    }

    /// This connection closed: its tasks go on, for its host's next connection.
    pub fn connection_closed(&self) {
        if let task_owner::Scope::Connection(n) = self.scope {
            self.tasks.connection_closed(n);
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
                "unknown task `{}`: no task with this id was started by this client. A task \
                 outlives its client and the server process (its host may ask again after a \
                 restart), and its result is kept for {} min after the call could last at most; \
                 it expired, or another client started it. Call the tool again.",
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
        self.listen_for_list_changes(context.peer.clone());
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

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        Ok(prompts::list_answer())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        prompts::get_answer(&request)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        self.list_resources_page(request)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        self.read_session_resource(&request.uri)
            .await
            .map(Into::into)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(resources::accepted_filter(requested))
    }

    // the 2026-07-28 protocol's `subscriptions/listen`
    async fn listen(&self, listen: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        self.listen_stream(listen).await
    }

    // the 2025-11-25 protocol's subscriptions, which the hosts speak
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_session(&request.uri, context.peer.clone())
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.unsubscribe_session(&request.uri);
        Ok(())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let seen = self.seen_task(&request.task_id, &context)?;
        Ok(rmcp::model::GetTaskResult::new(seen.task()))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // a `codex` task asks codex's questions here (`approvals = ask`); the manager answers
        // for unknown keys; a task kept from an earlier process asks nothing
        match self.seen_task(&request.task_id, &context)? {
            Seen::Live(_) => self
                .tasks
                .manager
                .update_task(&request.task_id, request.input_responses)
                .map_err(|_| self.unknown_task(&request.task_id)),
            Seen::Kept(_) => Ok(()),
        }
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        match self.seen_task(&request.task_id, &context)? {
            Seen::Live(_) => self
                .tasks
                .manager
                .cancel_task(&request.task_id)
                .map_err(|_| self.unknown_task(&request.task_id)),
            // it ended with the process that ran it
            Seen::Kept(_) => Ok(()),
        }
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
