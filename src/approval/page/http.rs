//! The page's HTTP server: one handler for every request, which checks who asks (the peer's
//! user, `Host`, `Origin`, `Sec-Fetch-*`) before the table answers.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Weak;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use std::sync::Mutex;

use super::table::{PageReply, Table, cookie_value, lock, notice, short};
use super::{peer, render};

/// Most bytes of a decision's form.
const MAX_FORM_BYTES: usize = 4096;

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

#[derive(Clone)]
struct Server {
    table: Weak<Mutex<Table>>,
    addr: SocketAddr,
}

/// Bind `127.0.0.1:0` and serve the pages on a task until `stop`.
pub(super) async fn serve(
    table: Weak<Mutex<Table>>,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let listener = OwnUserOnly { listener, addr };
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(Server { table, addr })
        .into_make_service_with_connect_info::<PeerAddr>();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the question page's listener failed");
        }
    });
    tracing::info!(%addr, "serving question pages on loopback");
    Ok(addr)
}

/// The listener, closing at once every connection another user (or an unknown one) opened,
/// before a byte of it is read: another user cannot hold the server's descriptors with idle
/// connections. Each request is checked again ([`answer`]).
struct OwnUserOnly {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
}

impl axum::serve::Listener for OwnUserOnly {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // out of descriptors, say: wait a moment rather than spin
                    tracing::warn!(error = %e, "the question page's listener could not accept");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            if peer::owner(peer, self.addr).await == Some(peer::own_uid()) {
                return (io, peer);
            }
            tracing::warn!(%peer, "closed a page connection of another user (or an unknown one)");
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// The address of the peer of a connection [`OwnUserOnly`] let through.
#[derive(Clone, Copy, Debug)]
struct PeerAddr(SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, OwnUserOnly>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, OwnUserOnly>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}

async fn handle(
    State(server): State<Server>,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    req: Request,
) -> Response {
    respond(answer(&server, peer, req).await)
}

/// Who asks, then what the table answers.
async fn answer(server: &Server, peer: SocketAddr, req: Request) -> PageReply {
    if peer::owner(peer, server.addr).await != Some(peer::own_uid()) {
        tracing::warn!(%peer, "refused a page request from another user (or an unknown one)");
        return notice(403, "Refused", "The page answers only its own user.");
    }
    let port = server.addr.port();
    let headers = req.headers();
    if !host_ok(&one(headers, header::HOST), port) {
        return notice(
            421,
            "Refused",
            format!(
                "This page answers only at http://127.0.0.1:{port}/ (the Host header is not that)."
            ),
        );
    }
    let Some(id) =
        req.uri().path().strip_prefix("/q/").filter(|id| {
            !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
        })
    else {
        return notice(404, "No such question", "No question has this address.");
    };
    let id = id.to_owned();
    let Some(table) = server.table.upgrade() else {
        return notice(410, "Closed", "The server is shutting down.");
    };
    let cookie = cookie_value(
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    match *req.method() {
        Method::GET => {
            let dest = one(headers, "sec-fetch-dest");
            if dest.is_some_and(|d| d.as_deref() != Ok("document")) {
                return notice(403, "Refused", "The page opens only as a document.");
            }
            lock(&table).get(&id, cookie.as_deref())
        }
        Method::POST => {
            if let Err(refused) = post_headers_ok(headers, port) {
                tracing::warn!(page = short(&id), answer = ?refused, "refused a decision");
                return refused;
            }
            let body = match axum::body::to_bytes(req.into_body(), MAX_FORM_BYTES).await {
                Ok(b) => b,
                Err(_) => return notice(413, "Refused", "The form is too large."),
            };
            let form = Form::parse(&body);
            let (Ok(token), Ok(decision), Ok(code)) =
                (form.one("token"), form.one("decision"), form.one("code"))
            else {
                return notice(400, "Refused", "The form names a field twice.");
            };
            let answer = lock(&table).decide(&id, cookie.as_deref(), token, decision, code);
            if let PageReply::Notice(status, _, why) = &answer
                && *status != 200
            {
                tracing::warn!(page = short(&id), status, why, "refused a decision");
            }
            answer
        }
        _ => notice(405, "Refused", "Only GET and POST."),
    }
}

/// The checks of a decision's headers: `Origin` present and the page's own, `Sec-Fetch-Site`
/// (when sent) `same-origin`, a form body.
fn post_headers_ok(headers: &HeaderMap, port: u16) -> Result<(), PageReply> {
    if !origin_ok(&one(headers, header::ORIGIN), port) {
        return Err(notice(
            403,
            "Refused",
            "The decision did not come from this page (its Origin header is missing or another site's): nothing was decided.",
        ));
    }
    if !fetch_site_ok(&one(headers, "sec-fetch-site")) {
        return Err(notice(
            403,
            "Refused",
            "The decision did not come from this page (Sec-Fetch-Site is not same-origin): nothing was decided.",
        ));
    }
    let form = one(headers, header::CONTENT_TYPE).is_some_and(|t| {
        t.is_ok_and(|t| {
            t.split(';').next().map(str::trim) == Some("application/x-www-form-urlencoded")
        })
    });
    if !form {
        return Err(notice(
            415,
            "Refused",
            "The decision must be the page's form (application/x-www-form-urlencoded): nothing was decided.",
        ));
    }
    Ok(())
}

/// The one value of header `name`: `Err(())` when sent more than once or not text, `Ok(None)`
/// when absent.
fn one(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<Result<String, ()>> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return Some(Err(()));
    }
    Some(first.to_str().map(str::to_owned).map_err(|_| ()))
}

/// `Host` is exactly `127.0.0.1:PORT` or `localhost:PORT` (one header).
fn host_ok(host: &Option<Result<String, ()>>, port: u16) -> bool {
    match host {
        Some(Ok(h)) => {
            *h == format!("127.0.0.1:{port}")
                || h.eq_ignore_ascii_case(&format!("localhost:{port}"))
        }
        _ => false,
    }
}

/// `Origin` is present and exactly `http://127.0.0.1:PORT` or `http://localhost:PORT`.
fn origin_ok(origin: &Option<Result<String, ()>>, port: u16) -> bool {
    match origin {
        Some(Ok(o)) => {
            *o == format!("http://127.0.0.1:{port}") || *o == format!("http://localhost:{port}")
        }
        _ => false,
    }
}

/// `Sec-Fetch-Site`, when sent, is `same-origin`.
fn fetch_site_ok(site: &Option<Result<String, ()>>) -> bool {
    match site {
        None => true,
        Some(Ok(s)) => s == "same-origin",
        Some(Err(())) => false,
    }
}

/// A form-encoded body's fields.
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Form {
        Form(
            url::form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The one value of `name`: `Err` when given twice.
    fn one(&self, name: &str) -> Result<Option<&str>, ()> {
        let mut values = self
            .0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        match values.next() {
            Some(_) => Err(()),
            None => Ok(first),
        }
    }
}

/// An answer as an HTTP response, with the page's security headers.
fn respond(answer: PageReply) -> Response {
    let (status, html, cookie, location) = match answer {
        PageReply::Page { html, cookie } => (200, html, cookie, None),
        PageReply::Notice(status, heading, sentence) => {
            (status, render::notice(heading, &sentence), None, None)
        }
        PageReply::SeeOther(to) => (
            303,
            render::notice("Wrong code", "Back to the question."),
            None,
            Some(to),
        ),
    };
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(header::CONTENT_SECURITY_POLICY, CSP)
        .header(header::X_FRAME_OPTIONS, "DENY")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "same-origin")
        .header(header::CACHE_CONTROL, "no-store")
        .header("cross-origin-opener-policy", "same-origin")
        .header("cross-origin-resource-policy", "same-origin");
    if let Some(c) = cookie {
        b = b.header(header::SET_COOKIE, c);
    }
    if let Some(to) = location {
        b = b.header(header::LOCATION, to);
    }
    b.body(Body::from(html)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(s: &str) -> Option<Result<String, ()>> {
        Some(Ok(s.to_owned()))
    }

    #[test]
    fn host_is_the_listeners_own() {
        assert!(host_ok(&some("127.0.0.1:4000"), 4000));
        assert!(host_ok(&some("localhost:4000"), 4000));
        assert!(host_ok(&some("LOCALHOST:4000"), 4000));
        for bad in [
            "127.0.0.1:4001",
            "127.0.0.1",
            "evil.example:4000",
            "127.0.0.1:4000.",
            "[::1]:4000",
            "",
        ] {
            assert!(!host_ok(&some(bad), 4000), "{bad}");
        }
        assert!(!host_ok(&None, 4000));
        assert!(!host_ok(&Some(Err(())), 4000));
    }

    #[test]
    fn origin_is_present_and_the_pages_own() {
        assert!(origin_ok(&some("http://127.0.0.1:4000"), 4000));
        assert!(origin_ok(&some("http://localhost:4000"), 4000));
        for bad in [
            "null",
            "http://127.0.0.1:4001",
            "https://127.0.0.1:4000",
            "http://evil.example",
            "http://127.0.0.1:4000/",
        ] {
            assert!(!origin_ok(&some(bad), 4000), "{bad}");
        }
        assert!(!origin_ok(&None, 4000));
        assert!(!origin_ok(&Some(Err(())), 4000));
    }

    #[test]
    fn sec_fetch_site_when_sent_is_same_origin() {
        assert!(fetch_site_ok(&None));
        assert!(fetch_site_ok(&some("same-origin")));
        for bad in ["same-site", "cross-site", "none"] {
            assert!(!fetch_site_ok(&some(bad)), "{bad}");
        }
    }

    #[test]
    fn the_cookie_is_read_once_and_two_values_are_none() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "a=1; bridge_page=abc; b=2".parse().unwrap());
        let read = |h: &HeaderMap| {
            cookie_value(
                h.get_all(header::COOKIE)
                    .iter()
                    .map(|v| v.to_str().unwrap()),
            )
        };
        assert_eq!(read(&h).as_deref(), Some("abc"));
        h.append(header::COOKIE, "bridge_page=def".parse().unwrap());
        assert_eq!(read(&h), None);
        assert_eq!(read(&HeaderMap::new()), None);
    }

