//! `structured`: an answer from Codex that validates against the caller's JSON Schema, returned
//! in `data` (one re-ask on a validation failure). Its arguments ([`StructuredParams`]), its
//! table entry (`TOOL`) and its handler: the schema planned, the prompt, model and working
//! directory checked and resolved, the call run session-less through the bridge. Its result is
//! a [`TurnResult`].

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

/// The `structured` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "structured",
    title: "Structured answer",
    description: "Ask Codex for JSON valid against a JSON Schema, returned in `data`. \
                  Codex is asked once more when its answer does not validate.",
    hints: [true, false, false, true],
    input: schema::<StructuredParams>,
    output: schema::<TurnResult>,
    is: Traits {
        task: true,
        roots_first: true,
        asks: true,
        precheck: Some(precheck),
        ..Traits::TURN
    },
    run: |s, args, ctx| Box::pin(s.structured(args, ctx)),
};

/// `structured`: an answer that validates against a JSON Schema.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StructuredParams {
    /// The task.
    pub prompt: String,
    /// The JSON Schema the answer must satisfy. An object, or a string holding one.
    pub schema: serde_json::Value,
    /// Files to attach (as for `codex`).
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// Working directory, inside the allowed roots.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Timeout in milliseconds (covers the re-ask too).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `structured`'s arguments checked before any state of its call is kept: each field's type,
/// no unknown field, the model id, how many files, the schema, the prompt.
fn precheck(args: &JsonObject) -> crate::error::Result<()> {
    let p: StructuredParams = crate::mcp::answer::parse_args_ref(args)?;
    model_of(p.model.as_deref())?;
    super::common::check_files(&p.files)?;
    crate::turn::schema::plan(&p.schema)?;
    crate::security::prompt::Prompt::parse("prompt", p.prompt)?;
    Ok(())
}

impl McpServer {
    async fn structured(
        &self,
        args: JsonObject,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: StructuredParams = parse_args(args)?;
            let model = model_of(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let plan = crate::turn::schema::plan(&p.schema)?;
            let cwd = match &p.working_directory {
                Some(d) => self.resolve_dir(d)?,
                None => self.default_dir(ctx).await?,
            };
            let request = OneShot::Structured {
                prompt: Prompt::parse("prompt", p.prompt)?,
                files: p.files.unwrap_or_default(),
                plan: Box::new(plan),
                model,
                cwd,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await
    }
}
