//! `query`: a one-off question to Codex, with no files, no session and a read-only sandbox.
//! Its arguments ([`QueryParams`]), its table entry (`TOOL`) and its handler: the prompt,
//! model and context (at most [`MAX_CONTEXT_BYTES`]) checked, the question run session-less
//! through the bridge. Its result is a [`TurnResult`].

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::model_of;
use crate::actors::OneShot;
use crate::error::Error;
use crate::mcp::answer::parse_args;
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;
use crate::plan::values::ReasoningEffort;
use crate::security::prompt::Prompt;

/// Largest `query` context.
pub const MAX_CONTEXT_BYTES: usize = 1024 * 1024;

/// The `query` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "query",
    title: "Ask Codex",
    description: "Ask Codex a one-off question (no files, no session, read-only).",
    hints: [true, false, false, true],
    input: schema::<QueryParams>,
    output: schema::<TurnResult>,
    is: Traits::TURN,
    run: |s, args, ctx| Box::pin(s.query(args, ctx)),
};

/// `query`: a one-off question, no session, no repository.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryParams {
    /// The question.
    pub prompt: String,
    /// Extra context placed before the question.
    #[serde(default)]
    pub context: Option<String>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Reasoning effort.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

impl McpServer {
    async fn query(&self, args: JsonObject, ctx: &CallCtx) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: QueryParams = parse_args(args)?;
            let model = model_of(p.model.as_deref())?;
            if p.context
                .as_ref()
                .is_some_and(|c| c.len() > MAX_CONTEXT_BYTES)
            {
                return Err(Error::invalid(
                    "context",
                    format!("is larger than {MAX_CONTEXT_BYTES} bytes"),
                ));
            }
            let reasoning_effort = p.reasoning_effort;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let request = OneShot::Query {
                prompt: Prompt::parse("prompt", p.prompt)?,
                context: p.context,
                model,
                reasoning_effort,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await
    }
}
