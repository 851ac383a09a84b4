//! `renameSession`: a name a person chose for a session, kept in its record and in codex's
//! record of its thread. Its arguments ([`RenameSessionParams`]), its result
//! ([`RenameResult`]), its table entry (`TOOL`) and its handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::session_info;
use crate::actors::ThreadOp;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionInfo;
use crate::mcp::schemas::schema;
use crate::security::ids::{SessionId, SessionName};

/// The `renameSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "renameSession",
    title: "Rename session",
    description: "Name a session, between turns. The name a person chose shows in \
                  listSessions, getSession, the `sessions` command line and codex's own \
                  app.",
    hints: [false, false, true, false],
    input: schema::<RenameSessionParams>,
    output: schema::<RenameResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.rename_session(args)),
};

/// `renameSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameSessionParams {
    /// The session to name, between turns.
    pub session_id: String,
    /// The new name: one line of at most 80 characters. It replaces any earlier name; no
    /// control or invisible characters.
    pub name: String,
}

/// `renameSession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenameResult {
    pub session: SessionInfo,
}

impl McpServer {
    async fn rename_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: RenameSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let name = SessionName::parse("name", &p.name)?;
            let timeout = self.client.config.timeout_for(None)?;
            let session = self
                .bridge
                .thread_op(
                    &id,
                    ThreadOp::Name(name.clone()),
                    self.client.clone(),
                    timeout,
                )
                .await
                .map(|v| session_info(v, &self.client))?;
            Ok(ok_result(
                format!("Session {id} is now named \"{name}\"."),
                RenameResult { session },
            ))
        };
        run.await
    }
}
