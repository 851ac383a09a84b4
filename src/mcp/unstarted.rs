//! The MCP surface of a server that could not start (issue 38): a setting or the store was
//! refused at start. A host that only sees its server's connection close cannot tell anyone
//! why (Claude Code shows `CONNECTION_CLOSED`), so the server answers the host all the same:
//! `initialize` or `server/discover` (its instructions ending with the problem), and the
//! problem in the words it printed on stderr (the setting, and the fix) as the error of
//! `tools/list` and the answer of every tool call; its prompts as always, no resources (reading
//! one answers the problem). It holds no bridge: nothing is started and nothing is written until
//! the problem is fixed and the server restarted.
//!
//! Why `tools/list` fails (issue 45, measured in Claude Code 2.1.332's `/mcp`): a server that
//! lists its tools shows `✔ connected · 16 tools`, as if it worked; one whose `tools/list`
//! fails shows `⚠ connected · couldn't load tools`, the error's message as its "Issue", and
//! `Reconnect`, which works after the fix. A server that exits shows `✘ failed` with only
//! `CONNECTION_CLOSED`; a failed `server/discover` shows `✘ failed` with the message, but a
//! relay may have greeted its client already (`super::greeting`), so the tool list is where
//! every path can say it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::results::{ErrorKind, ErrorReport, TurnResult};
use super::tools::tool_named;
use super::{answer, server_config};

/// The handler of a server that did not start: the problem.
#[derive(Clone)]
pub struct Unstarted {
    problem: Arc<str>,
    kind: ErrorKind,
}

impl Unstarted {
    /// `problem` is the sentence the server printed on stderr (what is wrong, the setting and
    /// the fix); `kind` is the `error.kind` of a turn tool's result.
    pub fn new(problem: impl Into<Arc<str>>, kind: ErrorKind) -> Self {
        Unstarted {
            problem: problem.into(),
            kind,
        }
    }

    /// The error of `tools/list`: the problem, so that the host's server list shows it.
    pub fn list_error(&self) -> McpError {
        McpError::internal_error(
            crate::security::redact::redact(&self.problem).into_owned(),
            None,
        )
    }

    /// The answer to every tool call: an `isError` result with the problem. A turn tool's
    /// carries a [`TurnResult`] with the error (its `outputSchema`); the others carry the text
    /// only, as every other error of theirs does ([`answer::plain_error`]).
    pub fn tool_error(&self, tool: &str) -> rmcp::model::CallToolResult {
        let message = crate::security::redact::redact(&self.problem).into_owned();
        if !tool_named(tool).is_some_and(|t| t.is.turn_errors) {
            return rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                message,
            )]);
        }
        let value = TurnResult {
            error: Some(ErrorReport {
                kind: self.kind,
                message: message.clone(),
            }),
            ..Default::default()
        };
        let mut r = rmcp::model::CallToolResult::structured_error(
            serde_json::to_value(&value).unwrap_or_default(),
        );
        r.content = vec![rmcp::model::ContentBlock::text(message)];
        r
    }
}

impl ServerHandler for Unstarted {
    /// The server's usual description, its instructions followed by the problem: hosts show
    /// them to their model, which can then tell the person.
    fn get_info(&self) -> ServerConfig {
        let info = server_config();
        let instructions = format!(
            "{}\n\nEvery tool call fails for now: {}",
            info.instructions.as_deref().unwrap_or_default(),
            crate::security::redact::redact(&self.problem)
        );
        info.with_instructions(instructions)
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        super::log_client(&context.peer);
        tracing::warn!(
            "told the MCP client that this server did not start; every tool call answers why"
        );
    }

    /// The problem: the host shows this server as not working, with why.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Err(self.list_error())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        Ok(super::prompts::list_answer())
    }

    /// A prompt as always: the tool it names answers the problem.
    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        super::prompts::get_answer(&request)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(super::resources::templates())
    }

    /// No session to read (no store was opened): the problem.
    async fn read_resource(
        &self,
        _request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        Err(McpError::internal_error(
            crate::security::redact::redact(&self.problem).into_owned(),
            None,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if tool_named(&name).is_none() {
            return Err(answer::unknown_tool(&name));
        }
        tracing::info!(tool = %name, "a tool call answered with the problem found at start");
        Ok(CallToolResponse::Complete(self.tool_error(&name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tools::tool_list;

    /// Each tool's answer fits the tool: a turn tool's structured content matches its output
    /// schema, the others carry the text alone; every one is an error with the problem.
    #[test]
    fn every_tool_answers_the_problem_in_the_shape_of_its_errors() {
        let problem = "invalid setting CODEX_BRIDGE_STORE (--store): the store directory /s has \
                       mode 755 (run `chmod 700` on it)";
        let u = Unstarted::new(problem, ErrorKind::Store);
        for t in tool_list(false) {
            let r = u.tool_error(&t.name);
            assert_eq!(r.is_error, Some(true), "{}", t.name);
            let text = r.content[0].as_text().unwrap().text.clone();
            assert_eq!(text, problem, "{}", t.name);
            match &r.structured_content {
                Some(v) => {
                    assert!(
                        tool_named(&t.name).is_some_and(|e| e.is.turn_errors),
                        "{}",
                        t.name
                    );
                    let schema =
                        serde_json::Value::Object((*t.output_schema.clone().unwrap()).clone());
                    let validator = jsonschema::validator_for(&schema).unwrap();
                    assert!(validator.is_valid(v), "{}: {v}", t.name);
                    assert_eq!(v["error"]["message"], problem);
                    assert_eq!(v["error"]["kind"], "store");
                }
                None => assert!(
                    !tool_named(&t.name).is_some_and(|e| e.is.turn_errors),
                    "{}",
                    t.name
                ),
            }
        }
        let info = u.get_info();
        assert!(
            info.instructions.unwrap().ends_with(problem),
            "the instructions end with the problem"
        );
        // the tool list fails with it: the host's server list shows it (`⚠`, with the message)
        assert_eq!(u.list_error().message, problem);
    }
}
