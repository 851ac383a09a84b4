//! The client's MCP roots (`roots/list`), which choose the default working directory: when a
//! client declares the roots capability, the server asks for its roots after `initialize` and
//! again on `notifications/roots/list_changed`, and a call without `workingDirectory` runs in the
//! first client root that lies inside the operator's allowed roots. A client root outside them,
//! or one that is not a local `file://` directory, is ignored (and logged): the operator's roots
//! still bound everything.
//!
//! A 2026-07-28 client cannot be asked mid-call: its roots come as the answer of a
//! `roots/list` input request of its first call that names no working directory (multi
//! round-trip requests, `super::mrtr`), and are kept for [`OFFERED_ROOTS_KEEP`].
//!
//! rmcp marks roots deprecated (SEP-2577 drops them from the 2026 protocol), but hosts that
//! speak 2025-11-25 declare and use them, so they are read here until hosts move on.
#![allow(deprecated)]

use std::path::PathBuf;
use std::time::Duration;

use rmcp::{Peer, RoleServer};
use tokio::sync::Mutex;

/// How long the server waits for the client's `roots/list` answer.
pub const LIST_ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the roots a 2026-07-28 client answered are used before it is asked again (or
/// until it says they changed).
pub const OFFERED_ROOTS_KEEP: Duration = Duration::from_secs(30 * 60);

/// The roots a client listed last; `None`: not asked yet, or changed since.
#[derive(Debug, Default)]
pub struct ClientRoots {
    listed: Mutex<Option<Vec<PathBuf>>>,
    /// The roots a 2026-07-28 client answered through an input request, and until when.
    offered: std::sync::Mutex<Option<(Vec<PathBuf>, std::time::Instant)>>,
}

/// The local paths of a `roots/list` answer (anything else ignored, and logged).
pub fn paths_of(listed: &rmcp::model::ListRootsResult) -> Vec<PathBuf> {
    let mut roots = vec![];
    for root in &listed.roots {
        match root_path(&root.uri) {
            Some(p) => roots.push(p),
            None => tracing::info!(
                uri = %crate::security::redact::redact(&root.uri),
                "a client root that is not a local file:// path is ignored"
            ),
        }
    }
    roots
}

/// A root's local path: `file://` URIs only (host empty or `localhost`), absolute.
pub fn root_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.to_file_path().ok()
}

impl ClientRoots {
    /// The client's roots, asking it when they are not known (or changed). A client that does
    /// not answer in time, or answers with an error, has none.
    pub async fn get(&self, peer: &Peer<RoleServer>) -> Vec<PathBuf> {
        if let Some(roots) = self.offered() {
            return roots;
        }
        let mut listed = self.listed.lock().await;
        if let Some(roots) = &*listed {
            return roots.clone();
        }
        let roots = ask(peer).await;
        *listed = Some(roots.clone());
        roots
    }

    /// Forget the roots and ask the client again (`notifications/roots/list_changed`, or the
    /// first ask after `initialize`).
    pub async fn refresh(&self, peer: &Peer<RoleServer>) {
        let mut listed = self.listed.lock().await;
        *listed = Some(ask(peer).await);
    }

    /// Forget the roots: the next [`ClientRoots::get`] asks again.
    pub async fn forget(&self) {
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.listed.lock().await = None;
    }

    /// The roots a 2026-07-28 client answered, while they are kept.
    pub fn offered(&self) -> Option<Vec<PathBuf>> {
        let offered = self.offered.lock().unwrap_or_else(|e| e.into_inner());
        offered
            .as_ref()
            .filter(|(_, until)| *until > std::time::Instant::now())
            .map(|(roots, _)| roots.clone())
    }

    /// Keep `roots`, answered by a 2026-07-28 client, for [`OFFERED_ROOTS_KEEP`].
    pub fn offer(&self, roots: Vec<PathBuf>) {
        tracing::info!(roots = ?roots, "the client's roots (through an input request)");
        let until = std::time::Instant::now() + OFFERED_ROOTS_KEEP;
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) = Some((roots, until));
    }
}

async fn ask(peer: &Peer<RoleServer>) -> Vec<PathBuf> {
    match tokio::time::timeout(LIST_ROOTS_TIMEOUT, peer.list_roots()).await {
        Ok(Ok(r)) => {
            let roots = paths_of(&r);
            tracing::info!(roots = ?roots, "the client's roots");
            roots
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the client declares roots but `roots/list` failed");
            vec![]
        }
        Err(_) => {
            tracing::warn!(
                "the client declares roots but did not answer `roots/list` within {}s",
                LIST_ROOTS_TIMEOUT.as_secs()
            );
            vec![]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_file_uris_are_roots() {
        assert_eq!(
            root_path("file:///home/me/src"),
            Some(PathBuf::from("/home/me/src"))
        );
        assert_eq!(
            root_path("file:///home/me/my%20project"),
            Some(PathBuf::from("/home/me/my project"))
        );
        assert_eq!(
            root_path("file://localhost/srv"),
            Some(PathBuf::from("/srv"))
        );
        assert_eq!(root_path("file://elsewhere/srv"), None);
        assert_eq!(root_path("https://example.com/x"), None);
        assert_eq!(root_path("/not/a/uri"), None);
    }
}
