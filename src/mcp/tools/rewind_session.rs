//! `rewindSession`: a session's conversation taken back by some turns, so that its next turn
//! continues from before them. Its arguments ([`RewindSessionParams`]), its result
//! ([`RewindResult`]), its table entry (`TOOL`) and its handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::session_info;
use crate::actors::ThreadOp;
use crate::error::Error;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionInfo;
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// Most turns one call takes a session back.
pub const MAX_REWIND_TURNS: u32 = 1000;

/// The `rewindSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "rewindSession",
    title: "Rewind session",
    description: "Drop a session's latest turns, between turns. Its next turn continues \
                  from before them (files codex changed are not undone).",
    hints: [false, true, false, false],
    input: schema::<RewindSessionParams>,
    output: schema::<RewindResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.rewind_session(args)),
};

/// `rewindSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindSessionParams {
    /// The session to take back, between turns.
    pub session_id: String,
    /// How many of its latest turns to drop: 1 up to all it has.
    pub turns: u32,
}

/// `rewindSession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindResult {
    /// How many turns were dropped by this call.
    pub dropped: u32,
    /// What a rewind does not do.
    pub note: String,
    pub session: SessionInfo,
}

impl McpServer {
    async fn rewind_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: RewindSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            if !(1..=MAX_REWIND_TURNS).contains(&p.turns) {
                return Err(Error::invalid(
                    "turns",
                    format!("must be between 1 and {MAX_REWIND_TURNS}"),
                ));
            }
            let timeout = self.client.config.timeout_for(None)?;
            let session = self
                .bridge
                .thread_op(&id, ThreadOp::Rewind(p.turns), self.client.clone(), timeout)
                .await
                .map(|v| session_info(v, &self.client))?;
            let note = "Files codex changed in the dropped turns are not undone.".to_owned();
            Ok(ok_result(
                format!(
                    "Session {id} went back {} turn(s); its next turn continues from before \
                     them. {note}",
                    p.turns
                ),
                RewindResult {
                    dropped: p.turns,
                    note,
                    session,
                },
            ))
        };
        run.await
    }
}
