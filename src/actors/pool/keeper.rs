//! The warm pool's keeper (`PoolKeeper`): the one owner of the processes no session or call
//! holds, in its state (the spare app-server, the idle one-shot app-servers), and of the
//! pool's work in the background, each in a task of its own (the spare's start, the probe of
//! `ping`, closes). It holds the shared state (weakly), which the pool itself does not name.

use std::time::Duration;

use ractor::ActorRef;

use crate::actors::inflight::Recorded;
use crate::actors::pool::warm::{KeeperMessage, OneShotServer, Slot};
use crate::codex::process::WarmKey;

/// The spare's start from `spec` into `slot`, handed to the keeper when it is ready
/// (`KeeperMessage::SpareReady`). Runs in a task of the `PoolKeeper`; it holds the shared
/// state weakly, so a stopped server's store is not kept open by it.
fn start_spare(
    weak: std::sync::Weak<crate::actors::shared::Shared>,
    keeper: ActorRef<KeeperMessage>,
    spec: crate::codex::argv::SpawnSpec,
    slot: Slot,
) -> impl std::future::Future<Output = ()> + Send {
    let key = crate::codex::process::key_of(&spec);
    async move {
        let Some(store) = weak.upgrade().map(|s| s.store.clone()) else {
            return;
        };
        // on record from its spawn: a bridge that dies now leaves it to the next one's sweep
        let Ok(mut spare) = Recorded::spawn(&spec, store).await else {
            return;
        };
        spare.process().hold(slot);
        if let Err(ractor::MessagingErr::SendErr(KeeperMessage::SpareReady { spare, .. })) =
            keeper.cast(KeeperMessage::SpareReady { key, spare })
        {
            // the keeper stopped (shutdown) while it started
            spare.close().await;
        }
    }
}

/// The spare, as the keeper holds it: its key, the process, and until when it may wait.
struct Spare {
    key: WarmKey,
    process: Recorded,
    until: tokio::time::Instant,
}

/// The warm pool's keeper, linked under the registry: it holds the spare and the idle
/// one-shot app-servers in its state, and runs every start and close of the pool's in a task
/// of its own (the spare's start, a probe, a close). It closes the spare once it exited or
/// waited past the idle timeout, and each idle one-shot after the idle timeout (looked at
/// every second). When it stops (shutdown) its tasks are aborted, which kills what they
/// started, and the spare and every idle one-shot are closed. It holds the shared state
/// weakly, so a stopped server's store is not kept open by it.
pub(crate) struct PoolKeeper;

/// The keeper's state: the shared state (weakly), its running tasks, and the processes it
/// holds.
pub(crate) struct KeeperState {
    shared: std::sync::Weak<crate::actors::shared::Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    spare: Option<Spare>,
    idle: Vec<OneShotServer>,
}

impl KeeperState {
    /// Keep `task`, forgetting those that ended.
    fn own(&mut self, task: tokio::task::JoinHandle<()>) {
        self.tasks.retain(|t| !t.is_finished());
        self.tasks.push(task);
    }

    /// Close `closing` in a task of the keeper (a shutdown aborts it, which kills what is
    /// left of the process).
    fn close(&mut self, closing: impl std::future::Future<Output = ()> + Send + 'static) {
        self.own(tokio::spawn(closing));
    }

