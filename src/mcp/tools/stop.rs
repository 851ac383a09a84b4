//! `stop`: stop a background turn (`codex` or `review` with `background: true`) and answer how
//! it ended. Its arguments ([`StopParams`]), its table entry (`TOOL`) and its handler; its
//! result is a turn's ([`TurnResult`]), as `wait`'s.

use rmcp::model::{CallToolResult, JsonObject, TaskPayload};
use schemars::JsonSchema;
use serde::Deserialize;

use super::wait::answer_of;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;

/// How long `stop` waits for the stopped turn to end before it answers `running` (a turn
/// stops within a second or two: its codex is interrupted, then its processes are ended).
const STOP_WAIT_SECONDS: u64 = 15;

/// The `stop` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "stop",
    title: "Stop a background turn",
    description: "Stop a background turn and return how it ended. A turn started with \
                  `background: true` (`codex`: its sessionId; `review`: its reviewId) ends \
                  with `status: cancelled`, or its result when it ended first. A stopped `codex` turn leaves its session \
                  to go on with (closeSession forgets the session).",
    // it ends work under way: destructive, as closeSession
    hints: [false, true, true, false],
    input: schema::<StopParams>,
    output: schema::<TurnResult>,
    is: Traits {
        turn_errors: true,
        ..Traits::PLAIN
    },
    run: |s, args, ctx| Box::pin(s.stop(args, ctx)),
};

/// `stop`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopParams {
    /// The session of a background `codex` call.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The reviewId of a background `review`.
    #[serde(default)]
    pub review_id: Option<String>,
}

impl McpServer {
    async fn stop(&self, args: JsonObject, ctx: &CallCtx) -> crate::error::Result<CallToolResult> {
        let p: StopParams = parse_args(args)?;
        let named = self.named_turn(&p.session_id, &p.review_id, ctx)?;
        // as `tasks/cancel`: the turn is cancelled and its processes end. A turn that already
        // ended (here or with an earlier process) is only read back
        let _ = self.tasks.manager.cancel_task(&named.id);
        // (not a waiter: a question the turn raises before it stops is not asked here)
        let task = self
            .until_end(&named, STOP_WAIT_SECONDS, ctx, false)
            .await?;
        let mut value = named.value;
        if matches!(task.payload, TaskPayload::Cancelled) {
            // what was asked for: not an error
            value.status = Some("cancelled".into());
            return Ok(ok_result(
                "The background turn was stopped (status: cancelled).".into(),
                value,
            ));
        }
        Ok(answer_of(task, value))
    }
}
