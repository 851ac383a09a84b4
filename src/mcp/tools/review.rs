//! `review`: Codex's code review of a git repository: uncommitted changes, changes against a
//! base branch, or a commit. Its arguments ([`ReviewParams`]), its table entry (`TOOL`) and
//! its handler: the review's target and the repository checked and resolved, the review run
//! session-less through the bridge. Its result is a [`TurnResult`] with the findings.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::model_of;
use crate::actors::OneShot;
use crate::mcp::answer::parse_args;
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;
use crate::plan::review::review_target;
use crate::plan::values::ReviewMode;

/// The `review` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "review",
    title: "Code review",
    description: "Codex reviews a git repository's changes or one commit. Uncommitted \
                  changes, changes against a base branch, or a commit; findings are \
                  returned with priorities and locations. For a long review set \
                  background: true, then call `wait` with the reviewId (`stop` stops it).",
    // codex runs the review under workspace-write (git may write its index), so not
    // read-only
    hints: [false, false, false, true],
    input: schema::<ReviewParams>,
    output: schema::<TurnResult>,
    is: Traits {
        task: true,
        background: true,
        asks: true,
        precheck: Some(precheck),
        ..Traits::TURN
    },
    run: |s, args, ctx| Box::pin(s.review(args, ctx)),
};

/// `review`: Codex's code review of a repository's changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewParams {
    /// What to review; `uncommitted` changes unless given. `base`: the changes against the
    /// branch in `base`; `commit`: the commit in `commit`.
    #[serde(default)]
    pub mode: Option<ReviewMode>,
    /// The base branch (mode `base`).
    #[serde(default)]
    pub base: Option<String>,
    /// The commit (mode `commit`).
    #[serde(default)]
    pub commit: Option<String>,
    /// A title for the commit review (mode `commit` only).
    #[serde(default)]
    pub title: Option<String>,
    /// Model id.
    #[serde(default)]
    pub model: Option<String>,
    /// The repository, inside the allowed roots.
    pub working_directory: String,
    /// Timeout in milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Run the review in the background; `wait` returns the review. The call answers at once
    /// with a reviewId and `status: running`.
    #[serde(default)]
    pub background: Option<bool>,
}

/// `review`'s arguments checked before any state of its call is kept: each field's type, no
/// unknown field, the model id.
fn precheck(args: &JsonObject) -> crate::error::Result<()> {
    let p: ReviewParams = crate::mcp::answer::parse_args_ref(args)?;
    model_of(p.model.as_deref()).map(drop)
}

impl McpServer {
    async fn review(
        &self,
        args: JsonObject,
        ctx: &CallCtx,
    ) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: ReviewParams = parse_args(args)?;
            let model = model_of(p.model.as_deref())?;
            let timeout = self.client.config.timeout_for(p.timeout)?;
            let target = review_target(
                p.mode,
                p.base.as_deref(),
                p.commit.as_deref(),
                p.title.as_deref(),
            )?;
            let request = OneShot::Review {
                target,
                model,
                cwd: self.resolve_dir(&p.working_directory)?,
            };
            self.one_shot(request, timeout, ctx).await
        };
        run.await
    }
}
