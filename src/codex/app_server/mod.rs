//! `codex app-server` as a long-lived backend of one conversation (groundwork of the warm
//! conversations): the typed, whitelisted protocol (pure) and a client over the pipes of a child
//! that the process layer spawned. Nothing here spawns a process.

pub mod approval;
pub mod client;
pub mod protocol;
