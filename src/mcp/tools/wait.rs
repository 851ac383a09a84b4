//! `wait`: the result of a background turn (`codex` or `review` with `background: true`), as
//! soon as it ends within `waitSeconds`, or `status: running` with what codex is doing now.
//! Its arguments ([`WaitParams`]), its table entry (`TOOL`) and its handler; its result is a
//! turn's ([`TurnResult`]).

use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, DetailedTask, JsonObject, TaskPayload};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::mcp::answer::{error_result, ok_result, parse_args};
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::progress::progress_for;
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;
use crate::mcp::tasks::{INTERRUPTED, ended, review_handle, session_handle};
use crate::security::ids::SessionId;

/// Longest `waitSeconds`: below the shortest tool-call limit of the hosts (Codex as a host
/// gives a tool 60 s by default), so that a `wait` is never cut off itself.
pub const MAX_WAIT_SECONDS: u64 = 50;
/// `waitSeconds` when not given.
pub const DEFAULT_WAIT_SECONDS: u64 = 25;

/// The `wait` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "wait",
    title: "Wait for a background turn",
    description: "Get a background turn's result, or what it is doing. For a turn started \
                  with `background: true` (`codex`: its sessionId; `review`: its reviewId): \
                  its result as soon as it ends, or after waitSeconds `status: running` with \
                  what Codex is doing now; then call it again. Codex's questions during the \
                  turn are asked while you wait.",
    hints: [true, false, true, false],
    input: schema::<WaitParams>,
    output: schema::<TurnResult>,
    is: Traits {
        turn_errors: true,
        asks: true,
        precheck: Some(precheck),
        ..Traits::PLAIN
    },
    run: |s, args, ctx| Box::pin(s.wait(args, ctx)),
};

/// `wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitParams {
    /// The session of a background `codex` call.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The reviewId of a background `review`.
    #[serde(default)]
    pub review_id: Option<String>,
    /// Seconds to wait for the turn to end: 1 to 50 (default 25).
    #[serde(default)]
    pub wait_seconds: Option<u64>,
}

/// A background turn a `wait` or `stop` names, found among its host's.
pub(super) struct NamedTurn {
    /// Whose it is (the caller's host).
    host: Option<String>,
    handle: String,
    /// Its task.
    pub(super) id: String,
    /// What the answer carries of it (its `sessionId` or `reviewId`).
    pub(super) value: TurnResult,
}

/// The handle a `wait` or `stop` of a client of `host` names (`sessionId` or `reviewId`),
/// checked, with the result it answers with.
fn handle_of(
    session_id: &Option<String>,
    review_id: &Option<String>,
    host: &Option<String>,
) -> Result<(String, TurnResult)> {
    let mut value = TurnResult::default();
    let handle = match (session_id, review_id) {
        (Some(s), None) => {
            let id = SessionId::parse("sessionId", s)?;
            value.session_id = Some(id.as_str().to_owned());
            session_handle(id.as_str(), host)
        }
        (None, Some(r)) => {
            let id = uuid::Uuid::parse_str(r)
                .map_err(|_| Error::invalid("reviewId", "is not a reviewId a review returned"))?;
            value.review_id = Some(id.to_string());
            review_handle(&id.to_string(), host)
        }
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "reviewId",
                "give `sessionId` (a background `codex` call) or `reviewId` (a background \
                 `review`), not both",
            ));
        }
        (None, None) => {
            return Err(Error::invalid(
                "sessionId",
                "give `sessionId` (a background `codex` call) or `reviewId` (a background \
                 `review`)",
            ));
        }
    };
    Ok((handle, value))
}

/// `wait`'s arguments checked before any state of its call is kept (it carries its background
/// turn's questions): each field's type, no unknown field.
fn precheck(args: &JsonObject) -> crate::error::Result<()> {
    let _: WaitParams = crate::mcp::answer::parse_args_ref(args)?;
    Ok(())
}

impl McpServer {
    async fn wait(&self, args: JsonObject, ctx: &CallCtx) -> crate::error::Result<CallToolResult> {
        let p: WaitParams = parse_args(args)?;
        let seconds = match p.wait_seconds {
            None => DEFAULT_WAIT_SECONDS,
            Some(s @ 1..=MAX_WAIT_SECONDS) => s,
            Some(_) => {
                return Err(Error::invalid(
                    "waitSeconds",
                    format!("must be from 1 to {MAX_WAIT_SECONDS}"),
                ));
            }
        };
        let named = self.named_turn(&p.session_id, &p.review_id, ctx)?;
        let task = self.until_end(&named, seconds, ctx, true).await?;
        Ok(answer_of(task, named.value))
    }

