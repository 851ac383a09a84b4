//! The warm pool's work in the background, owned by one actor ([`PoolKeeper`]): the spare
//! app-server's start and watch, the probe of `ping`, closing idle one-shot app-servers. It
//! holds the shared state (weakly), which the pool itself does not name.

use std::time::Duration;

use ractor::ActorRef;

use crate::actors::warm::{KeeperMessage, OneShotServer, Slot};

/// The spare's start from `spec` into `slot`, then its watch until a session takes it, it
/// exits, or it was idle too long (closed). Runs in a task of the [`PoolKeeper`]; it holds the
/// shared state weakly, so a stopped server's store is not kept open by it.
fn start_spare(
    weak: std::sync::Weak<crate::actors::shared::Shared>,
    spec: crate::codex::argv::SpawnSpec,
    slot: Slot,
) -> impl std::future::Future<Output = ()> + Send {
    let key = crate::codex::process::key_of(&spec);
    async move {
        let Some((idle, store)) = weak.upgrade().map(|s| (s.idle_timeout, s.store.clone())) else {
            return;
        };
        // on record from its spawn: a bridge that dies now leaves it to the next one's sweep
        let Ok(mut w) = crate::actors::inflight::Recorded::spawn(&spec, store).await else {
            return;
        };
        w.process().hold(slot);
        let pid = w.pid();
        let Some(shared) = weak.upgrade() else {
            w.close().await;
            return;
        };
        // the sessions may have filled the cap while it started
        if shared.warm.len() >= shared.warm.max() {
            drop(shared);
            w.close().await;
            return;
        }
        let old = shared.warm.put_spare(key, w);
        drop(shared);
        if let Some(old) = old {
            old.close().await;
        }
        // until a session takes it: closed once idle too long, forgotten (and reaped) as soon
        // as it exits by itself
        let until = tokio::time::Instant::now() + idle;
        loop {
            let now = tokio::time::Instant::now();
            tokio::time::sleep_until((now + std::time::Duration::from_secs(1)).min(until)).await;
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let done = shared.warm.spare_done(pid, until);
            match done {
                None => continue,
                Some(Some(w)) => {
                    w.close().await;
                    return;
                }
                Some(None) => return,
            }
        }
    }
}

/// The warm pool's keeper, linked under the registry: it owns every process the pool starts
/// in the background, each in a task of its own (the spare's start and watch, a probe), and
/// closes the idle one-shot app-servers after the idle timeout (looked at every second). When
/// it stops (shutdown) its tasks are aborted, which kills what they started, and every idle
/// one-shot is closed. It holds the shared state weakly, so a stopped server's store is not
/// kept open by it.
pub struct PoolKeeper;

/// The keeper's state: the shared state (weakly) and its running tasks.
pub struct KeeperState {
    shared: std::sync::Weak<crate::actors::shared::Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl KeeperState {
    /// Keep `task`, forgetting those that ended.
    fn own(&mut self, task: tokio::task::JoinHandle<()>) {
        self.tasks.retain(|t| !t.is_finished());
        self.tasks.push(task);
    }
}

/// How often the keeper looks for idle one-shot servers to close.
const KEEP_EVERY: Duration = Duration::from_secs(1);

impl ractor::Actor for PoolKeeper {
    type Msg = KeeperMessage;
    type State = KeeperState;
    type Arguments = std::sync::Weak<crate::actors::shared::Shared>;

    async fn pre_start(
        &self,
        myself: ActorRef<KeeperMessage>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        // the ticker ends with the actor (its cast fails)
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEEP_EVERY).await;
                if myself.cast(KeeperMessage::Tick).is_err() {
                    return;
                }
            }
        });
        Ok(KeeperState {
            shared,
            tasks: Vec::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<KeeperMessage>,
        msg: KeeperMessage,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match msg {
            KeeperMessage::Tick => {
                let Some(s) = state.shared.upgrade() else {
                    return Ok(());
                };
                let expired = s.warm.expired_one_shots(s.idle_timeout);
                drop(s);
                if !expired.is_empty() {
                    // in a task of its own: a refill or a probe does not wait behind the closes
                    let closing =
                        futures::future::join_all(expired.into_iter().map(OneShotServer::retire));
                    state.own(tokio::spawn(async move {
                        closing.await;
                    }));
                }
            }
            KeeperMessage::Close(closing) => state.own(tokio::spawn(closing)),
            KeeperMessage::Refill { spec, slot } => {
                let task = tokio::spawn(start_spare(state.shared.clone(), spec, slot));
                state.own(task);
            }
            KeeperMessage::Probe {
                common,
                slot,
                mut reply,
            } => {
                // a caller that gave up (a cancelled `ping`) stops the probe: its process dies
                let store = state.shared.upgrade().map(|s| s.store.clone());
                let task = tokio::spawn(async move {
                    tokio::select! {
                        found = crate::actors::warm::probe(&common, slot, store) => {
                            let _ = reply.send(found);
                        }
                        _ = reply.closed() => {}
                    }
                });
                state.own(task);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<KeeperMessage>,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        // what the tasks started dies with them (a process is killed when dropped)
        for t in state.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
        let Some(s) = state.shared.upgrade() else {
            return Ok(());
        };
        // a spare whose start ended after the shutdown closed the spare: its watch is gone
        s.warm.close_spare().await;
        let all = s.warm.close_one_shots();
        drop(s);
        futures::future::join_all(all.into_iter().map(OneShotServer::retire)).await;
        Ok(())
    }
}
