//! Background calls: `codex` and `review` with `background: true` answer at once with a
//! handle (the `sessionId`; a review's `reviewId`) and `status: running`. The turn runs as a
//! task of the store's owner, like a task's call: it outlives the call, the client and (with
//! the owner daemon) the host's process; its record is kept in the store. `wait` (its tool's
//! file) returns its result as soon as it ends, or `running` with what codex is doing now.

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, JsonObject};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::answer::{error_result, ok_result};
use super::checks::checked_first;
use super::connection::{McpServer, TaskStart, client_name, roots_peer};
use super::results::TurnResult;
use super::task_owner::TaskOwner;
use super::tasks::{review_handle, session_handle};
use crate::error::Error;
use crate::security::ids::SessionId;

/// `background` taken out of a call's `args`: whether it asks to run in the background (a
/// value that is not a boolean is refused, naming it). Other tools keep it, and refuse it as
/// an unknown field.
pub(super) fn take(name: &str, args: &mut JsonObject) -> Result<bool, Error> {
    if !super::tools::tool_named(name).is_some_and(|t| t.is.background) {
        return Ok(false);
    }
    match args.remove("background") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(Error::invalid("background", "must be true or false")),
    }
}

impl McpServer {
    /// Start `name` in the background: its arguments checked first (a refusal names the
    /// field, as the tool's would), a `codex` call given its session id now when it named
    /// none; the answer is the handle and `status: running`.
    pub(super) fn start_background(
        &self,
        name: String,
        mut args: JsonObject,
        owner: TaskOwner,
        context: &RequestContext<RoleServer>,
        span: tracing::Span,
    ) -> CallToolResponse {
        if let Some(refused) = checked_first(&name, &args) {
            return refused;
        }
        // the working directory too, as the tool will: a refusal comes now, not from `wait`
        if let Some(Value::String(dir)) = args.get("workingDirectory")
            && let Err(e) = self.resolve_dir(dir)
        {
            return CallToolResponse::Complete(error_result(&e, None));
        }
        let host = self.host_key(context);
        // whose the turn is: the handle and the questions (over HTTP, the HTTP session's)
        let who = self.background_host(&client_name(context), owner.http_session());
        let mut value = TurnResult {
            status: Some("running".into()),
            ..TurnResult::default()
        };
        let (handle, how) = if name == "codex" {
            let id = match args.get("sessionId").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => {
                    let id = SessionId::generate().as_str().to_owned();
                    args.insert("sessionId".into(), Value::String(id.clone()));
                    id
                }
            };
            let how = format!(r#"{{"sessionId": "{id}"}}"#);
            value.session_id = Some(id.clone());
            (session_handle(&id, &who), how)
        } else {
            let id = uuid::Uuid::new_v4().to_string();
            let how = format!(r#"{{"reviewId": "{id}"}}"#);
            value.review_id = Some(id.clone());
            (review_handle(&id, &who), how)
        };
        if name == "codex" && self.tasks.running_handle(&handle) {
            let id = value.session_id.as_deref().unwrap_or_default();
            let e = Error::Busy(format!(
                "session {id} is already running a background turn: `wait` for it first"
            ));
            return CallToolResponse::Complete(error_result(&e, None));
        }
        let waiters = self.tasks.waiters_of(&handle);
        waiters.started_by(who);
        let start = TaskStart {
            owner,
            host,
            handle: Some(handle.clone()),
            roots: roots_peer(context),
            elicits: None,
            // its questions go to the client waiting on it (`wait`)
            waiters: Some(waiters),
            client_name: client_name(context),
        };
        let task = self.spawn_task(name.clone(), args, span, start);
        tracing::info!(tool = %name, task = %task.task_id, "a call runs in the background");
        let text = format!(
            "Codex is working on this in the background (status: running). Call `wait` with \
             {how} to get the result: it answers as soon as the turn ends, or says it is still \
             running and what Codex is doing; call it again until then."
        );
        CallToolResponse::Complete(ok_result(text, value))
    }
}
