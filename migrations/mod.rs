//! Store schema migrations: one module per version step, applied in order at open, each inside
//! a transaction that also bumps the version. Append-only: a shipped step is never edited.
//!
//! sled 0.34's transactional trees offer only get/insert/remove, so a step scans outside the
//! transaction (see [`Step::plan`]) and applies its per-key changes inside it.

mod step;
pub mod v1_baseline;

pub use step::{Change, Step};

/// The schema version this build writes.
pub const CURRENT: u64 = 1;

/// Every step, in order.
pub fn steps() -> Vec<Step> {
    vec![v1_baseline::STEP]
}
