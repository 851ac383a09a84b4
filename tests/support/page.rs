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

/// A question's page as a browser opened it: what it served, the cookie it set (`name=value`)
/// and its decision token.
pub struct Opened {
    pub body: String,
    pub cookie: String,
    pub token: String,
}

/// Open the page at `url` as a browser does.
pub async fn open(url: &str) -> Opened {
    let page = request("GET", url, &[], "").await;
    assert_eq!(page.status, 200, "the page opens: {}", page.body);
    let cookie = page
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or("")
        .to_owned();
    let token = token_of(&page.body).expect("the page carries its token");
    Opened {
        body: page.body,
        cookie,
        token,
    }
}

/// Post `decision` (`approve` or `deny`) from the `opened` page at `url`, with the `code` the
/// host showed; the status of the decision.
pub async fn post(url: &str, opened: &Opened, code: &str, decision: &str) -> u16 {
    let (host, _) = split(url);
    let origin = format!("http://{host}");
    let body = format!("token={}&decision={decision}&code={code}", opened.token);
    request(
        "POST",
        url,
        &[("Origin", &origin), ("Cookie", &opened.cookie)],
        &body,
    )
    .await
    .status
}

/// Open the page at `url` as a browser does and post `decision` (`approve` or `deny`) from
/// it, with the `code` the host showed; the status of the decision, and the page as read.
pub async fn decide(url: &str, code: &str, decision: &str) -> (u16, String) {
    let opened = open(url).await;
    let status = post(url, &opened, code, decision).await;
    (status, opened.body)
}

/// Where in the files under `dir` (every file, read as bytes, the store's and its log) any of
/// what decides the question at `url` appears: the URL, the page's id, its token and cookie,
/// and `code` (digits not part of a longer number); `file: what` for each.
pub fn secrets_in_files(
    dir: &std::path::Path,
    url: &str,
    opened: &Opened,
    code: &str,
) -> Vec<String> {
    let id = url.rsplit('/').next().unwrap_or_default().to_owned();
    let cookie = opened
        .cookie
        .split_once('=')
        .map_or("", |(_, v)| v)
        .to_owned();
    let mut wanted = vec![
        ("the URL", url.to_owned()),
        ("the page id", id),
        ("the token", opened.token.clone()),
    ];
    if !cookie.is_empty() {
        wanted.push(("the cookie", cookie));
    }
    let mut found = vec![];
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            // a socket or a file gone meanwhile reads as nothing
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            for (what, secret) in &wanted {
                if contains(&bytes, secret.as_bytes()) {
                    found.push(format!("{}: {what}", path.display()));
                }
            }
            if contains_number(&bytes, code.as_bytes()) {
                found.push(format!("{}: the code", path.display()));
            }
        }
    }
    found
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether `digits` stand in `hay` as a number of their own (no digit either side).
fn contains_number(hay: &[u8], digits: &[u8]) -> bool {
    let n = digits.len();
    hay.windows(n).enumerate().any(|(i, w)| {
        w == digits
            && (i == 0 || !hay[i - 1].is_ascii_digit())
            && hay.get(i + n).is_none_or(|b| !b.is_ascii_digit())
    })
}
