//! `steer`: a message added to a session's running Codex turn without cancelling it. Its
//! arguments ([`SteerParams`]), its result ([`SteerResult`]), its table entry (`TOOL`) and
//! its handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;
use crate::security::prompt::Prompt;

/// The `steer` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "steer",
    title: "Steer a running turn",
    description: "Add a message to a session's running turn without cancelling it. A \
                  correction, say; returns once Codex took it. The turn's result lists it \
                  under `steered`.",
    hints: [false, false, false, false],
    input: schema::<SteerParams>,
    output: schema::<SteerResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.steer(args)),
};

/// `steer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteerParams {
    /// The session whose running turn takes the message.
    pub session_id: String,
    /// What to add to the running turn (a correction, say). The turn goes on with it.
    pub prompt: String,
}

/// `steer`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteerResult {
    pub session_id: String,
    /// Codex took the message into the running turn (its result lists it under `steered`).
    pub steered: bool,
}

impl McpServer {
    async fn steer(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: SteerParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let text = Prompt::parse("prompt", p.prompt)?;
            self.bridge.steer(&id, text, self.client.clone()).await?;
            Ok(ok_result(
                format!("Codex took the message into session {id}'s running turn."),
                SteerResult {
                    session_id: id.to_string(),
                    steered: true,
                },
            ))
        };
        run.await
    }
}
