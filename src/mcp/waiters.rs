//! Who waits on a background turn (`wait`), for its questions: a background turn's question
//! is asked of the client waiting on it now (the latest `wait` call that can be asked), never
//! of a client that is not waiting on it. With nobody waiting, it waits for one until its
//! timeout. How a question is then asked is `super::elicit`'s (`Channel`, the same rules as
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
                changed: tokio::sync::Notify::new(),
                asking: AtomicUsize::new(0),
            }),
        }
    }
}

struct Inner<C> {
    waiting: Mutex<Vec<(u64, C)>>,
    changed: tokio::sync::Notify,
    /// Questions being asked of a waiter now (its `wait` does not return meanwhile).
    asking: AtomicUsize,
}

/// A waiter's place; it leaves when dropped.
pub struct Waiting<C> {
    waiters: Waiters<C>,
    n: u64,
}

impl<C> Drop for Waiting<C> {
    fn drop(&mut self) {
        let mut w = self
            .waiters
            .inner
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        w.retain(|(n, _)| *n != self.n);
    }
}

/// A question being asked of a waiter: counted while it lives.
pub struct Asking<C>(Waiters<C>);

impl<C> Drop for Asking<C> {
    fn drop(&mut self) {
        self.0.inner.asking.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<C: Clone> Waiters<C> {
    /// A client waits, reachable on `channel` (none: it cannot be asked, and is not counted).
    pub fn attach(&self, channel: Option<C>) -> Option<Waiting<C>> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let channel = channel?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.inner
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((n, channel));
        self.inner.changed.notify_waiters();
        Some(Waiting {
            waiters: self.clone(),
            n,
        })
    }

    /// Whether a question is being asked of a waiter now.
    pub fn asking(&self) -> bool {
        self.inner.asking.load(Ordering::SeqCst) > 0
    }

    /// The latest waiter's channel, waiting for one until `until`; while the returned guard
    /// lives, the question counts as being asked.
    pub async fn current(&self, until: Instant) -> Option<(C, Asking<C>)> {
        loop {
            let changed = self.inner.changed.notified();
            let latest = self
                .inner
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .last()
                .map(|(_, c)| c.clone());
            if let Some(c) = latest {
                self.inner.asking.fetch_add(1, Ordering::SeqCst);
                return Some((c, Asking(self.clone())));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, changed).await.is_err() {
                return None;
            }
        }
    }
}
