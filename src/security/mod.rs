//! The pure rules of the security model (SECURITY_MODEL.md), one module per concern.
//!
//! Architecture invariant: nothing here spawns a process or reads the process environment;
//! the only filesystem access is [`paths::resolve`], which must be called again right before
//! a spawn.

pub mod env;
pub mod ids;
pub mod overrides;
pub mod paths;
pub mod redact;