    /// Close the idle one-shot servers unused for `idle` or found dead, and the spare once it
    /// exited or waited until its time.
    fn expire(&mut self, idle: Duration) {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.idle)
            .into_iter()
            .map(|mut s| (s.idle_since().elapsed() >= idle || !s.alive(), s))
            .partition(|(gone, _)| *gone);
        self.idle = kept.into_iter().map(|(_, s)| s).collect();
        if !gone.is_empty() {
            // in a task of its own: a refill or a probe does not wait behind the closes
            let closing = futures::future::join_all(gone.into_iter().map(|(_, s)| s.retire()));
            self.close(async move {
                closing.await;
            });
        }
        let done = self.spare.as_mut().is_some_and(|s| {
            s.process.process().exited() || tokio::time::Instant::now() >= s.until
        });
        if done && let Some(s) = self.spare.take() {
            self.close(s.process.close());
        }
    }

    /// Keep `process` as the spare for `key` (closing the one it replaces), unless the
    /// sessions filled the cap while it started.
    fn keep_spare(&mut self, key: WarmKey, process: Recorded) {
        let Some(shared) = self.shared.upgrade() else {
            self.close(process.close());
            return;
        };
        let full = shared.warm.len() >= shared.warm.max();
        let idle = shared.idle_timeout;
        // its host left while it started: no spare for credentials nobody holds
        let unheld = !shared.credentials.held_by(key.env());
        drop(shared);
        if full || unheld {
            self.close(process.close());
            return;
        }
        let until = tokio::time::Instant::now() + idle;
        if let Some(old) = self.spare.replace(Spare {
            key,
            process,
            until,
        }) {
            self.close(old.process.close());
        }
    }

    /// Close the spare and the idle one-shot servers started with credentials nobody holds
    /// now (their host's last connection is gone).
    fn close_unheld(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let held = |env: &[(String, String)]| shared.credentials.held_by(env);
        if self.spare.as_ref().is_some_and(|s| !held(s.key.env()))
            && let Some(s) = self.spare.take()
        {
            self.close(s.process.close());
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.idle)
            .into_iter()
            .partition(|s| s.process.as_ref().is_some_and(|w| !held(w.key().env())));
        self.idle = kept;
        drop(shared);
        if !gone.is_empty() {
            let closing = futures::future::join_all(gone.into_iter().map(OneShotServer::retire));
            self.close(async move {
                closing.await;
            });
        }
    }

    /// Keep `server` idle until a call of its client takes it, unless it was started with
    /// credentials nobody holds now (its call outlived its host: a task's): then closed.
    fn put_one_shot(&mut self, mut server: OneShotServer) {
        let unheld = self.shared.upgrade().is_some_and(|shared| {
            server
                .process
                .as_ref()
                .is_some_and(|w| !shared.credentials.held_by(w.key().env()))
        });
        if unheld {
            self.close(server.retire());
            return;
        }
        server.mark_idle();
        self.idle.push(server);
    }

    /// The spare, taken out, when it was started with `key` and is fit to use; one found dead
    /// or distrusted is closed.
    fn take_spare(&mut self, key: &WarmKey) -> Option<Spare> {
        if self.spare.as_ref().is_none_or(|s| &s.key != key) {
            return None;
        }
        let mut s = self.spare.take()?;
        if s.process.process().reusable() && !s.process.process().exited() {
            Some(s)
        } else {
            // dead or distrusted: closed (killed, if anything is left of it, and reaped
            // before its slot comes back)
            self.close(s.process.close());
            None
        }
    }

    /// Close the spare, else the least recently used idle one-shot server: whether one was.
    fn make_room(&mut self) -> bool {
        if let Some(s) = self.spare.take() {
            tracing::info!("closing the spare app-server for a new one (max_warm reached)");
            self.close(s.process.close());
            return true;
        }
        let oldest = self
            .idle
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.idle_since())
            .map(|(i, _)| i);
        match oldest {
            Some(i) => {
                let s = self.idle.swap_remove(i);
                tracing::info!(
                    "closing an idle one-shot app-server for a new one (max_warm reached)"
                );
                self.close(s.retire());
                true
            }
            None => false,
        }
    }

    /// An alive idle one-shot server of `client` for `serves`, taken out; dead ones of theirs
    /// are retired.
    fn take_one_shot(
        &mut self,
        client: crate::actors::client::ClientId,
        serves: &crate::actors::pool::warm::Serves,
    ) -> Option<OneShotServer> {
        let mut found = None;
        let mut kept = Vec::with_capacity(self.idle.len());
        for mut s in std::mem::take(&mut self.idle) {
            if found.is_some() || s.client != client || &s.serves != serves {
                kept.push(s);
            } else if s.alive() {
                found = Some(s);
            } else {
                self.close(s.retire());
            }
        }
        self.idle = kept;
        found
    }
}

/// How often the keeper looks for idle one-shot servers and a spare to close.
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
            spare: None,
            idle: Vec::new(),
        })
    }

    /// One piece (about 75 lines): one arm per message, each a call into the state's own
    /// methods or a task of its own.
    async fn handle(
        &self,
        myself: ActorRef<KeeperMessage>,
        msg: KeeperMessage,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match msg {
            KeeperMessage::Tick => {
                let Some(idle) = state.shared.upgrade().map(|s| s.idle_timeout) else {
                    return Ok(());
                };
                state.expire(idle);
            }
            KeeperMessage::Close(closing) => state.close(closing),
            KeeperMessage::Refill { spec, slot } => {
                let task = tokio::spawn(start_spare(state.shared.clone(), myself, spec, slot));
                state.own(task);
            }
            KeeperMessage::SpareReady { key, spare } => state.keep_spare(key, spare),
            KeeperMessage::TakeSpare { key, reply } => {
                if let Some(Spare {
                    key,
                    process,
                    until,
                }) = state.take_spare(&key)
                    && let Err(Some(process)) = reply.send(Some(process))
                {
                    // the asker went away (its turn was stopped): still the spare
                    state.spare = Some(Spare {
                        key,
                        process,
                        until,
                    });
                }
            }
            KeeperMessage::SparePid { reply } => {
                let _ = reply.send(state.spare.as_ref().map(|s| s.process.pid()));
            }
            KeeperMessage::MakeRoom { reply } => {
                let _ = reply.send(state.make_room());
            }
            KeeperMessage::TakeOneShot {
                client,
                serves,
                reply,
            } => {
                if let Err(Some(server)) = reply.send(state.take_one_shot(client, &serves)) {
                    // the asker went away (its call was cancelled): still idle
                    state.idle.push(server);
                }
            }
            KeeperMessage::PutOneShot(server) => state.put_one_shot(server),
            KeeperMessage::Released => state.close_unheld(),
            KeeperMessage::OneShotCount { reply } => {
                let _ = reply.send(state.idle.len());
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
                        found = crate::actors::pool::warm::probe(&common, slot, store) => {
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
        // what it holds is closed (EOF, then a kill; reaped). A shutdown drains the keeper
        // first (`WarmPool::close`), so what was on its way to it is here; a one-shot server
        // given back from then on is retired by its caller (the cast hands it back).
        if let Some(s) = state.spare.take() {
            s.process.close().await;
        }
        let all = std::mem::take(&mut state.idle);
        futures::future::join_all(all.into_iter().map(OneShotServer::retire)).await;
        Ok(())
    }
}
