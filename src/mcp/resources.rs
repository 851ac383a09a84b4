//! The MCP resources: each session of the caller's own `CODEX_HOME`, one resource
//! `codex-session://<sessionId>` (a host offers them as `@` mentions), listed a page at a time
//! and described by one template; its content is the session as `getSession` shows it (its
//! record, its turn count and status, its last answer), as JSON, redacted as every answer is.
//!
//! Whose: a connection sees only the sessions whose thread lives in its own `CODEX_HOME` (the
//! ones it may continue). Another home's session is refused exactly as one that does not
//! exist, so a resource tells nothing of another host's sessions, not even that they exist.
//!
//! Subscriptions (the 2025-11-25 protocol's `resources/subscribe`): each connection keeps its
//! own set ([`crate::mcp::subscriptions::Subscriptions`], bounded); the first one starts a listener of the bridge's ended
//! turns ([`crate::actors::Bridge::turn_ends`]) that sends `notifications/resources/updated`
//! for a subscribed session, until the connection's input ends.
//!
//! The list: every connection hears `notifications/resources/list_changed` when a session of
//! its own `CODEX_HOME` is made, ends a turn or is closed ([`crate::actors::Bridge::session_list_changes`]), so
//! a host's `@` mentions follow the sessions; another home's sessions change nothing it hears.
//! A 2026-07-28 client hears both on its `subscriptions/listen` stream instead
//! ([`McpServer::listen_stream`]): the list's changes, and the ends of turns of the sessions it
//! names there that are its own (at most [`crate::mcp::subscriptions::MAX_SUBSCRIPTIONS`]).

use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult,
    Resource, ResourceContents, ResourceListChangedNotification, ResourceTemplate,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use crate::actors::SessionView;
use crate::mcp::connection::McpServer;
use crate::mcp::results::SessionInfo;
pub use crate::mcp::subscriptions::{MAX_SUBSCRIPTIONS, SCHEME, uri_of};
use crate::mcp::tools::common::session_info;
use crate::security::ids::SessionId;

/// A page of `resources/list`.
pub const PAGE: usize = 50;
/// The store pages one `resources/list` reads at most looking for the caller's own sessions
/// (a store of other homes' sessions answers a short page with a cursor, not a long search).
const MAX_STORE_PAGES: usize = 8;

/// The session id of a resource URI, or why it is none (naming `uri`).
pub fn session_of(uri: &str) -> Result<SessionId, McpError> {
    let unknown = || unknown_resource(uri);
    let raw = uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
    SessionId::parse("uri", raw).map_err(|_| unknown())
}

/// The error for a resource this connection may not read: one it does not know or another
/// home's, alike.
fn unknown_resource(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "invalid argument `uri`: no resource `{}` for this client (a session resource is \
             `{SCHEME}<sessionId>`, of a session of this client's CODEX_HOME)",
            uri.chars()
                .filter(|c| !c.is_control())
                .take(128)
                .collect::<String>()
        ),
        None,
    )
}

/// What of a 2026-07-28 client's `subscriptions/listen` filter this server serves: the
/// resource list's changes, and the ends of turns of the sessions named (well-formed session
/// URIs, at most [`MAX_SUBSCRIPTIONS`]; whose they are is checked as the stream opens,
/// [`McpServer::listen_stream`], so a named session of another home is never heard of).
pub fn accepted_filter(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::new();
    accepted.resources_list_changed = requested.resources_list_changed;
    accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
        uris.iter()
            .filter(|u| session_of(u).is_ok())
            .take(MAX_SUBSCRIPTIONS)
            .cloned()
            .collect()
    });
    accepted
}

/// Whether a change of the session list (`got`, the home whose list changed) is told to a
/// connection of `home`: `Some(true)` when it is its own home's; `Some(false)` when it is
/// another's, or changes were missed whose homes are not known (a notice would tell of other
/// homes' sessions); `None` when no more changes come. The one rule of both listeners.
fn told(got: Result<std::path::PathBuf, RecvError>, home: &std::path::Path) -> Option<bool> {
    match got {
        Ok(changed) => Some(changed == home),
        Err(RecvError::Lagged(_)) => Some(false),
        Err(RecvError::Closed) => None,
    }
}

