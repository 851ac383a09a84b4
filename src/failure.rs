//! Why a turn failed: a leaf shared by the events (which classify codex's messages) and the
//! crate error (which carries the kind), so neither depends on the other.

use std::fmt;

/// The kinds and their words, one list: the enum, [`FailureKind::ALL`] and the words a
/// message says are made from it, so none can miss a kind.
macro_rules! failure_kinds {
    ($($(#[$doc:meta])* $kind:ident => $words:literal,)*) => {
        /// Why a turn failed, classified from codex's own messages.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum FailureKind {
            $($(#[$doc])* $kind,)*
        }

        impl FailureKind {
            /// Every kind, in order.
            pub const ALL: &'static [FailureKind] = &[$(FailureKind::$kind),*];
        }

        impl fmt::Display for FailureKind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(FailureKind::$kind => $words,)*
                })
            }
        }
    };
}

failure_kinds! {
    Auth => "authentication failed",
    RateLimit => "rate limit or quota exceeded",
    ContextLength => "context length exceeded",
    TurnFailed => "codex turn failed",
    Crashed => "codex exited with an error",
    /// Codex recorded another sandbox level or approval mode than the bridge asked for.
    PolicyMismatch => "sandbox or approval mismatch",
}
