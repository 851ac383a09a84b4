//! `search`: a web search synthesised by Codex (read-only). Its arguments ([`SearchParams`]),
//! its table entry (`TOOL`) and its handler: the query and model checked, the search run
//! session-less through the bridge. Its result is a [`TurnResult`].

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::model_of;
use crate::actors::OneShot;
use crate::mcp::answer::parse_args;
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;
use crate::security::prompt::Prompt;

/// The `search` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "search",
    title: "Web search",
    description: "Search the web with Codex and get a synthesised answer (read-only).",
    hints: [true, false, false, true],
    input: schema::<SearchParams>,
    output: schema::<TurnResult>,
    is: Traits::TURN,
    run: |s, args, ctx| Box::pin(s.search(args, ctx)),
};

/// `search`: a web search synthesised by Codex.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchParams {
    /// What to search the web for.
    pub query: String,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

impl McpServer {
    async fn search(
        &self,
        args: JsonObject,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: SearchParams = parse_args(args)?;
            let model = model_of(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let request = OneShot::Search {
                query: Prompt::parse("query", p.query)?,
                model,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await
    }
}
