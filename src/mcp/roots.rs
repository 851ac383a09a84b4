//! The client's MCP roots (`roots/list`), which choose the default working directory: when a
//! client declares the roots capability, the server asks for its roots after `initialize` and
//! again on `notifications/roots/list_changed`, and a call without `workingDirectory` runs in the
//! first client root that lies inside the operator's allowed roots. A client root outside them,
//! or one that is not a local `file://` directory, is ignored (and logged): the operator's roots
//! still bound everything.
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

/// The roots a client listed last; `None`: not asked yet, or changed since.
#[derive(Debug, Default)]
pub struct ClientRoots {
    listed: Mutex<Option<Vec<PathBuf>>>,
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
        *self.listed.lock().await = None;
    }
}

async fn ask(peer: &Peer<RoleServer>) -> Vec<PathBuf> {
    match tokio::time::timeout(LIST_ROOTS_TIMEOUT, peer.list_roots()).await {
        Ok(Ok(r)) => {
            let mut roots = vec![];
            for root in r.roots {
                match root_path(&root.uri) {
                    Some(p) => roots.push(p),
                    None => tracing::info!(
                        uri = %crate::security::redact::redact(&root.uri),
                        "a client root that is not a local file:// path is ignored"
                    ),
                }
            }
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
