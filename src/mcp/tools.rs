//! The tool handlers: parse arguments (field-named errors), resolve the caller's paths, turn
//! them into typed requests on [`crate::actors::Bridge`], and shape its answers. Nothing here
//! builds a codex invocation, runs a process or reads the store: the actors do. A prompt is
//! checked here, once, into a [`Prompt`] that is carried to codex; the checks of the rest of
//! what reaches codex (model, sandbox policy) run where the invocation is built. The model id
//! is also checked here, first, so a bad one is refused before anything is queued or spawned,
//! on either backend.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};

use crate::actors::schema;
use crate::actors::{Answer, OneShot, OneShotCall, SessionView, TurnCall, WorkDir};
use crate::codex::argv::{Prompt, review_target};
use crate::codex::home::nested_servers;
use crate::config::{
    ApprovalMode, CodexSupport, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION,
};
use crate::error::{Error, Result};
use crate::mcp::answer::{error_result, ok_result, parse_args, plain_error};
use crate::mcp::params::*;
use crate::mcp::progress::progress_for;
use crate::mcp::results::*;
use crate::mcp::{CallCtx, McpServer, elicit};
use crate::question::Decision;
use crate::security::ids::SessionId;
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;

/// Largest `query` context.
pub const MAX_CONTEXT_BYTES: usize = 1024 * 1024;
/// Default and largest page of `listSessions`.
pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 200;

/// A caller's model id, checked once, before anything is queued or spawned, by the same rule on
/// both backends (the invocation builders check it again).
fn check_model(model: Option<&str>) -> Result<()> {
    model.map_or(Ok(()), |m| {
        Ok(crate::security::ids::check_model("model", m)?)
    })
}

/// Shape a turn's answer as a tool result: success, or an error that keeps the partial answer.
fn shape(mut a: Answer, max_len: Option<u64>) -> (TurnResult, Option<Error>) {
    let mut truncated = false;
    if let Some(max) = max_len
        && a.response.chars().count() as u64 > max
    {
        a.response = a.response.chars().take(max as usize).collect();
        truncated = true;
    }
    let value = TurnResult {
        response: a.response,
        thread_id: a.thread_id.map(|t| t.to_string()),
        usage: UsageReport {
            turn: a.turn_usage,
            thread: a.thread_usage,
        },
        duration_ms: a.duration.as_millis() as u64,
        queued_ms: a.queued.as_millis() as u64,
        timed_out: a.timed_out,
        commands: a
            .commands
            .into_iter()
            .map(|c| CommandReport {
                command: c.command,
                exit_code: c.exit_code,
                status: c.status.as_str().to_owned(),
            })
            .collect(),
        files_changed: a.files_changed,
        sandbox: a.sandbox.map(|s| s.as_arg().to_owned()).unwrap_or_default(),
        approval: a.recorded.as_ref().map(|r| r.approval_policy.clone()),
        approvals_reviewer: a.recorded.as_ref().map(|r| r.approvals_reviewer.clone()),
        policy_verified: a.recorded.is_some(),
        truncated,
        model: a.model,
        findings: a.findings.map(|f| {
            f.into_iter()
                .map(|f| Finding {
                    priority: f.priority,
                    title: f.title,
                    location: f.location,
                })
                .collect()
        }),
        data: a.data,
        approvals: (!a.approvals.is_empty()).then(|| {
            a.approvals
                .into_iter()
                .map(|r| ApprovalReport {
                    asked: r.asked,
                    decision: match r.decision {
                        Decision::AcceptOnce => "acceptOnce",
                        Decision::Decline => "decline",
                    }
                    .to_owned(),
                    by_person: r.by_person,
                    reason: r.reason.map(str::to_owned),
                })
                .collect()
        }),
        steered: (!a.steered.is_empty()).then_some(a.steered),
        ..Default::default()
    };
    (value, a.error)
}

/// The final tool result of a turn: success (a `structured` answer's text is its JSON), or an
/// error that keeps the partial answer.
fn finish(value: TurnResult, error: Option<Error>) -> CallToolResult {
    match error {
        None => {
            let text = match &value.data {
                Some(data) => serde_json::to_string_pretty(data).unwrap_or_default(),
                None if value.response.is_empty() => "(no answer)".to_owned(),
                None => value.response.clone(),
            };
            ok_result(text, value)
        }
        Some(e) => error_result(&e, Some(value)),
    }
}

