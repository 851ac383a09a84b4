//! Who waits on a background turn (`wait`), for its questions: a background turn's question
//! is asked of the client waiting on it now (the latest `wait` call that can be asked, of the
//! host that started the turn, as `super::tasks` recognises a host across its restarts), never
//! of a client that is not waiting on it or of another host. With nobody waiting, it waits for
//! one until its timeout. How a question is then asked is `super::elicit`'s (`Channel`, the same rules as
//! every question); this is only the list of waiters, generic over how one is reached.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The clients waiting on one background turn, latest last, each reachable on a `C`.
pub struct Waiters<C> {
    inner: Arc<Inner<C>>,
}

impl<C> Clone for Waiters<C> {
    fn clone(&self) -> Self {
        Waiters {
            inner: self.inner.clone(),
        }
    }
}

impl<C> Default for Waiters<C> {
    fn default() -> Self {
        Waiters {
            inner: Arc::new(Inner {
                waiting: Mutex::new(Vec::new()),
                host: Mutex::new(None),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }
}

struct Inner<C> {
    /// Each waiter: its number, its host, how it is reached, and how many questions are being
    /// asked of it now.
    waiting: Mutex<Vec<Waiter<C>>>,
    /// The host of the turn's starter: only its waiters are asked (none: nobody is).
    host: Mutex<Option<String>>,
    changed: tokio::sync::Notify,
}

/// One waiter.
struct Waiter<C> {
    n: u64,
    host: Option<String>,
    channel: C,
    asking: Arc<AtomicUsize>,
}

/// A waiter's place; it leaves when dropped.
pub struct Waiting<C> {
    waiters: Waiters<C>,
    n: u64,
    asking: Arc<AtomicUsize>,
}

impl<C> Waiting<C> {
    /// Whether a question is being asked of this waiter now (its `wait` does not return
    /// meanwhile: the answer comes back on its connection).
    pub fn asked_now(&self) -> bool {
        self.asking.load(Ordering::SeqCst) > 0
    }
}

impl<C> Drop for Waiting<C> {
    fn drop(&mut self) {
        let mut w = self
            .waiters
            .inner
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        w.retain(|w| w.n != self.n);
    }
}

/// A question being asked of a waiter: counted while it lives.
pub struct BeingAsked(Arc<AtomicUsize>);

impl Drop for BeingAsked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<C: Clone> Waiters<C> {
    /// The turn now waited on was started by `host`: only waiters of that host are asked.
    pub fn started_by(&self, host: Option<String>) {
        *self.inner.host.lock().unwrap_or_else(|e| e.into_inner()) = host;
    }

    /// A client of `host` waits, reachable on `channel` (none: it cannot be asked, and is not
    /// counted).
    pub fn attach(&self, channel: Option<C>, host: Option<String>) -> Option<Waiting<C>> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let channel = channel?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let asking = Arc::new(AtomicUsize::new(0));
        self.inner
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Waiter {
                n,
                host,
                channel,
                asking: asking.clone(),
            });
        self.inner.changed.notify_waiters();
        Some(Waiting {
            waiters: self.clone(),
            n,
            asking,
        })
    }

    /// The latest waiter's channel, waiting for one until `until`; while the returned guard
    /// lives, the question counts as being asked.
    pub async fn current(&self, until: Instant) -> Option<(C, BeingAsked)> {
        loop {
            let changed = self.inner.changed.notified();
            let host = self
                .inner
                .host
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let latest = host.and_then(|host| {
                self.inner
                    .waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .rev()
                    .find(|w| w.host.as_deref() == Some(host.as_str()))
                    .map(|w| (w.channel.clone(), w.asking.clone()))
            });
            if let Some((c, asking)) = latest {
                asking.fetch_add(1, Ordering::SeqCst);
                return Some((c, BeingAsked(asking)));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, changed).await.is_err() {
                return None;
            }
        }
    }
}
