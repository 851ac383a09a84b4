//! The Codex CLI versions this bridge is proven against. Kept beside the code that runs codex
//! (the process layer quotes the newest in its install hint); `config` re-exports them.

/// The oldest Codex CLI version this bridge supports: every security pin is proven against it
/// (and against the newest tested) by the real-CLI test suite.
pub const OLDEST_SUPPORTED_CODEX_VERSION: &str = "0.145.0";

/// The newest Codex CLI version this bridge is tested against (what the README installs).
pub const NEWEST_TESTED_CODEX_VERSION: &str = "0.171.0";
