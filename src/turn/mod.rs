//! One codex turn, whoever asks (a session's actor, a one-shot call): the one turn path,
//! [`backend::CodexBackend::run`] (`codex exec`, or a warm `codex app-server` from its source);
//! the global limit on turns running at once and every caller's wait for a slot
//! ([`limiter::Limiter::queue_turn`]); a session-less call's turns ([`runner::Runner`]) and
//! `structured`'s attempts; the schema rules of `structured` ([`schema::SchemaUse`]); the files a
//! turn is given. The actors (`crate::actors`) own the processes and records around it.

pub mod backend;
pub mod files;
pub mod limiter;
pub mod runner;
pub mod schema;
pub mod structured;
