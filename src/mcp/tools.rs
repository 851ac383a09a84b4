//! The tool handlers: validate arguments (field-named errors), resolve paths, call the bridge,
//! and shape the results.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};

use crate::actors::{ClientContext, TurnCall};
use crate::codex::argv::{
    Common, OneShotRequest, ReasoningEffort, ReviewRequest, SandboxLevel, TurnRequest, build_query,
    build_review, build_search, build_turn, review_target, validate_model, validate_prompt,
};
use crate::codex::home::{disableable, nested_servers};
use crate::codex::process::{Ending, TurnOutcome, containment};
use crate::codex::rollout::TurnContext;
use crate::config::{CodexSupport, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION};
use crate::confine;
use crate::error::{Error, Result};
use crate::mcp::params::*;
use crate::mcp::results::*;
use crate::mcp::{
    CallCtx, McpServer, error_result, files, ok_result, parse_args, plain_error, progress_for,
};
use crate::security::ids::SessionId;
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;
use crate::store::SessionRecord;

/// Largest `structured` schema accepted, serialized.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Largest `query` context.
pub const MAX_CONTEXT_BYTES: usize = 1024 * 1024;
/// Default and largest page of `listSessions`.
pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 200;

fn check_model(m: &Option<String>) -> Result<()> {
    if let Some(m) = m {
        validate_model("model", m)?;
    }
    Ok(())
}

/// Shape a finished turn. `Err` carries the error and the partial result for an error result.
fn shape(
    outcome: &TurnOutcome,
    queued: Duration,
    sandbox: SandboxLevel,
    recorded: Option<&TurnContext>,
    max_len: Option<u64>,
) -> TurnResult {
    let o = &outcome.output;
    let mut response = o.message.clone().unwrap_or_default();
    let mut truncated = false;
    if let Some(max) = max_len
        && response.chars().count() as u64 > max
    {
        response = response.chars().take(max as usize).collect();
        truncated = true;
    }
    TurnResult {
        response,
        thread_id: o.thread_id.map(|t| t.to_string()),
        usage: UsageReport {
            turn: o.turn_usage,
            thread: o.thread_usage,
        },
        duration_ms: o.duration.as_millis() as u64,
        queued_ms: queued.as_millis() as u64,
        timed_out: matches!(outcome.ending, Ending::TimedOut { .. }),
        commands: o
            .commands
            .iter()
            .map(|c| CommandReport {
                command: c.command.clone(),
                exit_code: c.exit_code,
                status: c.status.clone(),
            })
            .collect(),
        files_changed: o.files_changed.clone(),
        sandbox: sandbox.as_arg().to_owned(),
        approval: recorded.map(|r| r.approval_policy.clone()),
        approvals_reviewer: recorded.map(|r| r.approvals_reviewer.clone()),
        policy_verified: recorded.is_some(),
        truncated,
        ..Default::default()
    }
}

/// The final tool result of a turn: success, or an error that keeps the partial answer.
fn finish(outcome: TurnOutcome, value: TurnResult) -> CallToolResult {
    match outcome.into_result() {
        Ok(_) => {
            let text = if value.response.is_empty() {
                "(no answer)".to_owned()
            } else {
                value.response.clone()
            };
            ok_result(text, value)
        }
        Err(e) => error_result(&e, Some(value)),
    }
}

impl McpServer {
    fn first_root(&self) -> &Path {
        &self.client.config.roots[0]
    }

