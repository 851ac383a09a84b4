//! Store schema migrations: one module per version step, applied in order at open, each inside
//! a transaction that also bumps the version. Append-only: a shipped step is never edited.
//!
//! sled 0.34's transactional trees offer only get/insert/remove, so a step scans outside the
//! transaction (see [`Step::plan`]) and applies its per-key changes inside it.

pub mod v1_baseline;

/// The schema version this build writes.
pub const CURRENT: u64 = 1;

/// One key change in one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Insert {
        tree: &'static str,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Remove {
        tree: &'static str,
        key: Vec<u8>,
    },
}

/// A migration step from version `to - 1` to `to`.
pub struct Step {
    pub to: u64,
    pub name: &'static str,
    /// Read the trees (outside any transaction) and return the changes to apply.
    pub plan: fn(&sled::Db) -> sled::Result<Vec<Change>>,
}

/// Every step, in order.
pub fn steps() -> Vec<Step> {
    vec![v1_baseline::STEP]
}