    #[test]
    fn a_form_field_given_twice_is_refused() {
        let f = Form::parse(b"token=a%20b&decision=approve&decision=deny");
        assert_eq!(f.one("token"), Ok(Some("a b")));
        assert_eq!(f.one("decision"), Err(()));
        assert_eq!(f.one("other"), Ok(None));
    }

    #[test]
    fn a_decision_needs_origin_fetch_site_and_a_form() {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, "http://127.0.0.1:9".parse().unwrap());
        h.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        assert!(post_headers_ok(&h, 9).is_ok());
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(matches!(
            post_headers_ok(&h, 9),
            Err(PageReply::Notice(403, ..))
        ));
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(matches!(
            post_headers_ok(&h, 9),
            Err(PageReply::Notice(415, ..))
        ));
        h.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=UTF-8"
                .parse()
                .unwrap(),
        );
        h.remove(header::ORIGIN);
        assert!(matches!(
            post_headers_ok(&h, 9),
            Err(PageReply::Notice(403, ..))
        ));
    }

    #[test]
    fn every_response_carries_the_security_headers() {
        let r = respond(notice(410, "x", "y"));
        let h = r.headers();
        assert_eq!(r.status(), 410);
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
        assert!(CSP.contains("default-src 'none'") && CSP.contains("frame-ancestors 'none'"));
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert_eq!(h[header::REFERRER_POLICY], "same-origin");
        assert!(h.get(header::SET_COOKIE).is_none());
    }
}
