//! A person's browser, reduced to what a test needs: a question's page fetched over plain
//! HTTP/1.1 on loopback (its cookie and decision token read), and a decision posted from it
//! with the page's own `Origin`.

pub use super::http1::Reply as Response;

/// The host and port, and the path, of `url` (`http://HOST:PORT/PATH`).
pub fn split(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    (host.to_owned(), format!("/{path}"))
}

/// Send one request to `url` as a browser on this machine does (its `Host`, then `head`, a
/// form `body` on POST) and read the response.
pub async fn request(method: &str, url: &str, head: &[(&str, &str)], body: &str) -> Response {
    let (host, path) = split(url);
    let addr = host.parse().expect("a loopback address");
    let mut headers = vec![("Host", host.as_str())];
    headers.extend_from_slice(head);
    if method == "POST" {
        headers.push(("Content-Type", "application/x-www-form-urlencoded"));
    }
    super::http1::request(addr, method, &path, &headers, body.as_bytes()).await
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

/// The code a URL elicitation's message shows for its page (`… code 123456`).
pub fn code_of(message: &str) -> Option<String> {
    let code = message.rsplit("code ").next()?.trim();
    (code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())).then(|| code.to_owned())
}

/// Open the page at `url` as a browser does and post `decision` (`approve` or `deny`) from
/// it, with the `code` the host showed; the status of the decision, and the page as read.
pub async fn decide(url: &str, code: &str, decision: &str) -> (u16, String) {
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
    let body = format!("token={token}&decision={decision}&code={code}");
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
