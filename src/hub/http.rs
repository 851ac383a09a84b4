//! The optional Streamable HTTP listener of the store's owner (rmcp's server transport behind
//! axum), off unless the operator sets `CODEX_BRIDGE_HTTP_LISTEN`. Loopback only; every request
//! needs the operator's bearer token (compared in constant time), and rmcp refuses a `Host` or
//! an `Origin` that is not this loopback listener (DNS rebinding). HTTP clients run with the
//! owner's own client context.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::actors::Bridge;
use crate::config::HttpConfig;
use crate::hub::HubError;
use crate::hub::error::Result;
use crate::mcp::{McpServer, Tasks};

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";

/// The running listener; stops when dropped.
pub struct HttpListener {
    pub addr: std::net::SocketAddr,
    _stop: DropGuard,
}

/// The `Origin`s a browser on this machine sends for the listener itself.
fn own_origins(port: u16) -> Vec<String> {
    vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ]
}

/// Bind `http.addr`: before the owner starts anything, so that an address it cannot have is
/// refused at start with nothing running (issue 38).
pub async fn bind(http: &HttpConfig) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(http.addr)
        .await
        .map_err(|source| HubError::HttpListen {
            addr: http.addr,
            source,
        })
}

/// Serve MCP over `bridge` on `listener` ([`bind`] to `http.addr`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    bridge: Bridge,
    tasks: Tasks,
    http: &HttpConfig,
) -> Result<HttpListener> {
    let addr = listener
        .local_addr()
        .map_err(|source| HubError::HttpListen {
            addr: http.addr,
            source,
        })?;
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(["127.0.0.1", "localhost", "::1", "[::1]"])
        .with_allowed_origins(own_origins(addr.port()))
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let service: StreamableHttpService<McpServer, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(McpServer::for_http(bridge.clone()).with_tasks(tasks.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Arc<[u8]> = http.token.as_bytes().into();
    let app =
        axum::Router::new()
            .route_service(MCP_PATH, service)
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let token = token.clone();
                    async move { bearer(&token, req, next).await }
                },
            ));
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the HTTP listener failed");
        }
    });
    tracing::info!(%addr, path = MCP_PATH, "serving MCP over Streamable HTTP (bearer token required)");
    Ok(HttpListener {
        addr,
        _stop: stop.drop_guard(),
    })
}

/// Refuse a request without the operator's bearer token.
async fn bearer(token: &[u8], req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .map(str::as_bytes)
        .unwrap_or_default();
    if bool::from(given.ct_eq(token)) {
        return next.run(req).await;
    }
    tracing::warn!("refused an HTTP request without the right bearer token");
    Response::builder()
        .status(StatusCode::UNAUTHORIZED)
        .header(header::WWW_AUTHENTICATE, "Bearer")
        .body(axum::body::Body::from("a valid bearer token is required"))
        .unwrap_or_default()
}

/// The credentials of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 7235 section 2.1: `bearer`, `BEARER` are `Bearer`), followed by one
/// or more spaces.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("Bearer")
        .then(|| rest.trim_start_matches(' '))
}

#[cfg(test)]
mod tests {
    use super::bearer_credentials;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer tok", "bearer tok", "BEARER tok", "bEaReR  tok"] {
            assert_eq!(bearer_credentials(v), Some("tok"), "{v}");
        }
        for v in ["Basic tok", "Bearertok", "Bearer", "tok", "Bearer-x tok"] {
            assert_eq!(bearer_credentials(v), None, "{v}");
        }
    }
}