/// A session as the session tools show it.
fn session_info(v: SessionView) -> SessionInfo {
    SessionInfo {
        session_id: v.session_id,
        thread_id: v.thread_id.map(|t| t.to_string()),
        working_directory: v.working_directory,
        model: v.model,
        created_ms: v.created_ms,
        last_used_ms: v.last_used_ms,
        turn_count: v.turn_count,
        usage: v.usage,
        last_status: v.last_status,
        last_error: v.last_error,
        live: v.live,
    }
}

impl McpServer {
    fn first_root(&self) -> &Path {
        &self.client.config.roots[0]
    }

    /// Resolve a caller's working directory inside the allowed roots (relative paths are
    /// relative to the first root).
    fn resolve_dir(&self, raw: &str) -> Result<Confined> {
        Ok(crate::confine::resolve(
            "workingDirectory",
            raw,
            self.first_root(),
            &self.client.config.roots,
            Kind::Dir,
        )?)
    }

    /// The working directory of a call that names none: the first of the client's roots that
    /// lies inside the allowed roots (when the client declares roots), else the first allowed
    /// root.
    async fn default_dir(&self, ctx: &CallCtx) -> Result<Confined> {
        if let Some(peer) = &ctx.roots {
            for root in self.client_roots.get(peer).await {
                let raw = root.to_string_lossy();
                match self.resolve_dir(&raw) {
                    Ok(dir) => return Ok(dir),
                    Err(e) => tracing::info!(
                        root = %redact(&raw),
                        reason = %redact(&e.to_string()),
                        "a client root is not an allowed working directory: ignored"
                    ),
                }
            }
        }
        let root = self.first_root().to_string_lossy().into_owned();
        self.resolve_dir(&root)
    }

    pub(crate) async fn codex(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        match self.codex_inner(args, ctx).await {
            Ok(r) => r,
            Err(e) => error_result(&e, None),
        }
    }

    async fn codex_inner(&self, args: JsonObject, ctx: &CallCtx) -> Result<CallToolResult> {
        let p: CodexParams = parse_args(args)?;
        check_model(p.model.as_deref())?;
        let session_id = p
            .session_id
            .as_deref()
            .map(|s| SessionId::parse("sessionId", s))
            .transpose()?;
        let sandbox = p.sandbox;
        let effort = p.reasoning_effort;
        let timeout = self.client.config.timeout_for(p.timeout)?;
        let cwd = match &p.working_directory {
            Some(d) => WorkDir::Given(self.resolve_dir(d)?),
            None => WorkDir::Default(self.default_dir(ctx).await?),
        };
        let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
        let asker = match (&self.client.config.approvals, &ctx.ask) {
            (ApprovalMode::Ask, Some(channel)) => Some(elicit::asker(
                channel.clone(),
                self.client.secrets.clone(),
                self.client.config.approval_timeout,
                progress.clone(),
            )),
            _ => None,
        };
        let call = TurnCall {
            session_id,
            reset: p.reset_session.unwrap_or(false),
            prompt: Some(Prompt::parse("prompt", p.prompt)?),
            files: p.files.unwrap_or_default(),
            sandbox,
            model: p.model,
            reasoning_effort: effort,
            cwd,
            timeout,
            wait_if_busy: p.wait_if_busy.unwrap_or(true),
            cancel: ctx.ct.child_token(),
            progress,
            client: Some(self.client.clone()),
            asker,
        };
        let report = self.bridge.turn(call).await?;
        let (session_id, resumed) = (report.session_id.to_string(), report.resumed);
        let (mut value, error) = shape(report.into_answer(), p.max_response_length);
        value.session_id = Some(session_id);
        value.resumed = Some(resumed);
        Ok(finish(value, error))
    }

