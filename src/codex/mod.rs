//! The Codex CLI: argv construction (pure), JSONL events (pure), and the one spawner.

pub mod app_server;
pub mod applied;
pub mod argv;
pub mod events;
pub mod home;
pub mod process;
pub mod rollout;
pub mod versions;
