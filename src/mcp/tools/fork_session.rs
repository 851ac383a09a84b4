//! `forkSession`: a session forked between turns into a new session with a copy of its
//! conversation. Its arguments ([`ForkSessionParams`]), its result ([`ForkResult`]), its table
//! entry (`TOOL`) and its handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::session_info;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionInfo;
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// The `forkSession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "forkSession",
    title: "Fork session",
    description: "Fork a session into a new one, between turns. The new session has a \
                  copy of the conversation and the same working directory, to try another \
                  direction; both then go on separately.",
    hints: [false, false, false, false],
    input: schema::<ForkSessionParams>,
    output: schema::<ForkResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.fork_session(args)),
};

/// `forkSession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkSessionParams {
    /// The session to fork, between turns. The fork gets a new sessionId, the same working
    /// directory and a copy of the conversation so far; each then goes its own way.
    pub session_id: String,
}

/// `forkSession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkResult {
    /// The new session: continue it with `codex` and this sessionId.
    pub session_id: String,
    /// The session it was forked from (which goes on as before).
    pub forked_from: String,
    pub session: SessionInfo,
}

impl McpServer {
    async fn fork_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: ForkSessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let timeout = self.client.config.timeout_for(None)?;
            let forked = self
                .bridge
                .fork(&id, self.client.clone(), timeout)
                .await
                .map(|v| session_info(v, &self.client))?;
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
        run.await
    }
}
