//! Who a connection is, and whose a task (or an MRTR call) is: the connection that started it.
//! A leaf of the MCP layer, named by the task store and by MRTR.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

/// Which client connection a server instance serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// One stdio or socket connection (a number unique in this process).
    Connection(u64),
    /// The HTTP listener: a connection is the request's `Mcp-Session-Id`.
    Http,
}

/// Whose a task is: the connection that started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaskOwner {
    Connection(u64),
    /// An HTTP session, or (`None`) the session-less HTTP requests of the 2026-07-28
    /// protocol, which have no connection to tell them apart: they all hold the operator's
    /// bearer token.
    Http(Option<String>),
}

impl TaskOwner {
    /// The HTTP session of an HTTP owner.
    pub(super) fn http_session(&self) -> Option<&str> {
        match self {
            TaskOwner::Http(session) => session.as_deref(),
            TaskOwner::Connection(_) => None,
        }
    }
}

impl Scope {
    /// A new connection's scope.
    pub(super) fn connection() -> Scope {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Scope::Connection(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// The owner of what a request of this connection starts or asks for.
    pub(super) fn owner(self, ctx: &RequestContext<RoleServer>) -> TaskOwner {
        match self {
            Scope::Connection(n) => TaskOwner::Connection(n),
            Scope::Http => TaskOwner::Http(http_session(ctx)),
        }
    }
}

/// The HTTP session (`Mcp-Session-Id`) a request came in, if it came over HTTP in one.
pub(super) fn http_session(ctx: &RequestContext<RoleServer>) -> Option<String> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
