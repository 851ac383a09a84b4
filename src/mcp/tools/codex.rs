//! `codex`: a Codex turn in a persistent session. Its arguments ([`CodexParams`]), its table
//! entry (`TOOL`) and its handler: the session id, prompt, model and working directory
//! checked and resolved, the person behind the call reachable for codex's questions under
//! `approvals = ask`, and the turn run on the session's actor. Its result is a
//! [`TurnResult`] with the session id to continue with.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::{finish, model_of, shape};
use crate::actors::{TurnCall, WorkDir};
use crate::approval::ask;
use crate::config::ApprovalMode;
use crate::error::Error;
use crate::mcp::answer::parse_args;
use crate::mcp::connection::{CallCtx, McpServer, ToolEntry, Traits};
use crate::mcp::progress::progress_for;
use crate::mcp::results::TurnResult;
use crate::mcp::schemas::schema;
use crate::plan::values::{ReasoningEffort, SandboxLevel};
use crate::security::ids::SessionId;
use crate::security::prompt::Prompt;

/// The `codex` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "codex",
    title: "Codex",
    description: "Run a Codex turn (edit, explain or test code) in a session. It runs in a \
                  working directory and returns the answer and the sessionId to continue \
                  with. For a long turn set background: true, then call `wait` with the \
                  sessionId until it is done (`stop` stops it).",
    hints: [false, true, false, true],
    input: schema::<CodexParams>,
    output: schema::<TurnResult>,
    is: Traits {
        task: true,
        background: true,
        roots_first: true,
        asks: true,
        precheck: Some(precheck),
        ..Traits::TURN
    },
    run: |s, args, ctx| Box::pin(s.codex(args, ctx)),
};

/// `codex`: a turn in a persistent session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodexParams {
    /// The task or question for Codex. Sent over stdin, never on the command line.
    pub prompt: String,
    /// The session to continue; omit it to start a new one. An unknown id starts a new session
    /// under that id (letters, digits, `_`, `-`; up to 256); every result returns the id.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Start a new Codex thread under the same session id.
    #[serde(default)]
    pub reset_session: Option<bool>,
    /// Sandbox for this turn's commands; `read-only` unless given. Never remembered between
    /// turns. `full-auto` is `workspace-write`; `danger-full-access` only when the operator
    /// enabled it.
    #[serde(default)]
    pub sandbox: Option<SandboxLevel>,
    /// Model id (any provider's; passed to codex as `--model=`).
    #[serde(default)]
    pub model: Option<String>,
    /// Reasoning effort for this turn.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Working directory, inside the server's allowed roots. A session stays bound to the
    /// directory it started in; omit it to continue there.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Files to attach, relative to the working directory. Each is `path` or `path:START-END`
    /// (a line range); images (png, jpg, jpeg, gif, webp) go as images.
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// The turn's timeout in milliseconds. The operator sets its default and cap.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Truncate the response to this many characters.
    #[serde(default)]
    pub max_response_length: Option<u64>,
    /// Wait while the session runs another turn (default true). With false a busy session
    /// fails the call at once.
    #[serde(default)]
    pub wait_if_busy: Option<bool>,
    /// Run the turn in the background; `wait` returns its result. It answers at once with the
    /// sessionId and `status: running`. For long turns: they outlive the call, your client's
    /// time limit and restart.
    #[serde(default)]
    pub background: Option<bool>,
    /// New session in a git worktree of its own. On branch `codex-bridge/<sessionId>`,
    /// parallel sessions never collide. See `diffSession`, `applySession`, `closeSession`.
    #[serde(default)]
    pub worktree: Option<bool>,
    /// With `worktree`: the ref it starts from. Default `HEAD`.
    #[serde(default)]
    pub base: Option<String>,
}

