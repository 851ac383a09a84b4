//! A person's browser, reduced to what a test needs: a question's page fetched over plain
//! HTTP/1.1 on loopback (its cookie and decision token read), and a decision posted from it
//! with the page's own `Origin`.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response: status, headers (lower-case names), body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The host and port, and the path, of `url` (`http://HOST:PORT/PATH`).
pub fn split(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    (host.to_owned(), format!("/{path}"))
}

/// Send one request (`head` lines after the request line, `body`) to `url` and read the
/// whole response (the server closes the connection).
pub async fn request(method: &str, url: &str, head: &[(&str, &str)], body: &str) -> Response {
    let (host, path) = split(url);
    let mut s = tokio::net::TcpStream::connect(&host)
        .await
        .expect("connect to the page");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in head {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// The page's decision token (its hidden `token` field).
pub fn token_of(page: &str) -> Option<String> {
    let at = page.find("name=\"token\"")?;
    let tag_start = page[..at].rfind('<')?;
    let tag_end = at + page[at..].find('>')?;
    let tag = &page[tag_start..tag_end];
    let v = tag.split("value=\"").nth(1)?;
    Some(v.split('"').next()?.to_owned())
}

/// Open the page at `url` as a browser does and post `decision` (`approve` or `deny`) from
/// it; the status of the decision, and the page as it was read.
pub async fn decide(url: &str, decision: &str) -> (u16, String) {
    let page = request("GET", url, &[], "").await;
    assert_eq!(page.status, 200, "the page opens: {}", page.body);
    let cookie = page
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or("")
        .to_owned();
    let token = token_of(&page.body).expect("the page carries its token");
    let (host, _) = split(url);
    let origin = format!("http://{host}");
    let body = format!("token={token}&decision={decision}");
    let status = request(
        "POST",
        url,
        &[("Origin", &origin), ("Cookie", &cookie)],
        &body,
    )
    .await
    .status;
    (status, page.body)
}
