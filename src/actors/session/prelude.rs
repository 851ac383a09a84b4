//! What the session actor's files share: the crate paths they name. Its files name it,
//! never `session/mod.rs`; the session's own types are [`super::message`], [`super::state`]
//! and [`super::driver`].

pub(super) use std::collections::VecDeque;
pub(super) use std::path::{Path, PathBuf};
pub(super) use std::sync::Arc;
pub(super) use std::time::{Duration, Instant};

pub(super) use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
pub(super) use tokio::sync::oneshot;
pub(super) use tokio::task::JoinHandle;
pub(super) use tokio_util::sync::CancellationToken;

pub(super) use crate::actors::calls::WorkDir;
pub(super) use crate::actors::calls::{TurnCall, TurnReport};
pub(super) use crate::actors::client::ClientContext;
pub(super) use crate::actors::shared::Shared;
pub(super) use crate::actors::warm::Acquired;
pub(super) use crate::codex::argv::{
    CheckedTurn, SpawnSpec, TurnRequest, WarmTurn, build_app_server, check_turn,
};
pub(super) use crate::codex::events::{Event, FailureKind, Usage};
pub(super) use crate::codex::process::{
    Ending, RunOptions, SpawnHook, SpawnInfo, Steer, ThreadWanted, TurnControl, TurnOutcome,
    WarmProcess, key_of, run,
};
pub(super) use crate::codex::rollout::{TurnContext, last_turn_context};
pub(super) use crate::config::Backend;
pub(super) use crate::error::{Error, Result};
pub(super) use crate::plan::values::SandboxLevel;
pub(super) use crate::security::ids::{SessionId, ThreadId};
pub(super) use crate::security::paths::{Confined, Kind};
pub(super) use crate::security::redact::redact;
pub(super) use crate::store::{SessionRecord, TurnStatus, now_ms};