/// `resources/templates/list`: the one template of a session's resource.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{SCHEME}{{sessionId}}"), "codex-session")
            .with_title("Codex session")
            .with_description(
                "A Codex session of this client's CODEX_HOME: its record (working directory, \
                 model, turns, status, usage) and its last answer, as JSON.",
            )
            .with_mime_type("application/json"),
    ])
}

impl McpServer {
    /// Whether session view `v` is this connection's to see as a resource (its own home).
    fn owns(&self, v: &SessionView) -> bool {
        v.codex_home
            .as_deref()
            .is_some_and(|h| std::path::Path::new(h) == self.client.codex_home)
    }

    /// A session as the resource shows it, redacted for this connection.
    fn resource_json(&self, info: &SessionInfo) -> String {
        let text = serde_json::to_string_pretty(info).unwrap_or_default();
        let text = crate::security::redact::redact(&text).into_owned();
        self.client.secrets.redact_literals(&text).into_owned()
    }

    /// `resources/list`: this connection's sessions, newest first, a page at a time (the
    /// cursor is the store's).
    pub(super) fn list_resources_page(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut cursor = request.and_then(|r| r.cursor);
        let mut resources = vec![];
        for _ in 0..MAX_STORE_PAGES {
            let page = self
                .bridge
                .sessions(cursor.as_deref(), PAGE)
                .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
            cursor = page.next;
            for v in page.sessions.into_iter().filter(|v| self.owns(v)) {
                let info = session_info(v, &self.client);
                let title = info
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("Codex session in {}", info.working_directory));
                let description = format!(
                    "{} turn(s), last {}",
                    info.turn_count,
                    info.last_status
                        .map(|s| serde_json::to_value(s)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default())
                        .unwrap_or_else(|| "none".into())
                );
                let raw = Resource::new(uri_of(&info.session_id), info.session_id.clone())
                    .with_title(crate::security::redact::redact(&title).into_owned())
                    .with_description(description)
                    .with_mime_type("application/json");
                resources.push(raw);
            }
            if !resources.is_empty() || cursor.is_none() {
                break;
            }
        }
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = cursor;
        Ok(result)
    }

    /// The session of `uri` when it is this connection's, else the refusal of an unknown one.
    async fn own_session(&self, uri: &str) -> Result<(SessionId, SessionView), McpError> {
        let id = session_of(uri)?;
        match self.bridge.session(&id).await {
            Ok(Some(v)) if self.owns(&v) => Ok((id, v)),
            Ok(_) => {
                tracing::debug!(session = %id, "a resource of another CODEX_HOME or none");
                Err(unknown_resource(uri))
            }
            Err(e) => Err(McpError::internal_error(
                crate::security::redact::redact(&e.to_string()).into_owned(),
                None,
            )),
        }
    }

    /// `resources/read`: the session of this connection's home, as `getSession` shows it.
    pub(super) async fn read_session_resource(
        &self,
        uri: &str,
    ) -> Result<ReadResourceResult, McpError> {
        let (id, v) = self.own_session(uri).await?;
        let info = session_info(v, &self.client);
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(self.resource_json(&info), uri_of(id.as_str()))
                .with_mime_type("application/json"),
        ]))
    }

    /// `resources/subscribe`: tell this connection when a turn of the session ends.
    pub(super) async fn subscribe_session(
        &self,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        let (id, _) = self.own_session(uri).await?;
        if self.subscriptions.add(&id)? {
            self.listen_for_turn_ends(peer);
        }
        Ok(())
    }

    /// `resources/unsubscribe` (an unknown URI is no error: nothing to undo).
    pub(super) fn unsubscribe_session(&self, uri: &str) {
        if let Ok(id) = session_of(uri) {
            self.subscriptions.remove(&id);
        }
    }

    /// Send `notifications/resources/list_changed` to `peer` each time a session of this
    /// connection's home is made, ends a turn or is closed, until the connection's input ends or the peer is
    /// gone (started once the client said `initialized`).
    pub(super) fn listen_for_list_changes(&self, peer: Peer<RoleServer>) {
        if !self.subscriptions.start_listing() {
            return;
        }
        let mut changes = self.bridge.session_list_changes();
        let (home, ended) = (self.client.codex_home.clone(), self.input_ended.clone());
        tokio::spawn(async move {
            loop {
                let tell = tokio::select! {
                    _ = ended.cancelled() => return,
                    got = changes.recv() => match told(got, &home) {
                        Some(tell) => tell,
                        None => return,
                    },
                };
                if tell && peer.notify_resource_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// A 2026-07-28 client's `subscriptions/listen` stream (the filter is
    /// [`accepted_filter`]'s): `notifications/resources/list_changed` when a session of this
    /// connection's home is made, ends a turn or is closed, `notifications/resources/updated` when a turn of a
    /// named session of its own ends; until the client cancels it or the connection ends.
    pub(super) async fn listen_stream(&self, listen: SubscriptionContext) -> Result<(), McpError> {
        let _open = self.subscriptions.open_stream()?;
        let accepted = listen.accepted().clone();
        let (mut changes, mut ends) = (self.bridge.session_list_changes(), self.bridge.turn_ends());
        // the named sessions of this connection's home, read once (a session's home never
        // changes): another home's is never heard of, nor costs anything as its turns end
        let mut named = std::collections::HashSet::new();
        for uri in accepted.resource_subscriptions.iter().flatten() {
            if let Ok((id, _)) = self.own_session(uri).await {
                named.insert(id);
            }
        }
        let home = &self.client.codex_home;
        loop {
            let notice = tokio::select! {
                _ = listen.cancelled() => return Ok(()),
                _ = self.input_ended.cancelled() => return Ok(()),
                changed = changes.recv(), if accepted.resources_list_changed == Some(true) => {
                    match told(changed, home) {
                        Some(true) => ResourceListChangedNotification::default().into(),
                        Some(false) => continue,
                        None => return Ok(()),
                    }
                }
                ended = ends.recv(), if !named.is_empty() => match ended {
                    Ok(id) if named.contains(&id) => {
                        let update = ResourceUpdatedNotificationParam::new(uri_of(id.as_str()));
                        ServerNotification::from(ResourceUpdatedNotification::new(update))
                    }
                    Err(RecvError::Closed) => return Ok(()),
                    _ => continue,
                },
            };
            if listen.sink().send(notice).await.is_err() {
                return Ok(());
            }
        }
    }

    /// Send `notifications/resources/updated` to `peer` for each subscribed session whose turn
    /// ends, until the connection's input ends or the peer is gone.
    fn listen_for_turn_ends(&self, peer: Peer<RoleServer>) {
        let mut ends = self.bridge.turn_ends();
        let (subs, ended) = (self.subscriptions.clone(), self.input_ended.clone());
        tokio::spawn(async move {
            loop {
                let id = tokio::select! {
                    _ = ended.cancelled() => return,
                    got = ends.recv() => match got {
                        Ok(id) => id,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "resource updates missed (a slow client)");
                            continue;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                };
                if !subs.has(&id) {
                    continue;
                }
                let update =
                    rmcp::model::ResourceUpdatedNotificationParam::new(uri_of(id.as_str()));
                if peer.notify_resource_updated(update).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_own_homes_changes_are_told_and_missed_ones_never() {
        let home = std::path::Path::new("/h/a");
        assert_eq!(told(Ok("/h/a".into()), home), Some(true));
        assert_eq!(told(Ok("/h/b".into()), home), Some(false));
        assert_eq!(told(Err(RecvError::Lagged(3)), home), Some(false));
        assert_eq!(told(Err(RecvError::Closed), home), None);
    }

    #[test]
    fn a_uri_names_one_session_or_none() {
        assert_eq!(
            session_of("codex-session://abc-1").unwrap().as_str(),
            "abc-1"
        );
        for bad in [
            "codex-session://",
            "codex-session://../x",
            "file:///etc/passwd",
            "codex-session://a/b",
            "codex-session://-x",
        ] {
            let e = session_of(bad).unwrap_err();
            assert!(e.message.contains("`uri`"), "{bad}: {}", e.message);
        }
    }
}
