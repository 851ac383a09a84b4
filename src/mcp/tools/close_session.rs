//! `closeSession`: forget a session, cancelling its running turn, and optionally delete Codex's
//! thread. Its arguments ([`CloseSessionParams`]), its table entry (`TOOL`) and its handler.
//! Its result is a [`SessionResult`], which `getSession` shares. A host never ends another
//! host's turn ([`McpServer::caller_host`]): while the session runs or has queued a call of
//! another host, the close is refused naming `sessionId`, and nothing is cancelled.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::session_info;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionResult;
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// The `closeSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "closeSession",
    title: "Close session",
    description: "Forget a session, cancelling its running turn. Optionally delete \
                  Codex's thread too. A session's own worktree is removed with its branch; \
                  while it holds changes not applied the close is refused unless \
                  dropChanges: true.",
    hints: [false, true, true, false],
    input: schema::<CloseSessionParams>,
    output: schema::<SessionResult>,
    is: Traits::PLAIN,
    run: |s, args, ctx| Box::pin(s.close_session(args, ctx)),
};

/// `closeSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloseSessionParams {
    /// The session id. A running turn is cancelled first.
    pub session_id: String,
    /// Also delete Codex's own thread files (`codex delete`).
    #[serde(default)]
    pub delete_thread: Option<bool>,
    /// Remove a worktree with changes not applied (they are lost). Without it such a close, or
    /// one while its turn still runs, is refused.
    #[serde(default)]
    pub drop_changes: Option<bool>,
}

impl McpServer {
    async fn close_session(
        &self,
        args: JsonObject,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: CloseSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let delete_thread = p.delete_thread.unwrap_or(false);
            let session = self
                .bridge
                .close_session(
                    &id,
                    (delete_thread, p.drop_changes.unwrap_or(false)),
                    self.client.clone(),
                    self.caller_host(ctx),
                )
                .await?
                .map(|v| session_info(v, &self.client));
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
        run.await
    }
}
