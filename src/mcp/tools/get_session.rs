//! `getSession`: one stored session. Its arguments ([`GetSessionParams`]), its table entry
//! (`TOOL`) and its handler. Its result is a [`SessionResult`], which `closeSession` shares.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::session_info;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionResult;
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// The `getSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "getSession",
    title: "Get session",
    description: "Show one stored session and how to go on with it in codex's own app. \
                  Its own worktree, if any: path, branch, base commit, files changed. \
                  `handOff` is the command that continues it there (`handOffUnavailable` \
                  says why there is none); with `handOff: true` the server first lets go of \
                  the session's thread so that app can open it.",
    hints: [true, false, true, false],
    input: schema::<GetSessionParams>,
    output: schema::<SessionResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.get_session(args)),
};

/// `getSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetSessionParams {
    /// The session id.
    pub session_id: String,
    /// Set it to continue in codex's own app: frees the thread. Its warm process closes between
    /// turns (codex will not open a thread another process holds); the server's next turn reads
    /// the thread again.
    #[serde(default)]
    pub hand_off: bool,
}

impl McpServer {
    async fn get_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: GetSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let session = match self.bridge.session_for(&id, p.hand_off).await? {
                Some(v) => Some(session_info(
                    self.bridge.with_changes(v).await,
                    &self.client,
                )),
                None => None,
            };
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
        run.await
    }
}
