//! What a caller asks of a turn, in the bridge's own terms and no backend's: the closed value
//! sets of the tools' arguments ([`values`]) and what a review looks at ([`review`]). Pure. The
//! MCP layer reads a call's arguments into these; `codex::argv` and the app-server protocol
//! turn them into codex's flags and messages.

pub mod review;
pub mod values;