    /// Resolve a caller's working directory inside the allowed roots (relative paths are
    /// relative to the first root).
    fn resolve_dir(&self, raw: &str) -> Result<Confined> {
        confine::resolve(
            "workingDirectory",
            raw,
            self.first_root(),
            &self.client.config.roots,
            Kind::Dir,
        )
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

    fn common_for(&self, disable_nested: bool) -> Common {
        let mut c = self.client.common.clone();
        if disable_nested || self.client.config.disable_nested_mcp {
            c.disable_mcp_servers = disableable(&nested_servers(&self.client.codex_home));
        }
        c
    }

    /// The client context of a session turn (nested MCP servers disabled when the operator
    /// said so).
    fn turn_client(&self) -> std::sync::Arc<ClientContext> {
        if self.client.config.disable_nested_mcp {
            std::sync::Arc::new(ClientContext {
                common: self.common_for(false),
                ..(*self.client).clone()
            })
        } else {
            self.client.clone()
        }
    }

    pub(crate) async fn codex(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        match self.codex_inner(args, ctx).await {
            Ok(r) => r,
            Err(e) => error_result(&e, None),
        }
    }

    async fn codex_inner(&self, args: JsonObject, ctx: &CallCtx) -> Result<CallToolResult> {
        let p: CodexParams = parse_args(args)?;
        validate_prompt("prompt", &p.prompt)?;
        let session_id = p
            .session_id
            .as_deref()
            .map(|s| SessionId::parse("sessionId", s))
            .transpose()?;
        let sandbox = p.sandbox;
        if sandbox == Some(SandboxLevel::DangerFullAccess) && !self.client.config.allow_danger {
            return Err(Error::invalid(
                "sandbox",
                "danger-full-access is disabled on this server (operator setting CODEX_BRIDGE_ALLOW_DANGER)",
            ));
        }
        let effort = p.reasoning_effort;
        check_model(&p.model)?;
        let timeout = self.client.config.timeout_for(p.timeout)?;
        let existing: Option<SessionRecord> = match &session_id {
            Some(id) => self.bridge.get(id)?,
            None => None,
        };
        let cwd = match (&p.working_directory, &existing) {
            (Some(d), _) => self.resolve_dir(d)?,
            (None, Some(rec)) => self.resolve_dir(&rec.working_directory.to_string_lossy())?,
            (None, None) => self.default_dir(ctx).await?,
        };
        let att = files::attach(p.files.as_deref().unwrap_or_default(), &cwd)?;
        let prompt = format!("{}{}", p.prompt, att.text);
        validate_prompt("prompt", &prompt)?;
        let (progress, _guard) = progress_for(ctx, self.client.config.heartbeat);
        let call = TurnCall {
            session_id,
            reset: p.reset_session.unwrap_or(false),
            prompt,
            sandbox,
            model: p.model.clone(),
            reasoning_effort: effort,
            cwd,
            images: att.images,
            timeout,
            wait_if_busy: p.wait_if_busy.unwrap_or(true),
            cancel: ctx.ct.child_token(),
            progress,
            output_schema: None,
            output_last_message: None,
            client: Some(self.turn_client()),
        };
        let report = self.bridge.turn(call).await?;
        let mut value = shape(
            &report.outcome,
            report.queued,
            report.sandbox,
            report.recorded.as_ref(),
            p.max_response_length,
        );
        value.session_id = Some(report.session_id.to_string());
        value.resumed = Some(report.resumed);
        value.model = report.model.clone();
        Ok(finish(report.outcome, value))
    }

    async fn one_shot(
        &self,
        spec: crate::codex::argv::SpawnSpec,
        timeout: Duration,
        ctx: &CallCtx,
        max_len: Option<u64>,
    ) -> Result<(TurnOutcome, TurnResult)> {
        let sandbox = spec.sandbox();
        let (progress, _guard) = progress_for(ctx, self.client.config.heartbeat);
        let (outcome, queued) = self
            .bridge
            .one_shot(
                spec,
                self.client.config.limits,
                timeout,
                ctx.ct.child_token(),
                progress,
                &self.client.secrets,
            )
            .await?;
        let value = shape(&outcome, queued, sandbox, None, max_len);
        Ok((outcome, value))
    }

    fn scratch_dir() -> Result<(tempfile::TempDir, Confined)> {
        let dir = tempfile::Builder::new()
            .prefix("codex-mcp-bridge-")
            .tempdir()
            .map_err(Error::io("creating a scratch directory"))?;
        let canon = dir
            .path()
            .canonicalize()
            .map_err(Error::io("resolving the scratch directory"))?;
        let c = confine::resolve(
            "workingDirectory",
            &canon.to_string_lossy(),
            Path::new("/"),
            std::slice::from_ref(&canon),
            Kind::Dir,
        )?;
        Ok((dir, c))
    }

    /// A `query` or `search` turn: a fresh empty directory, read-only, nested MCP servers off.
    async fn scratch_turn(
        &self,
        build: fn(&Common, &OneShotRequest) -> Result<crate::codex::argv::SpawnSpec>,
        prompt: String,
        model: Option<String>,
        reasoning_effort: Option<ReasoningEffort>,
        timeout: Duration,
        ctx: &CallCtx,
    ) -> Result<CallToolResult> {
        let (_dir, cwd) = Self::scratch_dir()?;
        let req = OneShotRequest {
            prompt,
            model: model.clone(),
            reasoning_effort,
            cwd,
        };
        let spec = build(&self.common_for(true), &req)?;
        let (outcome, mut value) = self.one_shot(spec, timeout, ctx, None).await?;
        value.model = model;
        Ok(finish(outcome, value))
    }

    pub(crate) async fn query(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: QueryParams = parse_args(args)?;
            validate_prompt("prompt", &p.prompt)?;
            if p.context
                .as_ref()
                .is_some_and(|c| c.len() > MAX_CONTEXT_BYTES)
            {
                return Err(Error::invalid(
                    "context",
                    format!("is larger than {MAX_CONTEXT_BYTES} bytes"),
                ));
            }
            check_model(&p.model)?;
            let effort = p.reasoning_effort;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let prompt = match &p.context {
                Some(c) if !c.trim().is_empty() => {
                    format!("Context:\n{c}\n\nQuestion:\n{}", p.prompt)
                }
                _ => p.prompt.clone(),
            };
            self.scratch_turn(build_query, prompt, p.model, effort, timeout, ctx)
                .await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn search(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: SearchParams = parse_args(args)?;
            validate_prompt("query", &p.query)?;
            check_model(&p.model)?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let prompt = format!("Search the web and answer with sources: {}", p.query);
            self.scratch_turn(build_search, prompt, p.model, None, timeout, ctx)
                .await
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn review(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        let run = async {
            let p: ReviewParams = parse_args(args)?;
            check_model(&p.model)?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let target = review_target(
                p.mode,
                p.base.as_deref(),
                p.commit.as_deref(),
                p.title.as_deref(),
            )?;
            let cwd = self.resolve_dir(&p.working_directory)?;
            let spec = build_review(
                &self.common_for(false),
                &ReviewRequest {
                    target,
                    model: p.model.clone(),
                    cwd,
                },
            )?;
            let (outcome, mut value) = self.one_shot(spec, timeout, ctx, None).await?;
            value.model = p.model;
            value.findings = Some(parse_findings(&value.response));
            Ok(finish(outcome, value))
        };
        run.await.unwrap_or_else(|e| error_result(&e, None))
    }

    pub(crate) async fn structured(&self, args: JsonObject, ctx: &CallCtx) -> CallToolResult {
        match self.structured_inner(args, ctx).await {
            Ok(r) => r,
            Err(e) => error_result(&e, None),
        }
    }

    async fn structured_inner(&self, args: JsonObject, ctx: &CallCtx) -> Result<CallToolResult> {
        let p: StructuredParams = parse_args(args)?;
        validate_prompt("prompt", &p.prompt)?;
        check_model(&p.model)?;
        let timeout = self.client.config.timeout_for(p.timeout)?;
        let plan = crate::mcp::structured::plan(&p.schema)?;
        let cwd = match &p.working_directory {
            Some(d) => self.resolve_dir(d)?,
            None => self.default_dir(ctx).await?,
        };
        let att = files::attach(p.files.as_deref().unwrap_or_default(), &cwd)?;
        let state = tempfile::Builder::new()
            .prefix("codex-mcp-bridge-structured-")
            .tempdir()
            .map_err(Error::io("creating the schema's temporary directory"))?;
        let schema_file: PathBuf = state
            .path()
            .canonicalize()
            .map_err(Error::io("resolving the schema's temporary directory"))?
            .join("schema.json");
        let answer_file = schema_file.with_file_name("answer.json");
        if let Some(native) = &plan.native_schema {
            std::fs::write(&schema_file, native.to_string())
                .map_err(Error::io("writing the output schema file"))?;
        }
        let started = std::time::Instant::now();
        let mut prompt = format!("{}{}{}", p.prompt, att.text, plan.prompt_suffix);
        let mut resume = None;
        let mut total_queued = Duration::ZERO;
        for attempt in 0..2 {
            let _ = std::fs::remove_file(&answer_file);
            let remaining = timeout
                .saturating_sub(started.elapsed())
                .max(Duration::from_secs(1));
            let req = TurnRequest {
                prompt: prompt.clone(),
                sandbox: None,
                model: p.model.clone(),
                reasoning_effort: None,
                cwd: cwd.clone(),
                images: att.images.clone(),
                resume,
                output_schema: plan.native_schema.as_ref().map(|_| schema_file.clone()),
                output_last_message: Some(answer_file.clone()),
            };
            let spec = build_turn(&self.common_for(false), &req)?;
            let (outcome, mut value) = self.one_shot(spec, remaining, ctx, None).await?;
            total_queued += Duration::from_millis(value.queued_ms);
            value.queued_ms = total_queued.as_millis() as u64;
            value.model = p.model.clone();
            if !matches!(outcome.ending, Ending::Completed) {
                return Ok(finish(outcome, value));
            }
            let text = std::fs::read_to_string(&answer_file)
                .ok()
                .or_else(|| outcome.output.message.clone())
                .unwrap_or_default();
            match plan.check(&text) {
                Ok(mut data) => {
                    // read from codex's answer file, not from its redacted events: redacted
                    // here, as every answer is
                    self.client.secrets.redact_json(&mut data);
                    value.data = Some(data.clone());
                    let pretty = serde_json::to_string_pretty(&data).unwrap_or_default();
                    return Ok(ok_result(pretty, value));
                }
                Err(errors) if attempt == 0 && outcome.output.thread_id.is_some() => {
                    resume = outcome.output.thread_id;
                    prompt = format!(
                        "Your answer did not validate against the JSON Schema:\n{errors}\nReply again with only the corrected JSON."
                    );
                    if let Some(p) = progress_for(ctx, self.client.config.heartbeat).0 {
                        p("answer did not validate; asking once more".into());
                    }
                }
                Err(errors) => {
                    let e = Error::Codex {
                        kind: crate::codex::events::FailureKind::TurnFailed,
                        message: format!(
                            "the answer does not validate against the schema: {errors}"
                        ),
                    };
                    return Ok(error_result(&e, Some(value)));
                }
            }
        }
        Err(Error::SessionFailed("structured: no attempt left".into()))
    }

    fn session_info(&self, rec: &SessionRecord) -> SessionInfo {
        SessionInfo {
            session_id: rec.session_id.to_string(),
            thread_id: rec.thread_id.clone(),
            working_directory: rec.working_directory.display().to_string(),
            model: rec.model.clone(),
            created_ms: rec.created_ms,
            last_used_ms: rec.last_used_ms,
            turn_count: rec.turn_count,
            usage: rec.usage,
            last_status: rec.last_status.map(SessionStatus::from),
            last_error: rec.last_error.clone(),
            live: self.bridge.is_live(&rec.session_id),
        }
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
            let page = self.bridge.list(p.cursor.as_deref(), limit as usize)?;
            let sessions: Vec<SessionInfo> =
                page.sessions.iter().map(|r| self.session_info(r)).collect();
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

    pub(crate) fn get_session(&self, args: JsonObject) -> CallToolResult {
        let run = || -> Result<CallToolResult> {
            let p: GetSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let rec = self.bridge.get(&id)?;
            let session = rec.as_ref().map(|r| self.session_info(r));
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
        run().unwrap_or_else(|e| plain_error(&e))
    }

    pub(crate) async fn close_session(&self, args: JsonObject) -> CallToolResult {
        let run = async {
            let p: CloseSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let delete_thread = p.delete_thread.unwrap_or(false);
            if delete_thread && let Some(rec) = self.bridge.get(&id)? {
                self.client.check_codex_home(&rec).map_err(|_| {
                    Error::invalid(
                        "deleteThread",
                        "the session's thread lives in another CODEX_HOME than this client's; \
                         close it without deleteThread, or from a client using that CODEX_HOME",
                    )
                })?;
            }
            let removed = self
                .bridge
                .close(&id, delete_thread, Some(self.client.clone()))
                .await?;
            let session = removed.as_ref().map(|r| {
                let mut i = self.session_info(r);
                i.live = false;
                i
            });
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
        let shared = self.bridge.shared();
        let version = crate::codex::process::codex_version(
            &self.client.common.program,
            &self.client.common.env,
        )
        .await;
        let support = version.as_deref().map(CodexSupport::of);
        let counts = self.bridge.counts();
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
            store_path: shared.store.path().display().to_string(),
            schema_version: shared.store.schema_version().unwrap_or(0),
            live_sessions: counts.live_sessions,
            stored_sessions: counts.stored_sessions,
            active_turns: counts.active_turns,
            queued_turns: counts.queued_turns,
            max_concurrent: counts.max_concurrent,
            default_timeout_ms: self.client.config.default_timeout.as_millis() as u64,
            max_timeout_ms: self.client.config.max_timeout.as_millis() as u64,
            allow_danger: self.client.config.allow_danger,
            containment: serde_json::to_value(containment())
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
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