    /// Run a session-less call through the bridge, with one progress sink for all of it.
    async fn one_shot(
        &self,
        request: OneShot,
        timeout: Duration,
        ctx: &CallCtx,
    ) -> Result<CallToolResult> {
        let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
        let answer = self
            .bridge
            .one_shot(OneShotCall {
                request,
                timeout,
                cancel: ctx.ct.child_token(),
                progress,
                client: self.client.clone(),
            })
            .await?;
        let (value, error) = shape(answer, None);
        Ok(finish(value, error))
    }

    pub(crate) async fn query(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: QueryParams = parse_args(args)?;
            check_model(p.model.as_deref())?;
            if p.context
                .as_ref()
                .is_some_and(|c| c.len() > MAX_CONTEXT_BYTES)
            {
                return Err(Error::invalid(
                    "context",
                    format!("is larger than {MAX_CONTEXT_BYTES} bytes"),
                ));
            }
            let reasoning_effort = p.reasoning_effort;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let request = OneShot::Query {
                prompt: Prompt::parse("prompt", p.prompt)?,
                context: p.context,
                model: p.model,
                reasoning_effort,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn search(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: SearchParams = parse_args(args)?;
            check_model(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let request = OneShot::Search {
                query: Prompt::parse("query", p.query)?,
                model: p.model,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn review(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: ReviewParams = parse_args(args)?;
            check_model(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let target = review_target(
                p.mode,
                p.base.as_deref(),
                p.commit.as_deref(),
                p.title.as_deref(),
            )?;
            let request = OneShot::Review {
                target,
                model: p.model,
                cwd: self.resolve_dir(&p.working_directory)?,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn structured(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: StructuredParams = parse_args(args)?;
            check_model(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let plan = schema::plan(&p.schema)?;
            let cwd = match &p.working_directory {
                Some(d) => self.resolve_dir(d)?,
                None => self.default_dir(ctx).await?,
            };
            let request = OneShot::Structured {
                prompt: Prompt::parse("prompt", p.prompt)?,
                files: p.files.unwrap_or_default(),
                plan: Box::new(plan),
                model: p.model,
                cwd,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) fn list_sessions(&self, args: JsonObject) -> CallToolResult {
        let run = || -> Result<CallToolResult> {
            let p: ListSessionsParams = parse_args(args)?;
            let limit = p.limit.unwrap_or(DEFAULT_PAGE);
            if !(1..=MAX_PAGE).contains(&limit) {
                return Err(Error::invalid(
                    "limit",
                    format!("must be between 1 and {MAX_PAGE}"),
                ));
            }
            let page = self.bridge.sessions(p.cursor.as_deref(), limit as usize)?;
            let sessions: Vec<SessionInfo> = page.sessions.into_iter().map(session_info).collect();
            let text = if sessions.is_empty() {
                "No sessions.".to_owned()
            } else {
                sessions
                    .iter()
                    .map(|s| {
                        format!(
                            "{} — {} turn(s), {}",
                            s.session_id, s.turn_count, s.working_directory
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(ok_result(
                text,
                SessionList {
                    sessions,
                    next_cursor: page.next,
                },
            ))
        };
        run().unwrap_or_else(|e| plain_error(&e))
    }

    pub(crate) async fn fork_session(&self, args: JsonObject) -> CallToolResult {
        let run = async {
            let p: ForkSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let timeout = self.client.config.timeout_for(None)?;
            let forked = self
                .bridge
                .fork(&id, self.client.clone(), timeout)
                .await
                .map(session_info)?;
            Ok(ok_result(
                format!(
                    "Forked session {id} into {}: continue the fork with that sessionId; {id} \
                     goes on as before.",
                    forked.session_id
                ),
                ForkResult {
                    session_id: forked.session_id.clone(),
                    forked_from: id.to_string(),
                    session: forked,
                },
            ))
        };
        run.await.unwrap_or_else(|e: Error| plain_error(&e))
    }

    pub(crate) async fn steer(&self, args: JsonObject) -> CallToolResult {
        let run = async {
            let p: SteerParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let text = Prompt::parse("prompt", p.prompt)?;
            self.bridge.steer(&id, text, self.client.clone()).await?;
            Ok(ok_result(
                format!("Codex took the message into session {id}'s running turn."),
                SteerResult {
                    session_id: id.to_string(),
                    steered: true,
                },
            ))
        };
        run.await.unwrap_or_else(|e: Error| plain_error(&e))
    }

    pub(crate) async fn get_session(&self, args: JsonObject) -> CallToolResult {
        let run = async {
            let p: GetSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let session = self.bridge.session(&id).await?.map(session_info);
            let text = match &session {
                Some(s) => serde_json::to_string_pretty(s).unwrap_or_default(),
                None => format!("No session {id}."),
            };
            Ok(ok_result(
                text,
                SessionResult {
                    found: session.is_some(),
                    session,
                    closed: None,
                },
            ))
        };
        run.await.unwrap_or_else(|e: Error| plain_error(&e))
    }

    pub(crate) async fn close_session(&self, args: JsonObject) -> CallToolResult {
        let run = async {
            let p: CloseSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let delete_thread = p.delete_thread.unwrap_or(false);
            let session = self
                .bridge
                .close_session(&id, delete_thread, self.client.clone())
                .await?
                .map(session_info);
            let text = if session.is_some() {
                format!("Session {id} closed.")
            } else {
                format!("No session {id}.")
            };
            Ok(ok_result(
                text,
                SessionResult {
                    found: session.is_some(),
                    closed: Some(session.is_some()),
                    session,
                },
            ))
        };
        run.await.unwrap_or_else(|e: Error| plain_error(&e))
    }

    pub(crate) async fn ping(&self, args: JsonObject) -> CallToolResult {
        if let Err(e) = parse_args::<PingParams>(args) {
            return plain_error(&e);
        }
        let status = self.bridge.status(&self.client).await;
        let (version, support, counts) =
            (status.codex_version, status.codex_support, status.counts);
        let result = PingResult {
            server: "codex-mcp-bridge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            codex_found: version.is_some(),
            codex_version_matches: support == Some(CodexSupport::Supported),
            codex_version_support: support,
            codex_version: version,
            tested_codex_version: NEWEST_TESTED_CODEX_VERSION.into(),
            oldest_supported_codex_version: OLDEST_SUPPORTED_CODEX_VERSION.into(),
            codex_path: self.client.common.program.display().to_string(),
            store_path: status.store_path,
            schema_version: status.schema_version,
            live_sessions: counts.live_sessions,
            stored_sessions: counts.stored_sessions,
            active_turns: counts.active_turns,
            queued_turns: counts.queued_turns,
            max_concurrent: counts.max_concurrent,
            default_timeout_ms: self.client.config.default_timeout.as_millis() as u64,
            max_timeout_ms: self.client.config.max_timeout.as_millis() as u64,
            allow_danger: self.client.config.allow_danger,
            containment: status.containment,
            backend: status.backend,
            nested_mcp_servers: nested_servers(&self.client.codex_home)
                .into_iter()
                .map(|s| NestedServer {
                    name: s.name,
                    enabled: s.enabled,
                    required: s.required,
                })
                .collect(),
        };
        let range = format!("{OLDEST_SUPPORTED_CODEX_VERSION} to {NEWEST_TESTED_CODEX_VERSION}");
        let codex = match (&result.codex_version, support) {
            (None, _) => "NOT FOUND".to_owned(),
            (Some(v), Some(CodexSupport::Supported)) => format!("{v} (supported)"),
            (Some(v), Some(CodexSupport::NewerThanTested)) => format!(
                "{v} (WARNING: newer than the newest tested, {NEWEST_TESTED_CODEX_VERSION}; \
                 the security pins are not proven for it)"
            ),
            (Some(v), Some(CodexSupport::OlderThanSupported)) => format!(
                "{v} (ERROR: older than the oldest supported, {OLDEST_SUPPORTED_CODEX_VERSION}; \
                 the security pins are proven only for codex {range}: upgrade codex)"
            ),
            (Some(v), _) => format!(
                "{v} (WARNING: not a version this server recognizes; it supports codex {range})"
            ),
        };
        let text = format!(
            "codex-mcp-bridge {} — codex {} — {} stored session(s), {} live, {} turn(s) running, {} queued",
            result.version,
            codex,
            result.stored_sessions,
            result.live_sessions,
            result.active_turns,
            result.queued_turns
        );
        ok_result(text, result)
    }
}
