//! How a session's last turn ended ([`TurnStatus`]): a leaf type shared by the store, which
//! keeps it, and the answers, which show it (one definition, so neither mirrors the other).

use serde::{Deserialize, Serialize};

/// How a session's last turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    Completed,
    Failed,
    TimedOut,
    Cancelled,
    // the server stopped while the turn ran (a doc comment here would split the schema's enum)
    Interrupted,
}
