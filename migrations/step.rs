//! What a migration step is: its changes and its plan. A leaf, named by the steps and by
//! `mod.rs` (which lists them), so no step names the module that names it.

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
