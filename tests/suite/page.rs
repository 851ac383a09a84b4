//! The loopback question page (`codex_mcp_bridge::page`) over real HTTP: approving works once,
//! denying works, and every forged or late request decides nothing; then the page in a real
//! browser (headless Chromium through WebDriver), clicking its own buttons.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use codex_mcp_bridge::approval::page::{
    Closed, OpenPage, PageDecision, PageQuestion, Pages, TurnPages,
};

use crate::support::browser::Browser;
use crate::support::http1::{Reply, request};
use crate::support::{target_dir, test_work_dir};

const FORM: &str = "application/x-www-form-urlencoded";

fn question(command: &str) -> PageQuestion {
    PageQuestion {
        title: "Codex asks to run a command outside its sandbox".into(),
        fields: vec![
            ("Command".into(), command.into()),
            ("Working directory".into(), "/work/project".into()),
            ("Reason".into(), "to clean the build directory".into()),
        ],
        grants: "Approving allows this one request, once. Codex then runs it as you.".into(),
    }
}

/// A question open for `ttl`, its page's address and path.
async fn open(pages: &Pages, ttl: Duration) -> (OpenPage, SocketAddr, String) {
    let page = pages
        .open(question("rm -rf build"), Instant::now() + ttl)
        .await
        .unwrap();
    let rest = page.url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let addr: SocketAddr = host.parse().unwrap();
    assert!(addr.ip().is_loopback());
    let path = format!("/{path}");
    assert!(path.starts_with("/q/") && path.len() >= 3 + 32, "{path}");
    (page, addr, path)
}

fn host(addr: SocketAddr) -> String {
    format!("127.0.0.1:{}", addr.port())
}

fn origin(addr: SocketAddr) -> String {
    format!("http://127.0.0.1:{}", addr.port())
}

/// The first GET of the page: (cookie pair, token).
async fn first_get(addr: SocketAddr, path: &str) -> (String, String) {
    let r = request(addr, "GET", path, &[("Host", &host(addr))], b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    for (h, want) in [
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
        ("referrer-policy", "same-origin"),
    ] {
        assert_eq!(r.header(h), Some(want), "{h}");
    }
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("form-action 'self'"));
    let set = r.header("set-cookie").expect("a cookie");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
    assert!(set.contains(&format!("Path={path}")), "{set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let token = r
        .body
        .split("name=\"token\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a token field")
        .to_owned();
    (cookie, token)
}

/// A forged decision: what it is, its headers, its body, the status it gets.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16);

/// A POST of the form with these headers and body.
async fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    request(addr, "POST", path, headers, body.as_bytes()).await
}

