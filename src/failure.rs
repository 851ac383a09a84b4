//! Why a turn failed: a leaf shared by the events (which classify codex's messages) and the
//! crate error (which carries the kind), so neither depends on the other.

use std::fmt;

/// Why a turn failed, classified from codex's own messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Auth,
    RateLimit,
    ContextLength,
    TurnFailed,
    Crashed,
    /// Codex recorded another sandbox level or approval mode than the bridge asked for.
    PolicyMismatch,
}

impl FailureKind {
    /// Every kind.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Auth,
        FailureKind::RateLimit,
        FailureKind::ContextLength,
        FailureKind::TurnFailed,
        FailureKind::Crashed,
        FailureKind::PolicyMismatch,
    ];
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Auth => "authentication failed",
            FailureKind::RateLimit => "rate limit or quota exceeded",
            FailureKind::ContextLength => "context length exceeded",
            FailureKind::TurnFailed => "codex turn failed",
            FailureKind::Crashed => "codex exited with an error",
            FailureKind::PolicyMismatch => "sandbox or approval mismatch",
        })
    }
}
