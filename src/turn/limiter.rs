//! The global limit on codex turns running at once: FIFO (tokio's semaphore is fair), with a
//! queue timeout, and live counts for status tools. A slot is an RAII permit, so it is released
//! exactly once on every path (success, error, timeout, cancel, panic, abort).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// The limiter; cheap to clone.
#[derive(Clone)]
pub struct Limiter {
    sem: Arc<Semaphore>,
    max: usize,
    queued: Arc<AtomicUsize>,
}

/// A held slot.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// Decrements the queued count however the wait ends.
struct Queued(Arc<AtomicUsize>);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Limiter {
    /// A limiter allowing `max` turns at once.
    pub fn new(max: usize) -> Self {
        Limiter {
            sem: Arc::new(Semaphore::new(max)),
            max,
            queued: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Wait for a slot, in arrival order, up to `timeout`; a cancellation ends the wait.
    /// `on_queued(ahead)` is called once if the call has to wait.
    pub async fn acquire(
        &self,
        timeout: Duration,
        cancel: &CancellationToken,
        on_queued: impl FnOnce(usize),
    ) -> Result<Slot> {
        if let Ok(p) = self.sem.clone().try_acquire_owned() {
            return Ok(Slot { _permit: p });
        }
        let ahead = self.queued.fetch_add(1, Ordering::SeqCst);
        let _queued = Queued(self.queued.clone());
        on_queued(ahead);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(Error::Cancelled { partial: None }),
            r = tokio::time::timeout(timeout, self.sem.clone().acquire_owned()) => match r {
                Ok(Ok(p)) => Ok(Slot { _permit: p }),
                Ok(Err(_)) => Err(Error::Busy("the server is shutting down".into())),
                Err(_) => Err(Error::Busy(format!(
                    "no codex slot became free within {}s ({} turns running, {} queued); try again later",
                    timeout.as_secs(),
                    self.active(),
                    self.queued()
                ))),
            },
        }
    }

    /// A turn's wait for a slot (every turn's: a session's, a session-less call's, entered by
    /// `TurnEnv::enter`; a fork's or other thread operation's one-off takes [`Limiter::acquire`]): up
    /// to `timeout`, ended by `cancel`; `progress` hears once how many turns are ahead when it
    /// has to wait. The slot and the time spent queued.
    pub async fn queue_turn(
        &self,
        timeout: Duration,
        cancel: &CancellationToken,
        progress: Option<&crate::actors::client::Progress>,
    ) -> Result<(Slot, Duration)> {
        let since = std::time::Instant::now();
        let slot = self
            .acquire(timeout, cancel, |ahead| {
                if let Some(p) = progress {
                    p(format!(
                        "queued behind {} turn(s) waiting for a codex slot",
                        ahead + self.active()
                    ));
                }
            })
            .await?;
        Ok((slot, since.elapsed()))
    }

    /// Turns running now.
    pub fn active(&self) -> usize {
        self.max - self.sem.available_permits()
    }

    /// Calls waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_fifo_bounded_and_released_on_every_path() {
        let l = Limiter::new(2);
        let c = CancellationToken::new();
        let a = l.acquire(Duration::from_secs(1), &c, |_| {}).await.unwrap();
        let b = l.acquire(Duration::from_secs(1), &c, |_| {}).await.unwrap();
        assert_eq!((l.active(), l.queued()), (2, 0));
        let err = l
            .acquire(Duration::from_millis(50), &c, |_| {})
            .await
            .err()
            .unwrap();
        assert!(matches!(err, Error::Busy(_)));
        assert_eq!(l.queued(), 0, "a timed-out wait leaves the queue");
        // a panicking holder still frees its slot
        let l2 = l.clone();
        let h = tokio::spawn(async move {
            let _s = l2
                .acquire(Duration::from_secs(5), &CancellationToken::new(), |_| {})
                .await
                .unwrap();
            panic!("holder panics");
        });
        tokio::task::yield_now().await;
        drop(a);
        assert!(h.await.is_err());
        drop(b);
        assert_eq!(l.active(), 0);
        // cancellation ends a wait
        let _x = l.acquire(Duration::from_secs(1), &c, |_| {}).await.unwrap();
        let _y = l.acquire(Duration::from_secs(1), &c, |_| {}).await.unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let mut ahead = None;
        let err = l
            .acquire(Duration::from_secs(5), &cancel, |n| ahead = Some(n))
            .await
            .err()
            .unwrap();
        assert!(matches!(err, Error::Cancelled { .. }));
        assert_eq!(ahead, Some(0));
        assert_eq!(l.queued(), 0);
    }
}