/// A well-formed decision.
async fn decide(
    addr: SocketAddr,
    path: &str,
    cookie: &str,
    token: &str,
    d: &str,
    code: &str,
) -> Reply {
    let (h, o) = (host(addr), origin(addr));
    let headers = [
        ("Host", h.as_str()),
        ("Origin", o.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
        ("Cookie", cookie),
        ("Content-Type", FORM),
    ];
    let body = format!("token={token}&decision={d}&code={code}");
    post(addr, path, &headers, &body).await
}

/// `page` has no decision (within a short wait).
async fn undecided(page: &mut OpenPage) {
    let r = tokio::time::timeout(Duration::from_millis(200), page.decided()).await;
    assert!(r.is_err(), "decided: {r:?}");
}

async fn decided(page: &mut OpenPage) -> PageDecision {
    tokio::time::timeout(Duration::from_secs(5), page.decided())
        .await
        .expect("a decision")
}

#[tokio::test]
async fn page_approve_works_once() {
    let pages = Pages::new();
    let (mut page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    let (cookie, token) = first_get(addr, &path).await;
    let r = decide(addr, &path, &cookie, &token, "approve", &page.code).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("You approved this request on this page"),
        "{}",
        r.body
    );
    assert!(r.body.contains("I&#39;m done, continue"), "{}", r.body);
    assert_eq!(decided(&mut page).await, PageDecision::Approve);
    // the token again (either decision): decided, and says how
    for d in ["approve", "deny"] {
        let again = decide(addr, &path, &cookie, &token, d, &page.code).await;
        assert_eq!(again.status, 409, "{}", again.body);
        assert!(
            again.body.contains("approved this request on this page"),
            "{}",
            again.body
        );
    }
    let later = request(
        addr,
        "GET",
        &path,
        &[("Host", &host(addr)), ("Cookie", &cookie)],
        b"",
    )
    .await;
    assert_eq!(later.status, 410);
    assert!(
        later.body.contains("approved this request on this page"),
        "{}",
        later.body
    );
}

#[tokio::test]
async fn page_deny_decides_deny() {
    let pages = Pages::new();
    let (mut page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    let (cookie, token) = first_get(addr, &path).await;
    let r = decide(addr, &path, &cookie, &token, "deny", &page.code).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("You denied this request on this page"),
        "{}",
        r.body
    );
    assert_eq!(decided(&mut page).await, PageDecision::Deny);
    let again = decide(addr, &path, &cookie, &token, "approve", &page.code).await;
    assert_eq!(again.status, 409);
    assert!(
        again.body.contains("denied this request on this page"),
        "{}",
        again.body
    );
}

#[tokio::test]
async fn page_forged_requests_decide_nothing() {
    let pages = Pages::new();
    let (mut page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    // a wrong Host (a DNS-rebound name) gets nothing, and does not use up the page
    let rebound = format!("evil.example:{}", addr.port());
    let r = request(addr, "GET", &path, &[("Host", &rebound)], b"").await;
    assert_eq!(r.status, 421);
    let r = request(addr, "GET", &path, &[], b"").await;
    assert_eq!(r.status, 421, "no Host");
    // nor does an image or a frame
    let r = request(
        addr,
        "GET",
        &path,
        &[("Host", &host(addr)), ("Sec-Fetch-Dest", "image")],
        b"",
    )
    .await;
    assert_eq!(r.status, 403);
    let (cookie, token) = first_get(addr, &path).await;
    // a second GET without the cookie: opened already
    let r = request(addr, "GET", &path, &[("Host", &host(addr))], b"").await;
    assert_eq!(r.status, 410);
    assert!(
        r.body.contains(
            "This question&#39;s page was opened already: decide in the window that opened it."
        ),
        "{}",
        r.body
    );
    let (h, o) = (host(addr), origin(addr));
    let good = format!("token={token}&decision=approve");
    let cases: Vec<Case> = vec![
        (
            "wrong token",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            "token=00ff&decision=approve".into(),
            403,
        ),
        (
            "missing token",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            "decision=approve".into(),
            400,
        ),
        (
            "foreign Origin",
            vec![
                ("Host", &h),
                ("Origin", "http://evil.example"),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            good.clone(),
            403,
        ),
        (
            "null Origin",
            vec![
                ("Host", &h),
                ("Origin", "null"),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            good.clone(),
            403,
        ),
        (
            "missing Origin",
            vec![("Host", &h), ("Cookie", &cookie), ("Content-Type", FORM)],
            good.clone(),
            403,
        ),
        (
            "wrong Host",
            vec![
                ("Host", &rebound),
                ("Origin", &o),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            good.clone(),
            421,
        ),
        (
            "cross-site fetch",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Sec-Fetch-Site", "same-site"),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            good.clone(),
            403,
        ),
        (
            "missing cookie",
            vec![("Host", &h), ("Origin", &o), ("Content-Type", FORM)],
            good.clone(),
            403,
        ),
        (
            "wrong cookie",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Cookie", "bridge_page=00"),
                ("Content-Type", FORM),
            ],
            good.clone(),
            403,
        ),
        (
            "not a form",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Cookie", &cookie),
                ("Content-Type", "text/plain"),
            ],
            good.clone(),
            415,
        ),
        (
            "decision twice",
            vec![
                ("Host", &h),
                ("Origin", &o),
                ("Cookie", &cookie),
                ("Content-Type", FORM),
            ],
            format!("{good}&decision=deny"),
            400,
        ),
    ];
    for (what, headers, body, want) in cases {
        let r = post(addr, &path, &headers, &body).await;
        assert_eq!(r.status, want, "{what}: {}", r.body);
        assert!(
            r.body.contains("nothing was decided") || want == 421 || want == 400,
            "{what}: {}",
            r.body
        );
        undecided(&mut page).await;
    }
    // nothing changed: the page's own decision still works
    let r = decide(addr, &path, &cookie, &token, "deny", &page.code).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(decided(&mut page).await, PageDecision::Deny);
}

#[tokio::test]
async fn page_expired_question_decides_nothing() {
    let pages = Pages::new();
    let (mut page, addr, path) = open(&pages, Duration::from_millis(600)).await;
    let (cookie, token) = first_get(addr, &path).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    // the timer ended it: a GET says so before any decision is tried
    let r = request(
        addr,
        "GET",
        &path,
        &[("Host", &host(addr)), ("Cookie", &cookie)],
        b"",
    )
    .await;
    assert_eq!(r.status, 410);
    assert!(r.body.contains("expired"), "{}", r.body);
    let r = decide(addr, &path, &cookie, &token, "approve", &page.code).await;
    assert_eq!(r.status, 410, "{}", r.body);
    assert!(
        r.body.contains("expired before it was decided"),
        "{}",
        r.body
    );
    undecided(&mut page).await;
}

#[tokio::test]
async fn page_closed_or_dropped_question_says_how_and_decides_nothing() {
    let pages = Pages::new();
    let (page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    let (cookie, token) = first_get(addr, &path).await;
    let code = page.code.clone();
    page.close(Closed::DeclinedInHost);
    let r = decide(addr, &path, &cookie, &token, "approve", &code).await;
    assert_eq!(r.status, 410);
    assert!(r.body.contains("declined in the host"), "{}", r.body);

    let (page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    let (cookie, token) = first_get(addr, &path).await;
    let code = page.code.clone();
    drop(page);
    let r = decide(addr, &path, &cookie, &token, "approve", &code).await;
    assert_eq!(r.status, 410);
    assert!(r.body.contains("withdrawn"), "{}", r.body);
}

/// `curl` run as `nobody`: (status, body).
fn curl_as_nobody(args: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "curl",
            "-sS",
        ])
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("setpriv and curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let code = code.trim().parse().unwrap_or_else(|_| {
        panic!(
            "curl as nobody: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, body.to_owned())
}

#[tokio::test]
async fn page_another_user_is_refused() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root, to ask as another user with setpriv (CI runs as root)");
    }
    let pages = Pages::new();
    let (mut page, addr, path) = open(&pages, Duration::from_secs(60)).await;
    let url = format!("http://127.0.0.1:{}{path}", addr.port());
    let (code, body) = tokio::task::spawn_blocking(move || curl_as_nobody(&[url.as_str()]))
        .await
        .unwrap();
    // the connection is closed before a byte of it is read: no answer at all (curl's 000)
    assert_eq!(code, 0, "{body}");
    assert!(!body.contains("token"), "{body}");
    // the refused GET did not use up the page
    let (cookie, token) = first_get(addr, &path).await;
    // nor can another user decide, even holding the cookie, the token and the code
    let url = format!("http://127.0.0.1:{}{path}", addr.port());
    let (o, c, d) = (
        format!("Origin: {}", origin(addr)),
        format!("Cookie: {cookie}"),
        format!("token={token}&decision=approve&code={}", page.code),
    );
    let (code, body) = tokio::task::spawn_blocking(move || {
        curl_as_nobody(&[
            "-H",
            &o,
            "-H",
            &c,
            "-H",
            "Sec-Fetch-Site: same-origin",
            "--data",
            &d,
            &url,
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{body}");
    undecided(&mut page).await;
    // and this user still decides
    let r = decide(addr, &path, &cookie, &token, "approve", &page.code).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(decided(&mut page).await, PageDecision::Approve);
}

/// A question whose command hides an escape sequence and a bidirectional override.
fn tricky_question() -> PageQuestion {
    let mut q = question(&format!(
        "printf 'build ok'\u{1b}[2K\rrm -rf ~/notes # \u{202e}txt.exe\necho ok ; touch /{}/LONGCMD",
        "home/me/project".repeat(12)
    ));
    q.fields.push((
        "Change".into(),
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n-old line\n+new line <b>not bold</b>\n same"
            .into(),
    ));
    q
}

/// The WebDriver key that is Enter.
const ENTER: &str = "\u{e007}";

/// A six-digit code that is not `code`.
fn wrong(code: &str) -> String {
    let n: u32 = code.parse().unwrap();
    format!("{:06}", (n + 1) % 1_000_000)
}

/// Where the screenshots of the browser test go: the test's work dir and
/// `<target>/page-screenshots/` (for a person to look at).
fn keep_screenshot(from: &std::path::Path, name: &str) -> PathBuf {
    let dir = target_dir().join("page-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let to = dir.join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

#[tokio::test]
async fn page_in_a_real_browser_shows_escapes_and_its_buttons_decide() {
    let dir = test_work_dir().join(format!("page-browser-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let browser = Browser::start(&dir).await;
    let pages = Pages::new();

    let mut page = pages
        .open(tricky_question(), Instant::now() + Duration::from_secs(120))
        .await
        .unwrap();
    // the question of a turn that is still running
    let turn = TurnPages::new(&pages);
    turn.add(&page);
    browser.goto(&page.url).await;
    browser.find("#approve").await;
    let text = browser.text().await;
    for shown in [
        "\\u{1b}[2K\\u{d}rm -rf ~/notes",
        "\\u{202e}txt.exe",
        "+new line <b>not bold</b>",
        "Approving allows this one request, once.",
        // the long command's heading counts its lines; an escape is shown, so is the example
        "Command (2 lines)",
        "an escape such as",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text}");
    }
    let source = browser.source().await;
    for raw in ['\u{1b}', '\r', '\u{202e}'] {
        assert!(
            !text.contains(raw) && !source.contains(raw),
            "{raw:?} is in the page"
        );
    }
    assert!(!source.contains("<b>not bold</b>"), "HTML was interpreted");
    let shot = dir.join("question.png");
    browser.screenshot(&shot).await;
    let kept = keep_screenshot(&shot, "question.png");
    eprintln!("screenshot: {}", kept.display());
    // Enter with no code decides nothing (the code is required, Deny is not the default)
    browser.type_into("#code", ENTER).await;
    browser.find("#approve").await;
    undecided(&mut page).await;
    // a wrong code, then Enter: back on the question, told how many tries are left
    browser
        .type_into("#code", &format!("{}{ENTER}", wrong(&page.code)))
        .await;
    browser.find("#wrong").await;
    let again = browser.text().await;
    assert!(
        again.contains("Wrong code: nothing was approved. 2 tries left"),
        "{again}"
    );
    assert!(
        again.contains("rm -rf ~/notes"),
        "the question is shown again: {again}"
    );
    undecided(&mut page).await;
    // the code the host showed beside the address, then Enter: approved
    browser
        .type_into("#code", &format!("{}{ENTER}", page.code))
        .await;
    browser.find("#outcome").await;
    let after = browser.text().await;
    assert!(
        after.contains("You approved this request on this page"),
        "{after}"
    );
    assert!(!after.contains("turn has ended since"), "{after}");
    browser.screenshot(&dir.join("approved.png")).await;
    keep_screenshot(&dir.join("approved.png"), "approved.png");
    assert_eq!(decided(&mut page).await, PageDecision::Approve);

    let mut second = pages
        .open(
            question("rm -rf build"),
            Instant::now() + Duration::from_secs(120),
        )
        .await
        .unwrap();
    browser.goto(&second.url).await;
    // no escape on the page, so no example of one
    assert!(!browser.text().await.contains("an escape such as"));
    browser.click("#deny").await;
    browser.find("#outcome").await;
    let after = browser.text().await;
    assert!(
        after.contains("You denied this request on this page"),
        "{after}"
    );
    assert_eq!(decided(&mut second).await, PageDecision::Deny);
    // the first page again in the same browser, once its turn ended: it says what happened,
    // the turn's end too
    drop(turn);
    browser.goto(&page.url).await;
    browser.find("#outcome").await;
    let later = browser.text().await;
    assert!(
        later.contains("approved this request on this page")
            && later.contains("turn has ended since"),
        "{later}"
    );

    // three wrong codes: the question is declined and its page has no Approve any more
    let mut third = pages
        .open(
            question("rm -rf build"),
            Instant::now() + Duration::from_secs(120),
        )
        .await
        .unwrap();
    browser.goto(&third.url).await;
    for left in ["2 tries left", "1 try left"] {
        browser
            .type_into("#code", &format!("{}{ENTER}", wrong(&third.code)))
            .await;
        browser.find("#wrong").await;
        assert!(browser.text().await.contains(left));
    }
    browser
        .type_into("#code", &format!("{}{ENTER}", wrong(&third.code)))
        .await;
    browser.find("#outcome").await;
    let declined = browser.text().await;
    assert!(
        declined.contains("Three wrong codes were typed on this page"),
        "{declined}"
    );
    assert!(!browser.source().await.contains("id=\"approve\""));
    assert_eq!(decided(&mut third).await, PageDecision::Deny);
    browser.quit().await;
    let _ = std::fs::remove_dir_all(dir.join("chromium-profile"));
}