/// `codex`'s arguments checked before any state of its call is kept: each field's type, no
/// unknown field, the model id, the session id, how many files, the prompt.
fn precheck(args: &JsonObject) -> crate::error::Result<()> {
    let p: CodexParams = crate::mcp::answer::parse_args_ref(args)?;
    model_of(p.model.as_deref())?;
    if let Some(s) = &p.session_id {
        crate::security::ids::SessionId::parse("sessionId", s)?;
    }
    super::common::check_files(&p.files)?;
    crate::security::prompt::Prompt::parse("prompt", p.prompt)?;
    Ok(())
}

impl McpServer {
    async fn codex(&self, args: JsonObject, ctx: &CallCtx) -> crate::error::Result<CallToolResult> {
        let p: CodexParams = parse_args(args)?;
        let model = model_of(p.model.as_deref())?;
        let session_id = p
            .session_id
            .as_deref()
            .map(|s| SessionId::parse("sessionId", s))
            .transpose()?;
        let sandbox = p.sandbox;
        let effort = p.reasoning_effort;
        let timeout = self.client.config.timeout_for(p.timeout)?;
        let cwd = match &p.working_directory {
            Some(d) => WorkDir::Given(self.resolve_dir(d)?),
            None => WorkDir::Default(self.default_dir(ctx).await?),
        };
        let worktree = match (p.worktree.unwrap_or(false), p.base) {
            (true, base) => Some(base),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Error::invalid(
                    "base",
                    "is the ref a new worktree starts from: set worktree: true with it",
                ));
            }
        };
        let (progress, _guard) = progress_for(&ctx.progress, self.client.config.heartbeat);
        let asker = match (&self.client.config.approvals, &ctx.ask) {
            (ApprovalMode::Ask, Some(channel)) => Some(ask::asker(
                channel.clone(),
                self.client.secrets.clone(),
                self.client.config.approval_timeout,
                progress.clone(),
            )),
            _ => None,
        };
        let call = TurnCall {
            session_id,
            reset: p.reset_session.unwrap_or(false),
            prompt: Some(Prompt::parse("prompt", p.prompt)?),
            files: p.files.unwrap_or_default(),
            sandbox,
            model,
            reasoning_effort: effort,
            cwd,
            timeout,
            wait_if_busy: p.wait_if_busy.unwrap_or(true),
            cancel: ctx.ct.child_token(),
            progress,
            client: Some(self.client.clone()),
            asker,
            // whose it is: a close by another host does not end it
            host: self.caller_host(ctx),
            worktree,
        };
        let answer = self.bridge.turn(call).await?;
        let (value, error) = shape(answer, p.max_response_length);
        Ok(finish(value, error))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::tools::review::ReviewParams;

    #[test]
    fn argument_errors_name_the_field() {
        let args = serde_json::json!({"prompt": "x", "timeout": "soon"});
        let err = parse_args::<CodexParams>(args.as_object().unwrap().clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`timeout`"), "{err}");
        let args = serde_json::json!({"prompt": "x", "nope": 1});
        let err = parse_args::<CodexParams>(args.as_object().unwrap().clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope`"), "{err}");
    }

    #[test]
    fn fixed_values_parse_with_the_reference_spellings_and_a_wrong_one_names_its_field() {
        let parse =
            |args: serde_json::Value| parse_args::<CodexParams>(args.as_object().unwrap().clone());
        let p = parse(json!({"prompt": "x", "sandbox": "full-auto", "reasoningEffort": "xhigh"}))
            .unwrap();
        assert_eq!(p.sandbox, Some(SandboxLevel::WorkspaceWrite));
        assert_eq!(p.reasoning_effort, Some(ReasoningEffort::Xhigh));
        for (field, bad) in [("sandbox", "Read-Only"), ("reasoningEffort", "max")] {
            let err = parse(json!({"prompt": "x", field: bad}))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("invalid argument `{field}`: unknown variant")),
                "{err}"
            );
        }
        let err = parse_args::<ReviewParams>(
            json!({"workingDirectory": "/w", "mode": "all"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("invalid argument `mode`: "), "{err}");
        assert!(err.contains("`uncommitted`, `base`, `commit`"), "{err}");
    }
}
