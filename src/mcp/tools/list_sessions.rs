//! `listSessions`: the stored sessions, newest first, a page at a time. Its arguments
//! ([`ListSessionsParams`]), its result ([`SessionList`]), its table entry (`TOOL`) and its
//! handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::session_info;
use crate::error::{Error, Result};
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::results::SessionInfo;
use crate::mcp::schemas::schema;

/// Default and largest page of `listSessions`.
pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 200;

/// The `listSessions` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "listSessions",
    title: "List sessions",
    description: "List stored sessions, newest first, a page at a time.",
    hints: [true, false, true, false],
    input: schema::<ListSessionsParams>,
    output: schema::<SessionList>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.list_sessions(args)),
};

/// `listSessions`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListSessionsParams {
    /// The `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Sessions per page (1-200, default 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `listSessions`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl McpServer {
    async fn list_sessions(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async || -> Result<CallToolResult> {
            let p: ListSessionsParams = parse_args(args)?;
            let limit = p.limit.unwrap_or(DEFAULT_PAGE);
            if !(1..=MAX_PAGE).contains(&limit) {
                return Err(Error::invalid(
                    "limit",
                    format!("must be between 1 and {MAX_PAGE}"),
                ));
            }
            let page = self.bridge.sessions(p.cursor.as_deref(), limit as usize)?;
            let mut sessions: Vec<SessionInfo> = Vec::with_capacity(page.sessions.len());
            for v in page.sessions {
                let v = self.bridge.with_changes(v).await;
                sessions.push(session_info(v, &self.client));
            }
            let text = if sessions.is_empty() {
                "No sessions.".to_owned()
            } else {
                sessions
                    .iter()
                    .map(|s| {
                        format!(
                            "{} — {} turn(s), {}",
                            s.session_id, s.turn_count, s.working_directory
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(ok_result(
                text,
                SessionList {
                    sessions,
                    next_cursor: page.next,
                },
            ))
        };
        run().await
    }
}
