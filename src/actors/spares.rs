//! The warm pool's work in the background: the spare app-server's refill ([`refill`]) and the
//! keeper that closes idle one-shot app-servers ([`OneShotKeeper`]). They hold the shared state
//! (weakly), which the pool itself does not name.

use std::time::Duration;

use ractor::ActorRef;

use crate::actors::warm::OneShotServer;

/// Start a spare app-server from `spec` in the background, replacing the one there (closed);
/// it closes itself after the idle timeout if no session took it.
/// The task holds the shared state weakly: a stopped server's store is not kept open by it.
pub fn refill(
    shared: &std::sync::Arc<crate::actors::shared::Shared>,
    spec: crate::codex::argv::SpawnSpec,
) {
    // the spare counts against the cap: none when the warm sessions fill it
    if shared.warm.len() >= shared.warm.max() {
        return;
    }
    // a spare never waits for room: it starts only into a free slot
    let Some(slot) = shared.warm.try_slot() else {
        return;
    };
    let key = crate::codex::process::key_of(&spec);
    let idle = shared.idle_timeout;
    let weak = std::sync::Arc::downgrade(shared);
    tokio::spawn(async move {
        let Ok(mut w) = crate::codex::process::WarmProcess::spawn(&spec, None).await else {
            return;
        };
        w.hold(slot);
        let pid = w.info().pid;
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
    });
}

/// The actor that closes idle one-shot app-servers: after the idle timeout (looked at every
/// second), and all of them when it stops (shutdown; linked under the registry). It holds the
/// shared state weakly, so a stopped server's store is not kept open by it.
pub struct OneShotKeeper;

/// Messages to the [`OneShotKeeper`].
pub enum KeeperMessage {
    /// Look for idle servers past the idle timeout.
    Tick,
}

/// How often the keeper looks for idle one-shot servers to close.
const KEEP_EVERY: Duration = Duration::from_secs(1);

impl ractor::Actor for OneShotKeeper {
    type Msg = KeeperMessage;
    type State = std::sync::Weak<crate::actors::shared::Shared>;
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
        Ok(shared)
    }

    async fn handle(
        &self,
        _myself: ActorRef<KeeperMessage>,
        msg: KeeperMessage,
        shared: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let KeeperMessage::Tick = msg;
        let Some(s) = shared.upgrade() else {
            return Ok(());
        };
        let expired = s.warm.expired_one_shots(s.idle_timeout);
        drop(s);
        futures::future::join_all(expired.into_iter().map(OneShotServer::retire)).await;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<KeeperMessage>,
        shared: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let Some(s) = shared.upgrade() else {
            return Ok(());
        };
        let all = s.warm.close_one_shots();
        drop(s);
        futures::future::join_all(all.into_iter().map(OneShotServer::retire)).await;
        Ok(())
    }
}
