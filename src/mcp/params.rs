//! The argument types several tools share: the fixed values a caller picks from (sandbox,
//! reasoning effort, review mode), defined where the invocation is built and named here once
//! for the tools. Each tool's own arguments are in its file under `super::tools`: their field
//! docs become the schema descriptions hosts show their models; names follow the reference
//! bridge so a host can switch by changing one line of config; unknown fields are refused
//! (`additionalProperties: false`).

pub use crate::plan::values::{ReasoningEffort, ReviewMode, SandboxLevel};