    /// The background turn a `wait` or `stop` of `ctx`'s client names (`sessionId` or
    /// `reviewId`), checked, among those of the client's host.
    pub(super) fn named_turn(
        &self,
        session_id: &Option<String>,
        review_id: &Option<String>,
        ctx: &CallCtx,
    ) -> Result<NamedTurn> {
        let host = self.caller_host(ctx);
        let (handle, value) = handle_of(session_id, review_id, &host)?;
        let id = self.tasks.of_handle(&handle).ok_or_else(|| {
            Error::invalid(
                if session_id.is_some() {
                    "sessionId"
                } else {
                    "reviewId"
                },
                "no background turn of it is known to this client: none was started with \
                 `background: true` by this host (its client name, CODEX_HOME and roots), or its \
                 record expired (getSession shows a session's last turn)",
            )
        })?;
        Ok(NamedTurn {
            host,
            handle,
            id,
            value,
        })
    }

    /// The task of `turn` once it ended, or after `seconds`; its status messages go out as
    /// progress meanwhile, and when `asked` this call is among its waiters (its questions come
    /// here).
    pub(super) async fn until_end(
        &self,
        turn: &NamedTurn,
        seconds: u64,
        ctx: &CallCtx,
        asked: bool,
    ) -> Result<DetailedTask> {
        let (handle, id) = (turn.handle.as_str(), turn.id.as_str());
        let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
        let waiters = self.tasks.waiters_of(handle);
        let waiting = waiters.attach(ctx.ask.clone().filter(|_| asked), turn.host.clone());
        let until = Instant::now() + Duration::from_secs(seconds);
        let mut said: Option<String> = None;
        let task = loop {
            let Some(task) = self.tasks.by_handle_id(id) else {
                return Err(Error::SessionFailed(
                    "the background turn's record is gone (it expired)".into(),
                ));
            };
            // a question open on this waiter keeps it: its answer comes back on this call's
            // connection
            let asked = waiting.as_ref().is_some_and(|w| w.asked_now());
            let due = Instant::now() >= until && !asked;
            if ended(&task) || due || ctx.ct.is_cancelled() {
                break task;
            }
            if let (Some(p), Some(m)) = (&progress, &task.task.status_message)
                && said.as_ref() != Some(m)
            {
                p(m.clone());
                said = Some(m.clone());
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = ctx.ct.cancelled() => {}
            }
        };
        Ok(task)
    }
}

/// What `wait` (and `stop`) answers for `task`: its result, its failure, or `running` with
/// its status.
pub(super) fn answer_of(task: DetailedTask, mut value: TurnResult) -> CallToolResult {
    match task.payload {
        TaskPayload::Completed { result } => {
            serde_json::from_value::<CallToolResult>(serde_json::Value::Object(result))
                .map(|mut r| {
                    if let Some(serde_json::Value::Object(o)) = &mut r.structured_content {
                        let status = if r.is_error == Some(true) {
                            "failed"
                        } else {
                            "completed"
                        };
                        o.insert("status".into(), status.into());
                    }
                    r
                })
                .unwrap_or_else(|e| {
                    error_result(
                        &Error::SessionFailed(format!("the turn's result does not read: {e}")),
                        None,
                    )
                })
        }
        TaskPayload::Failed { error } => {
            let message = error
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("the background turn failed")
                .to_owned();
            value.status = Some(
                if message == INTERRUPTED {
                    "interrupted"
                } else {
                    "failed"
                }
                .into(),
            );
            error_result(&Error::SessionFailed(message), Some(value))
        }
        TaskPayload::Cancelled => {
            value.status = Some("cancelled".into());
            error_result(&Error::Cancelled { partial: None }, Some(value))
        }
        _ => {
            value.status = Some("running".into());
            value.progress = task.task.status_message.clone();
            let doing = value.progress.clone().unwrap_or_else(|| "working".into());
            ok_result(
                format!(
                    "Still running ({doing}). Call `wait` again with the same handle to get \
                     the result."
                ),
                value,
            )
        }
    }
}
