//! The warm app-servers, in one place: the cap on them and who holds which ([`warm`]:
//! `WarmPool`, which holds no process), the keeper that owns the spare and the idle one-shot
//! app-servers ([`keeper`]: `PoolKeeper` and its messages), and the one warm start
//! ([`starts`]: `start_warm`). A call's lease of a one-shot app-server is `actors::runner`'s.

pub mod keeper;
pub mod starts;
pub mod warm;
