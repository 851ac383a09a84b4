//! A connection's resource subscriptions ([`Subscriptions`]): the sessions it subscribed to,
//! bounded ([`MAX_SUBSCRIPTIONS`]), and whether its listener of ended turns runs
//! (`resources.rs` starts it). A leaf: the connection holds one, `resources.rs` fills it.

use std::collections::HashSet;
use std::sync::Mutex;

use rmcp::ErrorData as McpError;

use crate::security::ids::SessionId;

/// The most resources one connection subscribes to.
pub const MAX_SUBSCRIPTIONS: usize = 1_000;
/// The most `subscriptions/listen` streams one connection keeps open at once.
pub const MAX_LISTEN_STREAMS: usize = 8;
/// The scheme of a session's resource.
pub const SCHEME: &str = "codex-session://";

/// The URI of session `id`.
pub fn uri_of(id: &str) -> String {
    format!("{SCHEME}{id}")
}

/// A connection's subscribed sessions, and whether its listener runs.
#[derive(Default)]
pub struct Subscriptions {
    inner: Mutex<Subscribed>,
}

#[derive(Default)]
struct Subscribed {
    ids: HashSet<String>,
    listening: bool,
    /// Whether the listener of the session list's changes runs (one per connection).
    listing: bool,
    /// `subscriptions/listen` streams open now.
    streams: usize,
}

/// One open `subscriptions/listen` stream, counted while it lives.
pub struct Stream(std::sync::Arc<Subscriptions>);

impl Drop for Stream {
    fn drop(&mut self) {
        let mut s = self.0.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.streams -= 1;
    }
}

impl Subscriptions {
    /// Add `id`; `Ok(true)` when the listener is to be started (the first subscription).
    pub(super) fn add(&self, id: &SessionId) -> Result<bool, McpError> {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if s.ids.len() >= MAX_SUBSCRIPTIONS && !s.ids.contains(id.as_str()) {
            return Err(McpError::invalid_params(
                format!(
                    "invalid argument `uri`: this client subscribes to {MAX_SUBSCRIPTIONS} \
                     resources already (unsubscribe from one first)"
                ),
                None,
            ));
        }
        s.ids.insert(id.to_string());
        Ok(!std::mem::replace(&mut s.listening, true))
    }

    /// Whether the listener of the session list's changes is to be started: the first time
    /// only (a client may say `initialized` more than once).
    pub(super) fn start_listing(&self) -> bool {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        !std::mem::replace(&mut s.listing, true)
    }

    /// Count one more `subscriptions/listen` stream, or refuse it past
    /// [`MAX_LISTEN_STREAMS`].
    pub(super) fn open_stream(self: &std::sync::Arc<Self>) -> Result<Stream, McpError> {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if s.streams >= MAX_LISTEN_STREAMS {
            return Err(McpError::invalid_request(
                format!(
                    "this client has {MAX_LISTEN_STREAMS} subscriptions/listen streams open \
                     already: cancel one first"
                ),
                None,
            ));
        }
        s.streams += 1;
        Ok(Stream(self.clone()))
    }

    pub(super) fn remove(&self, id: &SessionId) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.ids.remove(id.as_str());
    }

    pub(super) fn has(&self, id: &SessionId) -> bool {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.ids.contains(id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_bounded_and_start_one_listener() {
        let s = Subscriptions::default();
        let id = |n: usize| SessionId::parse("uri", &format!("s{n}")).unwrap();
        assert!(s.add(&id(0)).unwrap(), "the first starts the listener");
        assert!(!s.add(&id(1)).unwrap());
        for n in 2..MAX_SUBSCRIPTIONS {
            s.add(&id(n)).unwrap();
        }
        assert!(s.add(&id(MAX_SUBSCRIPTIONS)).is_err());
        assert!(s.add(&id(0)).is_ok(), "one already held is no new one");
        s.remove(&id(0));
        assert!(!s.has(&id(0)));
        assert!(s.has(&id(1)));
    }

    #[test]
    fn one_list_listener_and_a_bounded_number_of_streams() {
        let s = std::sync::Arc::new(Subscriptions::default());
        assert!(s.start_listing(), "the first `initialized` starts it");
        assert!(!s.start_listing(), "a second starts none");
        let open: Vec<Stream> = (0..MAX_LISTEN_STREAMS)
            .map(|_| s.open_stream().unwrap())
            .collect();
        let e = s.open_stream().err().expect("one stream too many");
        assert!(e.message.contains("cancel one first"), "{}", e.message);
        drop(open);
        assert!(
            s.open_stream().is_ok(),
            "a closed stream gives its place back"
        );
    }
}
