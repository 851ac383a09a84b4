//! codex-mcp-bridge: a hardened MCP server that drives the OpenAI Codex CLI.
//!
//! # Layout
//! Every top-level module, one line each (ARCHITECTURE.md walks through them):
//! - [`actors`]: the registry, session, one-shot and pool actors, and the [`actors::Bridge`] handle.
//! - [`approval`]: a question codex puts to a person: read, screened, asked (forms, rounds, the
//!   page), decided and recorded, in one room.
//! - [`calls`]: what the MCP layer and the actors exchange: a call's request, a turn's answer,
//!   a session as the tools show it (no process or store type).
//! - [`cli`]: the command line: `serve` and the config file, `sessions`, `doctor`.
//! - [`codex`]: the Codex CLI: argv, events, the app-server client; [`codex::process`] spawns.
//! - [`config`]: operator settings (flags, environment, config file), validated once at start.
//! - [`confine`]: the IO half of path confinement: the filesystem's answer for a caller's path.
//! - [`error`]: the crate error and its user-facing messages, redacted on the way out.
//! - [`failure`]: why a turn failed ([`failure::FailureKind`]), a leaf.
//! - [`hub`]: many processes on one store: its owner serves the others over a Unix socket.
//! - [`invalid`]: the refusal of one argument or setting, the pure layers' own error.
//! - [`logging`]: tracing to stderr (stdout is the MCP channel), filtered, every line redacted.
//! - [`mcp`]: the MCP surface (rmcp): tools, their arguments and results, progress, cancellation.
//! - [`plan`]: what a caller asks of a turn in the bridge's terms: value sets, a review's target.
//! - [`security`]: pure rules: env allowlist, path confinement, ids, override denylist, redaction.
//! - [`server`]: the library entry point [`server::run`]: election, relay, takeover, shutdown.
//! - [`status`]: how a session's last turn ended, a leaf shared by the store and the answers.
//! - [`store`]: the sled session store and its migrations; the only module that names sled.
//! - [`turn`]: one codex turn, whoever asks: the one turn path, the global limit, a
//!   session-less call's turns.
//! - [`usage`]: token usage as codex reports it, a leaf shared by events, store and results.

pub mod actors;
pub mod approval;
pub mod calls;
pub mod cli;
pub mod codex;
pub mod config;
pub mod confine;
pub mod error;
pub mod failure;
pub mod hub;
pub mod invalid;
pub mod logging;
pub mod mcp;
pub mod plan;
pub mod security;
pub mod server;
pub mod status;
pub mod store;
pub mod turn;
pub mod usage;

pub use error::{Error, Result};
