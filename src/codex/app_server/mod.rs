//! `codex app-server` as a long-lived backend of one conversation: the typed, whitelisted
//! protocol (pure), its items in the exec path's terms (pure), and a client over the pipes of
//! a child that the process layer spawned. Nothing here spawns a process.

pub mod client;
pub mod conversation;
pub mod protocol;
pub mod translate;
