//! `applySession`: a session's changes in its own worktree applied onto the checkout it came
//! from, all or nothing: when a file conflicts (the checkout changed it since the base, or
//! another apply did) nothing lands and each such file is named. Never staged, never
//! committed. Its arguments ([`ApplySessionParams`]), its result ([`ApplyResult`]), its table
//! entry (`TOOL`) and its handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::actors::ApplyOutcome;
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::schemas::schema;
use crate::security::ids::SessionId;

/// The `applySession` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "applySession",
    title: "Apply session",
    description: "Apply a worktree session's changes onto its checkout, all or nothing. \
                  If a file conflicts (the checkout changed it \
                  since the session's base, or another apply did) nothing lands and each \
                  such file is named. Nothing is staged or committed. Pass diffSession's \
                  digest to apply only the changes that were read.",
    hints: [false, false, false, false],
    input: schema::<ApplySessionParams>,
    output: schema::<ApplyResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.apply_session(args)),
};

/// `applySession`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplySessionParams {
    /// The session whose worktree's changes to apply. Best between its turns.
    pub session_id: String,
    /// The digest diffSession gave with the changes read. If the changes differ now, nothing
    /// lands.
    #[serde(default)]
    pub digest: Option<String>,
}

/// `applySession`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResult {
    pub session_id: String,
    /// Whether the changes landed (all of them); false: none did.
    pub applied: bool,
    /// The files written in the checkout (when applied).
    pub files: Vec<String>,
    /// The files that conflict (when refused): nothing landed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
}

impl McpServer {
    async fn apply_session(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        let run = async {
            let p: ApplySessionParams = parse_args(args)?;
            let id = SessionId::parse("sessionId", &p.session_id)?;
            let outcome = self
                .bridge
                .apply_session(&id, &self.client, p.digest.as_deref())
                .await?;
            Ok(match outcome {
                ApplyOutcome::Landed(files) => {
                    let text = if files.is_empty() {
                        format!("Session {id} changed nothing: nothing to apply.")
                    } else {
                        format!(
                            "Applied session {id}'s changes (not staged, not committed): {}.",
                            files.join(", ")
                        )
                    };
                    ok_result(
                        self.client.secrets.redact(&text).into_owned(),
                        ApplyResult {
                            session_id: id.to_string(),
                            applied: true,
                            files,
                            conflicts: Vec::new(),
                        },
                    )
                }
                ApplyOutcome::Refused(conflicts) => {
                    let text = format!(
                        "Nothing of session {id}'s changes was applied: these files conflict \
                         with the checkout (changed there since the session's base, or by \
                         another apply): {}.",
                        conflicts.join(", ")
                    );
                    let mut r = ok_result(
                        self.client.secrets.redact(&text).into_owned(),
                        ApplyResult {
                            session_id: id.to_string(),
                            applied: false,
                            files: Vec::new(),
                            conflicts,
                        },
                    );
                    r.is_error = Some(true);
                    r
                }
            })
        };
        run.await
    }
}
