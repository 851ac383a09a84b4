//! `compactSession`: codex compacts a session's conversation (its context summarised), so a
//! long conversation goes on inside the model's context. Its arguments
//! ([`CompactSessionParams`]), its result ([`CompactResult`]), its table entry (`TOOL`) and its
//! handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::session_info;
use crate::actors::ThreadOp;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::progress::progress_for;
use crate::mcp::results::SessionInfo;
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// The `compactSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "compactSession",
    title: "Compact session",
    description: "Compact a session's conversation, between turns. Codex summarises it, so \
                  a long conversation stays inside the model's context; the session goes on \
                  from the summary.",
    hints: [false, false, false, true],
    input: schema::<CompactSessionParams>,
    output: schema::<CompactResult>,
    is: Traits::PLAIN,
    run: |s, args, ctx| Box::pin(s.compact_session(args, ctx)),
};

/// `compactSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactSessionParams {
    /// The session to compact, between turns.
    pub session_id: String,
}

/// `compactSession`: the session, with codex's token counts of this compaction
/// (`session.lastCompaction`) when codex reported them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    pub session: SessionInfo,
}

impl McpServer {
    async fn compact_session(
        &self,
        args: JsonObject,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: CompactSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let timeout = self.client.config.timeout_for(None)?;
            // progress: a line now, then the heartbeat while codex compacts
            let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
            if let Some(p) = &progress {
                p(format!(
                    "asking codex to compact session {id}'s conversation"
                ));
            }
            let session = self
                .bridge
                .thread_op(&id, ThreadOp::Compact(None), self.client.clone(), timeout)
                .await
                .map(|v| session_info(v, &self.client))?;
            let counts = match &session.last_compaction {
                Some(c) => format!(
                    " (context: {} tokens before, {} after)",
                    c.tokens_before, c.tokens_after
                ),
                None => String::new(),
            };
            Ok(ok_result(
                format!("Session {id} was compacted{counts}; it goes on from codex's summary."),
                CompactResult { session },
            ))
        };
        run.await
    }
}
