//! A real browser for the tests: headless Chromium driven through chromedriver's W3C WebDriver
//! API (JSON over HTTP on loopback). The distribution's `chromium` and `chromium-driver`
//! packages must be installed (`.ci/run` installs them); without them a test fails, never
//! skips.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::http1;

/// The key of an element reference in a WebDriver answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A program on `PATH`, or where the Debian package puts it.
fn program(name: &str, also: &[&str]) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    on_path.or_else(|| also.iter().map(PathBuf::from).find(|f| f.is_file()))
}

/// One chromedriver with one headless Chromium session.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
}

impl Browser {
    /// Start chromedriver on a free loopback port and a headless Chromium session whose profile
    /// lives in `dir`.
    pub async fn start(dir: &Path) -> Browser {
        let driver_bin = program("chromedriver", &["/usr/lib/chromium/chromedriver"])
            .expect("chromedriver is not installed: install the distribution's `chromium` and `chromium-driver` packages (apt-get install chromium chromium-driver); .ci/run does");
        let chromium = program("chromium", &["/usr/lib/chromium/chromium"])
            .or_else(|| program("chromium-browser", &[]))
            .expect("chromium is not installed: install the distribution's `chromium` and `chromium-driver` packages (apt-get install chromium chromium-driver); .ci/run does");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let log = std::fs::File::create(dir.join("chromedriver.log")).unwrap();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver_bin.display()));
        let mut b = Browser {
            driver,
            addr,
            session: String::new(),
        };
        b.wait_ready().await;
        let profile = dir.join("chromium-profile");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--window-size=1100,1500", "--no-first-run",
                         format!("--user-data-dir={}", profile.display())],
            },
        }}});
        let v = b.call("POST", "/session", Some(caps)).await;
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        b
    }

    async fn wait_ready(&mut self) {
        for _ in 0..100 {
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                let v = self.call("GET", "/status", None).await;
                if v["ready"] == true {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not become ready on {}", self.addr);
    }

    /// One WebDriver command; its `value`. Panics on a WebDriver error.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.request(method, path, body).await;
        if status != 200 {
            panic!("{method} {path}: HTTP {status}: {v}");
        }
        v["value"].clone()
    }

    /// One WebDriver command: its HTTP status and its answer.
    async fn request(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let host = self.addr.to_string();
        let r = http1::request(
            self.addr,
            method,
            path,
            &[
                ("Host", &host),
                ("Content-Type", "application/json; charset=utf-8"),
            ],
            body.as_bytes(),
        )
        .await;
        let v: Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", r.body));
        (r.status, v)
    }

    fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Navigate to `url` (waits for the page to load).
    pub async fn goto(&self, url: &str) {
        self.call("POST", &self.at("/url"), Some(json!({ "url": url })))
            .await;
    }

    /// The element matching `css`, waiting up to 10 s for it.
    pub async fn find(&self, css: &str) -> String {
        let body = json!({"using": "css selector", "value": css});
        for _ in 0..100 {
            let r = http1::request(
                self.addr,
                "POST",
                &self.at("/element"),
                &[
                    ("Host", &self.addr.to_string()),
                    ("Content-Type", "application/json"),
                ],
                body.to_string().as_bytes(),
            )
            .await;
            if r.status == 200 {
                let v: Value = serde_json::from_str(&r.body)
                    .unwrap_or_else(|e| panic!("find {css:?}: {e}: {r:?}"));
                return v["value"][ELEMENT]
                    .as_str()
                    .unwrap_or_else(|| panic!("find {css:?}: {r:?}"))
                    .to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no element {css:?} on the page: {}", self.text().await);
    }

    /// Click the element matching `css`.
    pub async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.call(
            "POST",
            &self.at(&format!("/element/{e}/click")),
            Some(json!({})),
        )
        .await;
    }

    /// Type `text` into the element matching `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call(
            "POST",
            &self.at(&format!("/element/{e}/value")),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// The rendered text of the page's body. A page that is replaced while it is read (a
    /// form's POST answered with the next page) is read again.
    pub async fn text(&self) -> String {
        for _ in 0..50 {
            let body = json!({"using": "css selector", "value": "body"});
            let e = self.call("POST", &self.at("/element"), Some(body)).await;
            let id = e[ELEMENT].as_str().unwrap().to_owned();
            let text = self.at(&format!("/element/{id}/text"));
            match self.request("GET", &text, None).await {
                (200, v) => return v["value"].as_str().unwrap_or_default().to_owned(),
                (_, v) if v["value"]["error"] == "stale element reference" => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (status, v) => panic!("GET {text}: HTTP {status}: {v}"),
            }
        }
        panic!("the page kept being replaced while its text was read")
    }

    /// The page's DOM serialized.
    pub async fn source(&self) -> String {
        let v = self.call("GET", &self.at("/source"), None).await;
        v.as_str().unwrap_or_default().to_owned()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", &self.at("/screenshot"), None).await;
        let png = base64(v.as_str().expect("a base64 screenshot"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
    }

    /// End the session (Chromium exits) and chromedriver.
    pub async fn quit(mut self) {
        let at = self.at("");
        self.call("DELETE", &at, None).await;
        self.session.clear();
    }
}

impl Drop for Browser {
    /// After a failed test: end the session first (Chromium runs in a process group of its
    /// own, which killing chromedriver leaves running), with a blocking request.
    fn drop(&mut self) {
        if !self.session.is_empty() {
            use std::io::{Read, Write};
            if let Ok(mut s) =
                std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))
            {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = write!(
                    s,
                    "DELETE /session/{} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                    self.session, self.addr
                );
                let _ = s.read(&mut [0u8; 1024]);
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (with padding) decoded.
fn base64(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, c)| acc | (value(*c) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}
