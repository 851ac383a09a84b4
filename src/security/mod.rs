//! The pure rules of the security model (SECURITY.md), one module per concern.
//!
//! Architecture invariant: no IO. Nothing here spawns a process, reads the process
//! environment or touches the filesystem; what the filesystem says of a path is asked by
//! [`crate::confine`] and checked by [`paths::confine`].

pub mod env;
pub mod ids;
pub mod lookalike;
pub mod overrides;
pub mod paths;
pub mod prompt;
pub mod redact;
pub mod shown;
pub mod worktree;
