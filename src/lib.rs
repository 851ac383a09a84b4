//! codex-mcp-bridge: a hardened MCP server that drives the OpenAI Codex CLI.
//!
//! # Layout
//! - [`actors`]: the registry and session actors (ractor), the concurrency limiter, and the
//!   [`actors::Bridge`] handle the MCP layer calls.
//! - [`cli`]: the command line: `serve` and the config file, `sessions` and `doctor`
//!   (`cli/sessions.rs`, `cli/doctor.rs`).
//! - [`config`]: operator settings (flags, environment, config file), validated once at start.
//! - [`error`]: the crate error and its user-facing messages (always redacted on the way out);
//!   [`failure`]: why a turn failed ([`failure::FailureKind`]), a leaf; [`invalid`]: the
//!   refusal of one argument or setting, the pure layers' own error.
//! - [`security`]: pure rules of the security model: environment allowlist, path confinement,
//!   identifiers, operator override denylist, redaction. No IO.
//! - [`confine`]: the IO half of path confinement (the filesystem's answer for a caller's
//!   path, checked by [`security::paths`]); the only maker of a resolved `Confined`.
//! - [`codex`]: everything about the Codex CLI: [`codex::argv`] turns a validated request into
//!   the exact argv (pure), [`codex::events`] parses its JSONL (pure), [`codex::process`] is the
//!   only module that spawns a process.
//! - [`hub`]: many processes on one store: the owner serves the others over a Unix socket,
//!   each connection with its own client context; a relay carries its client over to a new
//!   owner.
//! - [`server`]: the library entry point [`server::run`]: election, ownership, the relay and its
//!   takeover, and the ordered shutdown, on any stream pair with a cancellation token.
//! - [`page`]: the loopback question page, where a person reads a whole question and decides
//!   it with the page's own buttons (one listener per process, bound on first use).
//! - [`store`]: the sled session store and its migrations; the only module that names sled.

pub mod actors;
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
pub mod page;
pub mod security;
pub mod server;
pub mod store;
pub mod usage;

pub use error::{Error, Result};
