//! `ping`: the server's health: the codex found and whether this server supports it, the
//! store, the sessions, running and queued turns, and the limits. Its arguments
//! ([`PingParams`], none), its result ([`PingResult`]), its table entry (`TOOL`) and its
//! handler.

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::codex::home::nested_servers;
use crate::config::{CodexSupport, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION};
use crate::mcp::answer::{ok_result, parse_args};
use crate::mcp::connection::{McpServer, ToolEntry, Traits};
use crate::mcp::schemas::schema;

/// The `ping` tool.
pub(super) const TOOL: ToolEntry = ToolEntry {
    name: "ping",
    title: "Ping",
    description: "Health: codex version, store, sessions, turns and limits. Running and \
                  queued turns are counted apart.",
    hints: [true, false, true, false],
    input: schema::<PingParams>,
    output: schema::<PingResult>,
    is: Traits::PLAIN,
    run: |s, args, _| Box::pin(s.ping(args)),
};

/// `ping`: no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PingParams {}

/// `ping`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PingResult {
    pub server: String,
    pub version: String,
    pub codex_found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version: Option<String>,
    /// The newest codex version this server is tested against.
    pub tested_codex_version: String,
    /// The oldest codex version this server supports (the security pins are proven for
    /// `oldestSupportedCodexVersion` to `testedCodexVersion`).
    pub oldest_supported_codex_version: String,
    /// Whether the codex found is inside the supported range.
    pub codex_version_matches: bool,
    /// Where the codex found falls: `supported`, `newer_than_tested` (a warning: the pins are
    /// not proven for it), `older_than_supported` (an error: upgrade codex) or `unrecognized`;
    /// absent when codex was not found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version_support: Option<CodexSupport>,
    pub codex_path: String,
    pub store_path: String,
    /// The process that owns the store and runs the turns (the owner daemon by default).
    pub owner_pid: u32,
    /// Tasks and background calls not ended yet.
    pub running_tasks: usize,
    pub schema_version: u64,
    pub live_sessions: usize,
    pub stored_sessions: usize,
    pub active_turns: usize,
    pub queued_turns: usize,
    pub max_concurrent: usize,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub allow_danger: bool,
    /// How a turn's processes are contained: `cgroup` or `process-group`.
    pub containment: String,
    /// Nested MCP servers configured for codex (`$CODEX_HOME/config.toml`).
    pub nested_mcp_servers: Vec<NestedServer>,
    /// How session turns run (`exec` or `app-server`): as set, in effect, and why they differ.
    pub backend: crate::actors::BackendStatus,
}

/// One nested MCP server from codex's config.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NestedServer {
    pub name: String,
    pub enabled: bool,
    pub required: bool,
}

impl McpServer {
    async fn ping(&self, args: JsonObject) -> crate::error::Result<CallToolResult> {
        parse_args::<PingParams>(args)?;
        let status = self.bridge.status(&self.client).await;
        let (version, support, counts) =
            (status.codex_version, status.codex_support, status.counts);
        let result = PingResult {
            server: "codex-mcp-bridge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            codex_found: version.is_some(),
            codex_version_matches: support == Some(CodexSupport::Supported),
            codex_version_support: support,
            codex_version: version,
            tested_codex_version: NEWEST_TESTED_CODEX_VERSION.into(),
            oldest_supported_codex_version: OLDEST_SUPPORTED_CODEX_VERSION.into(),
            codex_path: self.client.common.program.display().to_string(),
            store_path: status.store_path,
            owner_pid: std::process::id(),
            running_tasks: self.tasks.running(),
            schema_version: status.schema_version,
            live_sessions: counts.live_sessions,
            stored_sessions: counts.stored_sessions,
            active_turns: counts.active_turns,
            queued_turns: counts.queued_turns,
            max_concurrent: counts.max_concurrent,
            default_timeout_ms: self.client.config.default_timeout.as_millis() as u64,
            max_timeout_ms: self.client.config.max_timeout.as_millis() as u64,
            allow_danger: self.client.config.allow_danger,
            containment: status.containment,
            backend: status.backend,
            nested_mcp_servers: nested_servers(&self.client.codex_home)
                .into_iter()
                .map(|s| NestedServer {
                    name: s.name,
                    enabled: s.enabled,
                    required: s.required,
                })
                .collect(),
        };
        let range = format!("{OLDEST_SUPPORTED_CODEX_VERSION} to {NEWEST_TESTED_CODEX_VERSION}");
        let codex = match (&result.codex_version, support) {
            (None, _) => "NOT FOUND".to_owned(),
            (Some(v), Some(CodexSupport::Supported)) => format!("{v} (supported)"),
            (Some(v), Some(CodexSupport::NewerThanTested)) => format!(
                "{v} (WARNING: newer than the newest tested, {NEWEST_TESTED_CODEX_VERSION}; \
                 the security pins are not proven for it)"
            ),
            (Some(v), Some(CodexSupport::OlderThanSupported)) => format!(
                "{v} (ERROR: older than the oldest supported, {OLDEST_SUPPORTED_CODEX_VERSION}; \
                 the security pins are proven only for codex {range}: upgrade codex)"
            ),
            (Some(v), _) => format!(
                "{v} (WARNING: not a version this server recognizes; it supports codex {range})"
            ),
        };
        let text = format!(
            "codex-mcp-bridge {} — codex {} — {} stored session(s), {} live, {} turn(s) running, {} queued",
            result.version,
            codex,
            result.stored_sessions,
            result.live_sessions,
            result.active_turns,
            result.queued_turns
        );
        Ok(ok_result(text, result))
    }
}
